package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv, set to 1, turns missing PostgreSQL binaries (or a server
// that does not start) from a skip into a failure. CI sets it.
const RequireEnv = "RECLAIMER_REQUIRE_POSTGRES"

// BinEnv names a folder holding initdb and postgres, tried first.
const BinEnv = "RECLAIMER_PG_BIN"

// folderPrefix names the temporary folders of servers; a folder whose
// owner process is gone is a leftover of a killed run.
const folderPrefix = "reclaimer-pgtest-"

// superuser is the role initdb creates; tests connect as it.
const superuser = "reclaimer"

// sharedDatabase holds the schemas of NewSchema.
const sharedDatabase = "shared"

// Server is a running PostgreSQL of one test package.
type Server struct {
	// Dir is the server's folder; its Unix socket is Dir/.s.PGSQL.5432.
	Dir string
	// Started is how long initdb and the start took.
	Started time.Duration

	cmd    *exec.Cmd
	exited chan struct{}
	admin  *pgx.Conn
	mu     sync.Mutex // serialises CREATE DATABASE on admin
	dbs    atomic.Int64
}

var (
	once     sync.Once
	shared   *Server
	startErr error
)

// Main runs the package's tests and then stops the server if one was
// started. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop PostgreSQL: %v\n", err)
		}
	}
	return code
}

// Shared returns the package's server, starting it at the first call.
// Without the binaries it skips tb (fails it under RECLAIMER_REQUIRE_POSTGRES=1).
func Shared(tb testing.TB) *Server {
	tb.Helper()
	once.Do(func() { shared, startErr = start() })
	if startErr != nil {
		if os.Getenv(RequireEnv) == "1" || !errors.Is(startErr, errNoBinaries) {
			tb.Fatalf("PostgreSQL for tests: %v", startErr)
		}
		tb.Skipf("%v; skipping the tests against a real PostgreSQL (set %s=1 to make this a failure)", startErr, RequireEnv)
	}
	return shared
}

// NewDatabase creates a fresh, empty database on the package's server and
// returns its URL (postgres:///NAME?host=DIR&user=...). A database is
// isolated in everything, advisory locks and LISTEN channels included,
// and costs a copy of the template (tenths of a second on a busy machine).
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	return Shared(tb).NewDatabase(tb)
}

// NewSchema creates a fresh, empty schema in a database the package's
// tests share, and returns a URL whose search_path is that schema. Tables,
// functions and sequences are isolated; advisory locks and LISTEN channels
// are not (they belong to the database): use NewDatabase for tests of
// those. A schema costs milliseconds.
func NewSchema(tb testing.TB) string {
	tb.Helper()
	return Shared(tb).NewSchema(tb)
}

// NewDatabase creates a fresh, empty database and returns its URL.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%04d", s.dbs.Add(1))
	// FILE_COPY copies the template's files and checkpoints, which with
	// fsync off is cheaper than logging every block (the default).
	s.admin1(tb, "CREATE DATABASE "+name+" STRATEGY FILE_COPY")
	return s.URL(name)
}

// NewSchema creates a fresh, empty schema and returns its URL.
func (s *Server) NewSchema(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("s%04d", s.dbs.Add(1))
	s.admin1(tb, "CREATE SCHEMA "+name+" AUTHORIZATION "+superuser)
	u, err := url.Parse(s.URL(sharedDatabase))
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// admin1 runs one statement on the admin connection (of the shared database).
func (s *Server) admin1(tb testing.TB, sql string) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.admin.Exec(ctx, sql); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// URL is the connection URL of database name on this server.
func (s *Server) URL(name string) string {
	return URLFor(s.Dir, name)
}

// URLFor is the URL of database name through the socket in folder dir (the
// server's, or a Proxy's).
func URLFor(dir, name string) string {
	q := url.Values{"host": {dir}, "user": {superuser}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", Path: "/" + name, RawQuery: q.Encode()}).String()
}

var errNoBinaries = errors.New("PostgreSQL server binaries (initdb, postgres) not found: install Debian's postgresql package")

// binDir finds a folder with initdb and postgres.
func binDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv(BinEnv); dir != "" {
		if !has(dir) {
			return "", fmt.Errorf("%s=%s holds no initdb and postgres", BinEnv, dir)
		}
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	// Debian keeps the server binaries off PATH, one folder per major
	// version: take the newest.
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", errNoBinaries
}

// runAs is who runs the server: nil for the current user, nobody for root.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no user nobody to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user nobody: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func start() (*Server, error) {
	began := time.Now()
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	removeLeftovers()
	dir, err := os.MkdirTemp("", folderPrefix)
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir}
	ok := false
	defer func() {
		if !ok {
			_ = s.stop()
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("give the server folder to nobody: %w", err)
		}
	}
	data := filepath.Join(dir, "data")
	env := []string{"LC_ALL=C", "TZ=UTC", "PATH=/usr/bin:/bin", "HOME=" + dir}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", superuser, "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Env, initdb.Dir = env, dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}

	// The postgres process itself, not pg_ctl: as our child it gets a
	// parent-death signal (SIGQUIT: immediate shutdown), so a killed test
	// binary never leaves a server running.
	var logs bytes.Buffer
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses=", "-c", "unix_socket_directories="+dir, "-c", "unix_socket_permissions=0700",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off",
		"-c", "max_connections=300", "-c", "shared_buffers=64MB", "-c", "log_min_messages=warning",
		"-c", "timezone=UTC")
	s.cmd.Env, s.cmd.Dir = env, dir
	s.cmd.Stdout, s.cmd.Stderr = &lockedBuffer{b: &logs}, &lockedBuffer{b: &logs}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	// Polling is the only way to know a child server is ready.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.admin, err = pgx.Connect(ctx, s.URL("template1"))
		cancel()
		if err == nil {
			break
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("postgres exited at start: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("postgres did not accept connections within 30 s: %v\n%s", err, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+sharedDatabase); err != nil {
		return nil, fmt.Errorf("create the shared test database: %w", err)
	}
	// The admin connection moves to the shared database, which it
	// creates schemas in; databases are created from template1, which
	// must then have no one connected.
	_ = s.admin.Close(ctx)
	if s.admin, err = pgx.Connect(ctx, s.URL(sharedDatabase)); err != nil {
		return nil, fmt.Errorf("connect to the shared test database: %w", err)
	}
	s.Started = time.Since(began)
	ok = true
	return s, nil
}

// stop shuts the server down fast (SIGINT: smart enough to end sessions,
// no checkpoint wait worth having with fsync off) and removes its folder.
func (s *Server) stop() error {
	var errs []error
	if s.admin != nil {
		_ = s.admin.Close(context.Background())
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Signal(syscall.SIGQUIT)
			<-s.exited
		}
	}
	if s.Dir != "" {
		errs = append(errs, os.RemoveAll(s.Dir))
	}
	return errors.Join(errs...)
}

// removeLeftovers removes server folders of test processes that are gone
// (their servers died with them through the parent-death signal).
func removeLeftovers() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), folderPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		// The server's own pid file: a live postmaster keeps its folder.
		if b, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid")); err == nil {
			line, _, _ := strings.Cut(string(b), "\n")
			if p, err := strconv.Atoi(strings.TrimSpace(line)); err == nil && p > 0 && syscall.Kill(p, 0) != syscall.ESRCH {
				continue
			}
		}
		_ = os.RemoveAll(d)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
