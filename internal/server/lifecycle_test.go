package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/notify"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestRegistrationsAndOrphans: in a registered_only source, what no host
// registered is announced and then deleted as an orphan (archived first:
// a run folder holds work); a shared runtime goes only when its last
// conversation lets go.
func TestRegistrationsAndOrphans(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "shared", "stray", "hostowned")
	cfg := writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\nregistered_only = true\ngrace = \"0s\"\n")
	// Register before the daemon's first pass can see them: a second
	// process (the host) does it through the API once it is up.
	h := startDaemon(t, dir, cfg, server.Options{})
	reg, err := h.api.RegisterRuntimeWithResponse(h.ctx(), openapi.Registration{Backend: "dir", Id: "shared",
		Conversations: []string{"c1", "c2"}, Labels: map[string]string{"host": "h1"}})
	if err != nil || reg.JSON200 == nil || !slices.Equal(reg.JSON200.Conversations, []string{"c1", "c2"}) {
		t.Fatalf("register: %v %s", err, body(reg))
	}
	// Registering again adds owners, never loses one.
	reg, _ = h.api.RegisterRuntimeWithResponse(h.ctx(), openapi.Registration{Backend: "dir", Id: "shared", Conversations: []string{"c2", "c3"}})
	if reg.JSON200 == nil || !slices.Equal(reg.JSON200.Conversations, []string{"c1", "c2", "c3"}) {
		t.Fatalf("register again: %s", body(reg))
	}
	// A host may own one without naming conversations: not an orphan.
	if r, _ := h.api.RegisterRuntimeWithResponse(h.ctx(), openapi.Registration{Backend: "dir", Id: "hostowned"}); status(r) != 200 {
		t.Fatalf("register without conversations: %s", body(r))
	}
	if r, _ := h.api.RegisterRuntimeWithResponse(h.ctx(), openapi.Registration{Backend: "docker", Id: "x"}); status(r) != 400 {
		t.Fatalf("unknown backend: %s", body(r))
	}

	// Two passes: the stray is announced, then deleted (archived first).
	var deleted *openapi.Result
	for range 3 {
		p := h.pass(openapi.PassRequest{})
		for _, r := range p.Applied.Results {
			if r.Runtime == "stray" && r.Outcome == plan.Done {
				deleted = &r
			}
			if r.Runtime == "shared" || r.Runtime == "hostowned" {
				t.Fatalf("a registered runtime was acted on: %+v", r)
			}
		}
		if deleted != nil {
			break
		}
	}
	if deleted == nil || deleted.Step != backend.StepDelete || deleted.ArchiveID == "" {
		t.Fatalf("the orphan was not deleted after an archive: %+v", deleted)
	}
	if exists(filepath.Join(runs, "stray")) || !exists(filepath.Join(runs, "shared")) || !exists(filepath.Join(runs, "hostowned")) {
		t.Fatal("wrong folders removed")
	}

	// Owners let go one by one; the last one removes it.
	for _, c := range []string{"c1", "c3"} {
		rel, err := h.api.ReleaseRuntimeWithResponse(h.ctx(), "shared", &openapi.ReleaseRuntimeParams{Conversation: c})
		if err != nil || rel.JSON200 == nil || rel.JSON200.Removed {
			t.Fatalf("release %s: %v %s", c, err, body(rel))
		}
	}
	rel, err := h.api.ReleaseRuntimeWithResponse(h.ctx(), "shared", &openapi.ReleaseRuntimeParams{Conversation: "c2"})
	if err != nil || rel.JSON200 == nil || !rel.JSON200.Removed || len(rel.JSON200.Conversations) != 0 || rel.JSON200.Result.ArchiveID == "" {
		t.Fatalf("last release: %v %s", err, body(rel))
	}
	if exists(filepath.Join(runs, "shared")) {
		t.Fatal("released runtime still there")
	}
	// The journal says what caused the removal: the last conversation
	// letting go, not a person's request.
	const why = "released: conversation c2, the last that owned it, let go"
	j, err := h.api.GetJournalWithResponse(h.ctx(), &openapi.GetJournalParams{Runtime: "shared"})
	if err != nil || j.JSON200 == nil {
		t.Fatalf("journal: %v %s", err, body(j))
	}
	var removals []string
	for _, e := range j.JSON200.Entries {
		if e.Step == "archive" || e.Step == "delete" {
			removals = append(removals, e.Step+": "+e.Reason)
			if e.Reason != why {
				t.Errorf("journaled %s with reason %q, want %q", e.Step, e.Reason, why)
			}
		}
	}
	if len(removals) == 0 {
		t.Fatalf("the removal is not journaled: %+v", j.JSON200.Entries)
	}
}

