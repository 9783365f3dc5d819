package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/cli"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
	"github.com/reclaimer/reclaimer/internal/testtree"
	"github.com/reclaimer/reclaimer/internal/views"
)

// argsEnv, when set, makes this binary a replica: it runs the reclaimer
// command line it holds (separated by the unit separator, 0x1f) and exits with its code.
const argsEnv = "RECLAIMER_FLEET_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(argsEnv); args != "" {
		ctx, stop := signalContext()
		code := cli.Run(ctx, strings.Split(args, "\x1f"), cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Version: "fleet-test"})
		stop()
		os.Exit(code)
	}
	os.Exit(pgtest.Main(m))
}

const (
	lease    = 3 * time.Second
	e2bKey   = "e2b-test-key"
	source   = "sandboxes" // the remote source's name, the same on every replica
	slowCall = 25 * time.Millisecond
)

// call is one request a replica made to the provider.
type call struct {
	replica    string
	method     string
	path       string
	start, end time.Time
}

// provider is the E2B fake behind one front per replica: each replica
// has its own endpoint, so every call is known by who made it, and the
// fronts make the calls that act (pause, delete) slow.
type provider struct {
	fake *fakes.E2B
	mu   sync.Mutex
	log  []call
}

func (p *provider) front(t *testing.T, replica string) string {
	target, _ := url.Parse(p.fake.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := call{replica: replica, method: r.Method, path: r.URL.Path, start: time.Now()}
		if acts(c) {
			time.Sleep(slowCall)
		}
		r.Host = target.Host // the contract matches requests against the fake's own address
		rp.ServeHTTP(w, r)
		c.end = time.Now()
		p.mu.Lock()
		p.log = append(p.log, c)
		p.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// acts tells a call that changes a sandbox's state.
func acts(c call) bool {
	return c.method == http.MethodDelete || strings.HasSuffix(c.path, "/pause")
}

func (p *provider) calls() []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]call(nil), p.log...)
}

// pauses counts the pause calls per sandbox, and by whom.
func (p *provider) pauses() (per map[string]int, by map[string]int) {
	per, by = map[string]int{}, map[string]int{}
	for _, c := range p.calls() {
		if strings.HasSuffix(c.path, "/pause") {
			id := strings.TrimSuffix(strings.TrimPrefix(c.path, "/sandboxes/"), "/pause")
			per[id]++
			by[c.replica]++
		}
	}
	return per, by
}

// replica is one `reclaimer serve` process.
type replica struct {
	name, dir, config, sock, token string
	runs                           string
	cmd                            *exec.Cmd
	logs                           *testtree.SyncBuffer
}

func newReplica(t *testing.T, name, ledgerURL, endpoint string) *replica {
	dir, err := os.MkdirTemp("", "fleet-"+name+"-") // short: a socket path fits in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := &replica{name: name, dir: dir, sock: filepath.Join(dir, "api.sock"), token: "token-of-" + name + "-0123456789",
		runs: filepath.Join(dir, "runs"), logs: &testtree.SyncBuffer{}}
	write := func(rel, data string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("token", r.token+"\n")
	write("e2b.key", e2bKey+"\n")
	for i := range 3 {
		write(fmt.Sprintf("runs/run-%d/home/.cache/blob", i), strings.Repeat("x", 4096))
		write(fmt.Sprintf("runs/run-%d/work.txt", i), "work")
	}
	r.config = filepath.Join(dir, "reclaimer.toml")
	write("reclaimer.toml", fmt.Sprintf(`
[ledger]
path = %q
url = %q

[server]
name = %q
listen = "unix:%s"
token_file = %q
interval = "1s"
log_level = "debug"
leader_lease = %q

[[dirs]]
root = %q
home = "home"

[[e2b]]
name = %q
endpoint = %q
api_key_file = %q
metadata = { fleet = "test" }
rate = 1000
idle_suspend = "1h"
`, filepath.Join(dir, "state", "ledger.db"), ledgerURL, name, r.sock, filepath.Join(dir, "token"), lease.String(),
		r.runs, source, endpoint, filepath.Join(dir, "e2b.key")))
	return r
}

func (r *replica) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), argsEnv+"="+strings.Join([]string{"--config", r.config, "serve"}, "\x1f"))
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.cmd = cmd
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			r.cmd.Process.Signal(syscall.SIGCONT)
			r.cmd.Process.Kill()
			r.cmd.Wait()
		}
		if t.Failed() || os.Getenv("RECLAIMER_FLEET_LOGS") != "" {
			t.Logf("logs of %s:\n%s", r.name, r.logs.String())
		}
	})
}

