package pgtest

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// TestFreshDatabases: each database starts empty and is the test's own.
func TestFreshDatabases(t *testing.T) {
	a, b := connect(t, NewDatabase(t)), connect(t, NewDatabase(t))
	if _, err := a.Exec(t.Context(), `CREATE TABLE x (v int); INSERT INTO x VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE tablename = 'x'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("second database sees %d tables named x (%v), want 0", n, err)
	}
	var user string
	if err := a.QueryRow(t.Context(), `SELECT current_setting('listen_addresses')`).Scan(&user); err != nil || user != "" {
		t.Fatalf("listen_addresses = %q (%v), want none: the test server must not listen on TCP", user, err)
	}
	t.Logf("server started in %v", Shared(t).Started)
}

// TestServerNotRoot: PostgreSQL runs as a user other than root.
func TestServerNotRoot(t *testing.T) {
	s := Shared(t)
	st, err := os.Stat(s.Dir + "/data/postmaster.pid")
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 && ownerOf(st) == 0 {
		t.Fatal("the server's files belong to root")
	}
}

// TestProxyPauseAndCut: a paused proxy holds queries until Restore; a cut
// one drops the connection.
func TestProxyPauseAndCut(t *testing.T) {
	p := Shared(t).NewProxy(t)
	c := connect(t, p.URL("postgres"))
	if _, err := c.Exec(t.Context(), `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	p.Pause()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err := c.Exec(ctx, `SELECT 1`)
	cancel()
	if err == nil {
		t.Fatal("a query through a paused proxy answered")
	}
	p.Restore()
	c2 := connect(t, p.URL("postgres"))
	if _, err := c2.Exec(t.Context(), `SELECT 1`); err != nil {
		t.Fatalf("after restore: %v", err)
	}
	p.Cut()
	if _, err := c2.Exec(t.Context(), `SELECT 1`); err == nil {
		t.Fatal("a query through a cut proxy answered")
	}
	ctx, cancel = context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if c3, err := pgx.Connect(ctx, p.URL("postgres")); err == nil {
		c3.Close(ctx)
		t.Fatal("a cut proxy let a new connection through")
	}
	p.Restore()
	connect(t, p.URL("postgres"))
}

// TestKilledTestBinaryTakesItsServer: a test process killed with SIGKILL
// leaves no server running (the parent-death signal), and the next start
// removes its folder.
func TestKilledTestBinaryTakesItsServer(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		s := Shared(t)
		os.Stdout.WriteString(strconv.Itoa(s.cmd.Process.Pid) + " " + s.Dir + "\n")
		select {} // until killed
	}
	Shared(t) // skips without binaries
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledTestBinaryTakesItsServer$")
	cmd.Env = append(os.Environ(), "PGTEST_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said nothing: %v", err)
	}
	pidText, dir, _ := strings.Cut(strings.TrimSpace(line), " ")
	pid, _ := strconv.Atoi(pidText)
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("child's server %d is not running", pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	// The server is not our child: polling is the only way to see it go.
	deadline := time.Now().Add(20 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGQUIT)
			t.Fatalf("server %d still runs 20 s after its test binary was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("folder %s of the killed run: %v (want it there until the next start)", dir, err)
	}
	removeLeftovers()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("folder %s of the killed run left after removeLeftovers: %v", dir, err)
	}
}

// TestBinariesFound: RECLAIMER_PG_BIN is tried first and must hold the
// server; without it the newest Debian folder is found.
func TestBinariesFound(t *testing.T) {
	t.Setenv(BinEnv, t.TempDir())
	if _, err := binDir(); err == nil || !strings.Contains(err.Error(), BinEnv) {
		t.Fatalf("binDir with an empty %s: %v, want an error naming it", BinEnv, err)
	}
	t.Setenv(BinEnv, "")
	dir, err := binDir()
	if errors.Is(err, errNoBinaries) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/initdb"); err != nil {
		t.Fatalf("binDir = %s: %v", dir, err)
	}
}