// TestActivitySurvivesCleanStop: reports acknowledged (single and batch)
// are all in the ledger after a clean stop, newest per runtime.
func TestActivitySurvivesCleanStop(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1", "r2")
	// A long flush interval: only the stop writes them.
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n"), server.Options{ActivityFlush: time.Hour})
	t1 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	t2 := t1.Add(time.Minute)
	batch, err := h.api.ReportActivityBatchWithResponse(h.ctx(), openapi.ActivityBatch{Reports: []openapi.ActivityReport{
		{Backend: "dir", Id: "r1", At: t2}, {Backend: "dir", Id: "r1", At: t1}, {Backend: "dir", Id: "r2", At: t1},
		{Backend: "dir", Id: "not-seen-yet", At: t1}}})
	if err != nil || batch.JSON200 == nil || batch.JSON200.Accepted != 4 {
		t.Fatalf("batch: %v %s", err, body(batch))
	}
	one, err := h.api.ReportActivityWithResponse(h.ctx(), "r2", &openapi.ReportActivityParams{Backend: "dir"}, openapi.Activity{At: t2})
	if err != nil || status(one) != 204 {
		t.Fatalf("single: %v %s", err, body(one))
	}
	// Before the stop, the API already sees them (once the start pass,
	// which runs on its own, has seen r1).
	h.waitFor("the start pass to see r1", func() bool {
		resp, err := h.api.GetRuntimeWithResponse(h.ctx(), "r1", nil)
		return err == nil && resp.JSON200 != nil
	})
	if rt := h.runtime("r1"); !rt.LastActivity.Equal(t2) && rt.LastActivity.Before(t2) {
		t.Fatalf("r1 last active %v, want at least %v", rt.LastActivity, t2)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for id, want := range map[string]time.Time{"r1": t2, "r2": t2, "not-seen-yet": t1} {
		got, err := st.LastActivity(context.Background(), ledger.Key{Source: "dirs:" + runs, Backend: "dir", ID: id})
		if err != nil || !got.Equal(want) {
			t.Errorf("%s: %v %v, want %v", id, got, err, want)
		}
	}
}

// watcher is a Watcher backend over a real run-folder backend: its first
// Watch fails at once (the daemon retries), the second reports the IDs
// the test sends.
type watcher struct {
	backend.Backend
	mu      sync.Mutex
	calls   int
	changes chan string
}

func (w *watcher) Unwrap() backend.Backend { return w.Backend }

func (w *watcher) Watch(ctx context.Context, changed func(id string)) error {
	w.mu.Lock()
	w.calls++
	first := w.calls == 1
	w.mu.Unlock()
	if first {
		return errors.New("event stream refused")
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case id := <-w.changes:
			changed(id)
		}
	}
}

var _ backend.Watcher = (*watcher)(nil)