func (r *replica) client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", r.sock)
		}}}
}

// do sends a request to the replica's API and decodes the answer into out.
func (r *replica) do(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, "http://replica"+path, rd)
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, nil
}

// eventually polls cond every 50 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

func sandboxes(f *fakes.E2B, prefix string, n int, started time.Time) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
		f.Add(fakes.E2BSandbox{ID: ids[i], Metadata: map[string]string{"fleet": "test"}, StartedAt: started, EndAt: started.Add(24 * time.Hour)})
	}
	return ids
}

func allPaused(f *fakes.E2B, ids []string) bool {
	for _, id := range ids {
		if s, ok := f.Get(id); !ok || s.State != "paused" {
			return false
		}
	}
	return true
}

// TestFleetOfProcesses runs three replicas of `reclaimer serve` against
// one PostgreSQL and one E2B fake: the leader alone pauses the idle
// sandboxes; a kill -9 and a SIGSTOP of the leader hand the work over
// within two leases, with no call by the old leader after its lease and
// no sandbox paused twice but the one call in flight; a hold taken on
// one replica keeps the leader off that sandbox; a replica cut off
// PostgreSQL says so and resumes; each host's run folders are reclaimed
// by that host alone.
func TestFleetOfProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes for about a minute")
	}
	srv := pgtest.Shared(t)
	dbURL := srv.NewDatabase(t)
	u, _ := url.Parse(dbURL)
	dbName := strings.TrimPrefix(u.Path, "/")
	cut := srv.NewProxy(t)                                                         // between r2 and PostgreSQL
	store, err := postgres.Open(t.Context(), dbURL+"&application_name=fleet-test") // not counted with the replicas'

	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })

	fake := fakes.NewE2B(t, e2bKey, time.Now)
	p := &provider{fake: fake}
	now := time.Now()
	held := sandboxes(fake, "held", 1, now)[0] // not idle yet
	rs := map[string]*replica{
		"r1": newReplica(t, "r1", dbURL, p.front(t, "r1")),
		"r2": newReplica(t, "r2", pgtest.URLFor(cut.Dir, dbName), p.front(t, "r2")),
		"r3": newReplica(t, "r3", dbURL, p.front(t, "r3")),
	}
	leaderNow := func() (string, int64, time.Time) {
		l, err := store.Current(context.Background(), ops.RemoteLease)
		if err != nil {
			return "", 0, time.Time{}
		}
		return ops.ReplicaOfHolder(l.Holder), l.Generation, l.ExpiresAt
	}

	// r1 first, so that it leads; then the others follow it.
	rs["r1"].start(t)
	eventually(t, 20*time.Second, "r1 leads", func() bool { l, _, _ := leaderNow(); return l == "r1" })
	rs["r2"].start(t)
	rs["r3"].start(t)
	heldKey := ledger.Key{Backend: "e2b", Source: source, ID: held}
	eventually(t, 20*time.Second, "the leader records the sandboxes", func() bool {
		_, err := store.Runtime(context.Background(), heldKey)
		return err == nil
	})

	// The status of a follower shows the fleet.
	var st views.Status
	eventually(t, 20*time.Second, "r3 shows three replicas and r1 leading", func() bool {
		code, err := rs["r3"].do("GET", "/v1/status", nil, &st)
		return err == nil && code == 200 && st.Fleet != nil && st.Fleet.Leader == "r1" && !st.Fleet.Leading &&
			len(st.Fleet.Replicas) == 3 && st.Fleet.Replica == "r3"
	})

	// The follower's dashboard shows the replicas and who leads.
	page := rs["r3"].dashboard(t, "/")
	for _, want := range []string{`<strong id="leader">r1</strong>`, fmt.Sprintf(`<span id="generation">%d</span>`, st.Fleet.Generation),
		`<tr data-replica="r1" class="alive">`, `<tr data-replica="r2" class="alive">`, `<tr data-replica="r3" class="alive">`} {
		if !strings.Contains(page, want) {
			t.Errorf("r3's overview lacks %s:\n%s", want, page)
		}
	}
	if !regexp.MustCompile(`(?s)<tr data-replica="r1"[^>]*>.*?<strong>leader</strong>.*?</tr>`).MatchString(page) {
		t.Errorf("r3's overview does not say r1 leads:\n%s", page)
	}

	// The leader says so in its metrics; a follower too.
	for name, want := range map[string]string{"r1": "reclaimer_leader 1", "r3": "reclaimer_leader 0"} {
		req, _ := http.NewRequest("GET", "http://replica/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+rs[name].token)
		resp, err := rs[name].client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "\n"+want+"\n") || !strings.Contains(string(body), "reclaimer_leader_changes_total 1") {
			t.Errorf("metrics of %s lack %q and one leader change", name, want)
		}
	}

	// A hold taken on r3 keeps r1's passes off the sandbox.
	var hold views.Hold
	code, err := rs["r3"].do("POST", "/v1/runtimes/"+held+"/holds?backend=e2b&source="+source,
		map[string]string{"holder": "agent", "ttl": "1h"}, &hold)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("take a hold on r3: %d %v", code, err)
	}
	// A pass for the remote sources asked of a follower: who leads.
	var problem struct {
		Error struct{ Code, Message string }
	}
	code, _ = rs["r3"].do("POST", "/v1/passes", map[string]any{"runtimes": []string{source + "/" + held}}, &problem)
	if code != http.StatusMisdirectedRequest || problem.Error.Code != "not_leader" || !strings.Contains(problem.Error.Message, "r1") {
		t.Errorf("pass of a remote runtime on a follower: %d %+v", code, problem)
	}

	// Everything idle now: the held one, and 150 more.
	fake.Add(fakes.E2BSandbox{ID: held, Metadata: map[string]string{"fleet": "test"}, StartedAt: now.Add(-2 * time.Hour), EndAt: now.Add(24 * time.Hour)})
	groupA := sandboxes(fake, "a", 150, now.Add(-2*time.Hour))

	// kill -9 the leader in the middle of its pauses.
	eventually(t, 30*time.Second, "r1 pauses 40 sandboxes", func() bool { _, by := p.pauses(); return by["r1"] >= 40 })
	_, genKilled, _ := leaderNow()
	rs["r1"].cmd.Process.Kill()
	killedAt := time.Now()
	rs["r1"].cmd.Wait()
	took := eventually(t, 2*lease+time.Second, "another replica leads after kill -9", func() bool {
		l, g, _ := leaderNow()
		return l != "" && l != "r1" && g > genKilled
	})
	t.Logf("kill -9 of the leader: a new leader after %s (lease %s)", time.Since(killedAt).Round(time.Millisecond), lease)
	if took > 2*lease {
		t.Errorf("a new leader after %s, more than twice the lease", took)
	}
	eventually(t, 60*time.Second, "the new leader pauses the rest", func() bool { return allPaused(fake, groupA) })

	// SIGSTOP the leader in the middle of its pauses.
	stopped, _, _ := leaderNow()
	_, byBefore := p.pauses()
	groupB := sandboxes(fake, "b", 150, now.Add(-2*time.Hour))
	eventually(t, 30*time.Second, stopped+" pauses 30 of the second group", func() bool {
		_, by := p.pauses()
		return by[stopped] >= byBefore[stopped]+30
	})
	rs[stopped].cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(200 * time.Millisecond) // what it had sent reaches PostgreSQL
	stoppedAt := time.Now()
	_, genStopped, leaseEnd := leaderNow()
	eventually(t, 2*lease+time.Second, "another replica leads after SIGSTOP", func() bool {
		l, g, _ := leaderNow()
		return l != "" && l != stopped && g > genStopped
	})
	t.Logf("SIGSTOP of the leader: a new leader after %s", time.Since(stoppedAt).Round(time.Millisecond))
	eventually(t, 60*time.Second, "the new leader pauses the rest of the second group", func() bool { return allPaused(fake, groupB) })
	rs[stopped].cmd.Process.Signal(syscall.SIGCONT)
	eventually(t, 10*time.Second, stopped+" says it no longer leads", func() bool {
		return strings.Contains(rs[stopped].logs.String(), "no longer leading")
	})
	time.Sleep(2 * time.Second) // a pass or two of the woken replica

	for _, c := range p.calls() {
		if c.replica == stopped && c.start.After(leaseEnd) {
			t.Errorf("%s called the provider after its lease ran out at %s: %s %s at %s", stopped,
				leaseEnd.Format(time.StampMilli), c.method, c.path, c.start.Format(time.StampMilli))
		}
	}
	per, by := p.pauses()
	twice := 0
	for id, n := range per {
		switch {
		case n > 2:
			t.Errorf("sandbox %s paused %d times", id, n)
		case n == 2:
			twice++
		}
	}
	if twice > 2 { // one call in flight at each of the two takeovers
		t.Errorf("%d sandboxes paused twice; at most the one call in flight at each takeover may be", twice)
	}
	if per[held] != 0 {
		t.Errorf("the held sandbox was paused %d times", per[held])
	}
	if s, _ := fake.Get(held); s.State != "running" {
		t.Errorf("the held sandbox is %s", s.State)
	}
	t.Logf("pauses by replica: %v; sandboxes paused twice: %d", by, twice)

	// A replica cut off PostgreSQL stops, says so, and resumes.
	r2 := rs["r2"]
	cut.Cut()
	eventually(t, 2*lease+2*time.Second, "r2 says the ledger does not answer", func() bool {
		return strings.Contains(r2.logs.String(), "the ledger (PostgreSQL) does not answer")
	})
	cut.Restore()
	eventually(t, 2*lease+2*time.Second, "r2 says the ledger answers again", func() bool {
		return strings.Contains(r2.logs.String(), "answers again")
	})

	// Local runtimes: each host's run folders lost their caches, by their
	// host (the only one whose source lists them), and no replica marked
	// another's missing.
	for _, name := range []string{"r2", "r3"} {
		r := rs[name]
		eventually(t, 20*time.Second, name+" drops its run folders' caches", func() bool {
			for i := range 3 {
				if _, err := os.Stat(filepath.Join(r.runs, fmt.Sprintf("run-%d/home/.cache", i))); err == nil {
					return false
				}
			}
			return true
		})
	}
	recs, err := store.ListRuntimes(context.Background(), ledger.RuntimeFilter{Backend: "dir"})
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]int{}
	for _, rec := range recs {
		owner, _, _ := strings.Cut(rec.Key.Source, "/")
		owners[owner]++
		if rec.State == string(backend.StateMissing) {
			t.Errorf("%s is marked missing", rec.Key.Unique())
		}
	}
	if owners["r1"] != 3 || owners["r2"] != 3 || owners["r3"] != 3 {
		t.Errorf("run folders by owner: %v, want 3 each", owners)
	}
	// Every replica's API shows every host's runtimes.
	var list views.RuntimeList
	if code, err := rs["r3"].do("GET", "/v1/runtimes?backend=dir", nil, &list); err != nil || code != 200 || len(list.Runtimes) != 9 {
		t.Errorf("r3 lists %d run folders (%d %v), want every host's 9", len(list.Runtimes), code, err)
	}

	// Connections: at most the pool and the LISTEN one per replica.
	conn, err := pgx.Connect(context.Background(), dbURL+"&application_name=fleet-test")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var conns int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'reclaimer'`).Scan(&conns); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL connections of the replicas now: %d", conns)
	if conns > 3*(postgres.DefaultMaxConns+1) {
		t.Errorf("%d connections for 3 replicas, more than %d each", conns, postgres.DefaultMaxConns+1)
	}

	// SIGTERM of the leader: it resigns, another takes over at once.
	lead, gen, _ := leaderNow()
	if r := rs[lead]; r != nil && r.cmd.ProcessState == nil {
		r.cmd.Process.Signal(syscall.SIGTERM)
		termAt := time.Now()
		eventually(t, lease, "another replica leads after SIGTERM", func() bool {
			l, g, _ := leaderNow()
			return l != "" && l != lead && g > gen
		})
		t.Logf("SIGTERM of the leader: a new leader after %s", time.Since(termAt).Round(time.Millisecond))
		if err := r.cmd.Wait(); err != nil {
			t.Errorf("%s after SIGTERM: %v", lead, err)
		}
	}
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// dashboard logs in to the replica's dashboard with its token and returns
// the page at path.
func (r *replica) dashboard(t *testing.T, path string) string {
	t.Helper()
	c := r.client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.PostForm("http://replica/login", url.Values{"token": {r.token}, "next": {path}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 {
		t.Fatalf("dashboard login on %s: %s", r.name, resp.Status)
	}
	req, _ := http.NewRequest("GET", "http://replica"+path, nil)
	for _, ck := range resp.Cookies() {
		req.AddCookie(ck)
	}
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s on %s: %s\n%s", path, r.name, resp.Status, data)
	}
	return string(data)
}