// TestWatcherRunsNarrowedPass: a change reported by a backend's event
// stream frees that runtime's caches at once, without waiting for the
// interval, after the stream was reconnected.
func TestWatcherRunsNarrowedPass(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1", "r2")
	w := &watcher{changes: make(chan string)}
	wrap := func(srcs []engine.Source) []engine.Source {
		w.Backend = srcs[0].Backend
		srcs[0].Backend = w
		return srcs
	}
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\nhome = \"persistence\"\n"),
		server.Options{WrapSources: wrap})
	// The stream fails at once; its reconnection (a second Watch) comes
	// with a full pass, which would free any cache there is. Wait for both
	// the start pass and that one.
	h.waitStartPass()
	first := h.lastPassFinished()
	h.waitFor("the stream to reconnect and its full pass", func() bool {
		w.mu.Lock()
		reconnected := w.calls >= 2
		w.mu.Unlock()
		return reconnected && !h.lastPassFinished().Equal(first)
	})
	// Caches appear after those passes; only the watched change frees them.
	for _, id := range []string{"r1", "r2"} {
		testtree.Write(t, filepath.Join(runs, id, "persistence", ".cache", "pip", "wheel"), strings.Repeat("w", 4096))
	}
	w.changes <- "r1" // blocks until the reconnected Watch takes it
	h.waitFor("r1's caches to go", func() bool { return !exists(filepath.Join(runs, "r1", "persistence", ".cache")) })
	if !exists(filepath.Join(runs, "r2", "persistence", ".cache")) {
		t.Fatal("a runtime nobody reported lost its caches")
	}
	if !exists(filepath.Join(runs, "r1", "persistence", "notes.txt")) {
		t.Fatal("more than caches went")
	}
	if !strings.Contains(h.logs.String(), "event stream refused") {
		t.Fatalf("the failed stream was not logged:\n%s", h.logs.String())
	}
	// A reload replaces the backends: their event streams start anew.
	w.mu.Lock()
	before := w.calls
	w.mu.Unlock()
	data, _ := os.ReadFile(h.cfgPath)
	testtree.Write(t, h.cfgPath, string(data)+"retention = \"30d\"\n")
	if err := h.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the stream to start again after the reload", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.calls > before
	})
}

// TestNoticesAndMetrics: an archive sends signed "scheduled" and
// "archived" notices, journaled; /metrics has the series and no runtime
// id in any label.
func TestNoticesAndMetrics(t *testing.T) {
	type got struct {
		ev  notify.Event
		sig bool
	}
	events := make(chan got, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var ev notify.Event
		_ = json.Unmarshal(data, &ev)
		_, err := notify.Verify("k3y", r.Header, data, time.Now(), time.Hour)
		events <- got{ev, err == nil}
	}))
	defer hook.Close()
	dir, _, _ := retentionSetup(t, 1, "")
	cfg := filepath.Join(dir, "reclaimer.toml")
	data, _ := os.ReadFile(cfg)
	testtree.Write(t, cfg, string(data)+"\n[[notify]]\nurl = \""+hook.URL+"\"\nsecret = \"k3y\"\n")
	h := startDaemon(t, dir, cfg, server.Options{})
	h.waitFor("the start pass to announce the archive", scheduled(h, "conv1:repo"))
	h.pass(openapi.PassRequest{})

	seen := map[string]notify.Event{}
	for len(seen) < 2 {
		select {
		case g := <-events:
			if !g.sig {
				t.Fatalf("unsigned or badly signed notice %+v", g.ev)
			}
			seen[g.ev.Event] = g.ev
		case <-time.After(10 * time.Second):
			t.Fatalf("notices so far: %+v", seen)
		}
	}
	if s := seen["scheduled"]; s.Runtime != "conv1:repo" || s.Step != "archive" || s.Due.IsZero() || !strings.Contains(s.HowToStop, "pin") {
		t.Fatalf("scheduled notice: %+v", s)
	}
	if a := seen["archived"]; a.ArchiveID == "" {
		t.Fatalf("archived notice: %+v", a)
	}
	h.waitFor("the notices in the journal", func() bool {
		j, err := h.api.GetJournalWithResponse(h.ctx(), &openapi.GetJournalParams{Runtime: "conv1:repo"})
		if err != nil || j.JSON200 == nil {
			return false
		}
		n := 0
		for _, e := range j.JSON200.Entries {
			if e.Step == "notify" && e.Outcome != nil && e.Outcome.Result == "done" {
				n++
			}
		}
		return n == 2
	})

	code, _, _ := raw(t, h, "GET", "/metrics", "", h.token)
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	req, _ := http.NewRequest("GET", h.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"reclaimer_pass_duration_seconds_bucket", `reclaimer_runtimes{backend="worktree",state="archived"} 1`,
		"reclaimer_filesystem_usage_ratio", "reclaimer_activity_reports_total", "reclaimer_holds_active",
		`reclaimer_notices_total{event="archived",result="done"} 1`, `reclaimer_freed_bytes_total{backend="worktree",step="archive"}`,
		`reclaimer_source_listed{backend="worktree",source="worktrees:` + filepath.Join(dir, "worktrees") + `"} 1`} {
		if !strings.Contains(string(text), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(string(text), "conv1") {
		t.Error("a runtime id appears in the metrics")
	}
}

// TestReloadSaysWhatChanged: a reload with a new interval and retention
// logs each change; a broken file changes nothing.
func TestReloadSaysWhatChanged(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	cfg := writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n")
	h := startDaemon(t, dir, cfg, server.Options{})
	h.waitStartPass()
	data, _ := os.ReadFile(cfg)
	testtree.Write(t, cfg, strings.Replace(string(data), `interval = "1h"`, `interval = "2h"`, 1)+"retention = \"7d\"\n")
	if err := h.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	logs := h.logs.String()
	for _, want := range []string{"server.interval: 1h → 2h", "dirs:" + runs + ".retention: (unset) → 7d"} {
		if !strings.Contains(logs, want) {
			t.Errorf("reload log lacks %q:\n%s", want, logs)
		}
	}
	testtree.Write(t, cfg, "[policy]\nretention = 3\n")
	if err := h.d.Reload(context.Background()); err == nil {
		t.Fatal("a broken configuration was accepted")
	}
	if rt := h.runtime("r1"); rt.Retention != "7d" {
		t.Fatalf("after a failed reload the retention is %q, want the reloaded 7d", rt.Retention)
	}
}

// TestPassSyncsProviderTimers: every scheduled pass of the daemon writes
// the policy into a provider's own timers (native first), here a Daytona
// sandbox's auto-stop, checked by the contract fake.
func TestPassSyncsProviderTimers(t *testing.T) {
	dir := t.TempDir()
	fd := fakes.NewDaytona(t, "dtn-key-123456", time.Now)
	now := time.Now().UTC()
	fd.Add(fakes.DaytonaSandbox{ID: "d1", State: "started", Labels: map[string]string{"pool": "agents"}, CreatedAt: now.Add(-time.Hour),
		LastActivity: now.Add(-time.Minute), AutoStop: 15})
	t.Setenv("DAYTONA_API_KEY", "dtn-key-123456")
	cfg := writeConfig(t, dir, "", "[policy]\nidle_suspend = \"45m\"\n[[daytona]]\nendpoint = \""+fd.URL+"\"\nlabels = { pool = \"agents\" }\nrate = 100\n")
	h := startDaemon(t, dir, cfg, server.Options{})
	h.waitFor("the start pass to sync the sandbox's auto-stop", func() bool {
		s, ok := fd.Get("d1")
		return ok && s.AutoStop == 45
	})
	if s, _ := fd.Get("d1"); s.State != "started" {
		t.Fatalf("a sandbox active a minute ago was %s", s.State)
	}
}

// TestStatusReportsProblems: what a pass could not look at (here a
// source's folder that went away) is in GET /v1/status, not only in logs.
func TestStatusReportsProblems(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n"), server.Options{})
	h.waitStartPass()
	if err := os.RemoveAll(runs); err != nil {
		t.Fatal(err)
	}
	// Status reuses a dry run of the last seconds; a new one looks again.
	if p, err := h.api.GetPlanWithResponse(h.ctx(), nil); err != nil || p.JSON200 == nil {
		t.Fatalf("plan: %v %s", err, body(p))
	}
	st, err := h.api.GetStatusWithResponse(h.ctx())
	if err != nil || st.JSON200 == nil {
		t.Fatalf("status: %v %s", err, body(st))
	}
	if pr := st.JSON200.Problems; len(pr) != 1 || pr[0].Code != plan.SourceUnreadable || pr[0].Message != "folder "+runs+" does not exist" ||
		pr[0].Label != `[[dirs]] root = "`+runs+`"` {
		t.Fatalf("problems %+v, want the failed listing of %s", st.JSON200.Problems, runs)
	}
}

// TestHoldExtendsProviderTimer: a hold taken through the API moves an E2B
// sandbox's own timeout past the hold at once, not at the next pass: the
// provider would otherwise pause it under the host that holds it.
func TestHoldExtendsProviderTimer(t *testing.T) {
	dir := t.TempDir()
	fe := fakes.NewE2B(t, "e2b-key-123456", time.Now)
	now := time.Now().UTC()
	fe.Add(fakes.E2BSandbox{ID: "sbx1", State: "running", StartedAt: now.Add(-time.Hour), EndAt: now.Add(time.Minute),
		OnTimeout: "pause", Metadata: map[string]string{"pool": "agents"}})
	t.Setenv("E2B_API_KEY", "e2b-key-123456")
	cfg := writeConfig(t, dir, "", "[[e2b]]\nendpoint = \""+fe.URL+"\"\nmetadata = { pool = \"agents\" }\nrate = 100\n")
	h := startDaemon(t, dir, cfg, server.Options{})
	h.waitStartPass()
	if s, _ := fe.Get("sbx1"); s.EndAt.After(now.Add(2 * time.Minute)) {
		t.Fatalf("the start pass moved the timeout to %v with no policy and no hold", s.EndAt)
	}
	hold, err := h.api.TakeHoldWithResponse(h.ctx(), "sbx1", &openapi.TakeHoldParams{Backend: "e2b"}, openapi.HoldRequest{Holder: "host-1", Ttl: "10m"})
	if err != nil || hold.JSON201 == nil {
		t.Fatalf("hold: %v %s", err, body(hold))
	}
	h.waitFor("the sandbox's timeout to pass the hold", func() bool {
		s, _ := fe.Get("sbx1")
		return !s.EndAt.Before(hold.JSON201.ExpiresAt)
	})
}

// TestReloadRefusesToDropEverythingOrMoveTheArchives: a configuration file
// truncated to zero bytes, one without any source, or one moving the
// archives or the ledger is refused and logged; the sources in force stay.
func TestReloadRefusesToDropEverythingOrMoveTheArchives(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	cfg := writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n")
	h := startDaemon(t, dir, cfg, server.Options{})
	h.waitStartPass()
	data, _ := os.ReadFile(cfg)
	for name, doc := range map[string]string{
		"truncated":      "",
		"no sources":     strings.SplitN(string(data), "[[dirs]]", 2)[0],
		"archives moved": strings.Replace(string(data), filepath.Join(dir, "archives"), filepath.Join(dir, "elsewhere"), 1),
		"ledger moved":   strings.Replace(string(data), filepath.Join(dir, "state", "ledger.db"), filepath.Join(dir, "state", "other.db"), 1),
	} {
		testtree.Write(t, cfg, doc)
		if err := h.d.Reload(context.Background()); !errors.Is(err, config.ErrUnsafeReload) {
			t.Errorf("%s: reload = %v, want refused", name, err)
		}
		if rt := h.runtime("r1"); rt.ID != "r1" {
			t.Fatalf("%s: the runtime is gone after a refused reload", name)
		}
	}
	if !strings.Contains(h.logs.String(), "refusing to reload") {
		t.Errorf("the refusal is not logged:\n%s", h.logs.String())
	}
}

// TestRegisteredAgentServerURL: a host registers its runtime's agent-server
// with it; the ledger keeps it for the idle clock, a later registration
// without one keeps it, and a URL the clock would not read is refused.
func TestRegisteredAgentServerURL(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	cfg := writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n")
	h := startDaemon(t, dir, cfg, server.Options{})
	if r, _ := h.api.RegisterRuntimeWithResponse(h.ctx(), openapi.Registration{Backend: "dir", Id: "r1", AgentServerUrl: "http://127.0.0.1:8000"}); status(r) != 200 {
		t.Fatalf("register: %s", body(r))
	}
	if r, _ := h.api.RegisterRuntimeWithResponse(h.ctx(), openapi.Registration{Backend: "dir", Id: "r1", Conversations: []string{"c1"}}); status(r) != 200 {
		t.Fatalf("register again: %s", body(r))
	}
	recs, err := h.d.App().Store().ListRuntimes(h.ctx(), ledger.RuntimeFilter{Backend: "dir"})
	if err != nil || len(recs) != 1 || recs[0].AgentServerURL != "http://127.0.0.1:8000" {
		t.Fatalf("recorded: %+v %v", recs, err)
	}
	for _, bad := range []string{"ftp://x", "http://user:pw@127.0.0.1:8000", "http://127.0.0.1:8000/?k=v", "not a url"} {
		if r, _ := h.api.RegisterRuntimeWithResponse(h.ctx(), openapi.Registration{Backend: "dir", Id: "r1", AgentServerUrl: bad}); status(r) != 400 {
			t.Errorf("%q: %s", bad, body(r))
		}
	}
}

// holding is a source's backend holding a client (a watch cache, a
// connection): it counts its closes.
type holding struct {
	backend.Backend
	closed *atomic.Int32
}

func (h holding) Unwrap() backend.Backend { return h.Backend }
func (h holding) Close() error            { h.closed.Add(1); return nil }

// TestReloadAndStopCloseTheSources: a reload closes the sources it
// replaces (their watch caches, connections), once each, and the daemon's
// stop closes those in force.
func TestReloadAndStopCloseTheSources(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	cfg := writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n")
	var built []*atomic.Int32
	var mu sync.Mutex
	wrap := func(srcs []engine.Source) []engine.Source {
		mu.Lock()
		defer mu.Unlock()
		n := new(atomic.Int32)
		built = append(built, n)
		for i := range srcs {
			srcs[i].Backend = holding{srcs[i].Backend, n}
		}
		return srcs
	}
	h := startDaemon(t, dir, cfg, server.Options{WrapSources: wrap})
	h.waitStartPass()
	data, _ := os.ReadFile(cfg)
	testtree.Write(t, cfg, string(data)+"retention = \"7d\"\n")
	if err := h.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(built) != 2 || built[0].Load() != 1 || built[1].Load() != 0 {
		t.Fatalf("after a reload: %d setups, closes %v", len(built), closes(built))
	}
	mu.Unlock()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if built[0].Load() != 1 || built[1].Load() != 1 {
		t.Fatalf("after the stop: closes %v", closes(built))
	}
}

func closes(ns []*atomic.Int32) []int32 {
	out := make([]int32, len(ns))
	for i, n := range ns {
		out[i] = n.Load()
	}
	return out
}

// TestCloudflareRuntimesAreTheRegisteredNames: the bridge has no list, so
// a [[cloudflare]] source's runtimes are the names hosts registered
// through the API; an instance of the account nobody registered is never
// listed, and the Containers API gives the registered one's state.
func TestCloudflareRuntimesAreTheRegisteredNames(t *testing.T) {
	dir := t.TempDir()
	f := fakes.NewCloudflare(t, "cf-bridge-key-0123456789", "cf-api-token-0123456789", "acc-1", time.Now)
	now := time.Now()
	f.Add(fakes.CloudflareSandbox{Name: "sb-mine", Awake: true, StartedAt: now.Add(-time.Minute), StateAt: now.Add(-time.Minute)})
	f.Add(fakes.CloudflareSandbox{Name: "sb-theirs", Awake: true, StartedAt: now.Add(-time.Minute), StateAt: now.Add(-time.Minute)})
	t.Setenv("SANDBOX_API_KEY", "cf-bridge-key-0123456789")
	t.Setenv("CLOUDFLARE_API_TOKEN", "cf-api-token-0123456789")
	cfg := writeConfig(t, dir, "", "[[cloudflare]]\nendpoint = \""+f.BridgeURL+"\"\napi_endpoint = \""+f.APIURL+
		"\"\naccount_id = \"acc-1\"\napplication = \"sandbox\"\n")
	h := startDaemon(t, dir, cfg, server.Options{})
	if r, _ := h.api.RegisterRuntimeWithResponse(h.ctx(), openapi.Registration{Backend: "cloudflare", Id: "sb-mine", Conversations: []string{"c1"}}); status(r) != 200 {
		t.Fatalf("register: %s", body(r))
	}
	p := h.pass(openapi.PassRequest{})
	if len(p.Plan.Problems) != 0 {
		t.Fatalf("problems: %+v", p.Plan.Problems)
	}
	if rt := h.runtime("sb-mine"); rt.State != "running" || rt.Backend != "cloudflare" {
		t.Fatalf("sb-mine: %+v", rt)
	}
	if resp, _ := h.api.GetRuntimeWithResponse(h.ctx(), "sb-theirs", nil); status(resp) != 404 {
		t.Fatalf("an unregistered sandbox is known: %s", body(resp))
	}
	if n := f.Bridge().Calls("GET /v1/sandbox/{id}/running"); n != 0 {
		t.Fatalf("%d calls woke sandboxes", n)
	}
}
