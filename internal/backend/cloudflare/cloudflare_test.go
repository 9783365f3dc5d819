package cloudflare_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/cloudflare"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
	"github.com/reclaimer/reclaimer/internal/sink"
)

const (
	bridgeKey = "cf_bridge_key_0123456789"
	apiToken  = "cf_api_token_0123456789"
	account   = "acc-1"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	f     *fakes.Cloudflare
	clock *fakes.Clock
	b     *cloudflare.Backend
	eng   *engine.Engine
	store ledger.Store

	mu    sync.Mutex
	names []string
}

func setup(t testing.TB, set policy.Settings, containers bool) *env {
	t.Helper()
	clock := fakes.NewClock(t0)
	f := fakes.NewCloudflare(t, bridgeKey, apiToken, account, clock.Now)
	e := &env{f: f, clock: clock}
	e.b = &cloudflare.Backend{Bridge: fakes.Client(t, f.BridgeURL, remote.BearerAuth(remote.NewSecret(bridgeKey))), Key: remote.NewSecret(bridgeKey),
		Names: func(context.Context) ([]string, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			return slices.Clone(e.names), nil
		}}
	if containers {
		e.b.Containers = &cloudflare.Containers{Client: fakes.Client(t, f.APIURL, remote.BearerAuth(remote.NewSecret(apiToken))),
			AccountID: account, Application: "sandbox"}
	}
	e.eng, e.store = fakes.Engine(t, clock, engine.Source{Name: "cloudflare[0]", Backend: e.b, Settings: set})
	return e
}

// register is what a host's POST /v1/runtimes does for this source.
func (e *env) register(names ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.names = append(e.names, names...)
}

func (e *env) awake(name string, files map[string]string) {
	e.f.Add(fakes.CloudflareSandbox{Name: name, Awake: true, Files: files, StartedAt: t0.Add(-time.Hour), StateAt: t0.Add(-time.Hour)})
	e.register(name)
}

func (e *env) asleep(name string, since time.Time) {
	e.f.Add(fakes.CloudflareSandbox{Name: name, StateAt: since})
	e.register(name)
}

func (e *env) pass(t testing.TB) (*plan.Plan, *plan.Applied) { return fakes.Pass(t, e.eng) }

// deletePlan is the action a delete (an orphan's, a request's) gives id,
// observed now.
func (e *env) deletePlan(t *testing.T, id string) *plan.Plan {
	return fakes.RemovalPlan(t, e.eng, e.clock.Now(), backend.Key{Backend: cloudflare.Name, ID: id})
}

func (e *env) noWaking(t *testing.T) {
	t.Helper()
	if n := e.f.Bridge().Calls("GET /v1/sandbox/{id}/running"); n != 0 {
		t.Fatalf("%d calls to /running woke sandboxes", n)
	}
}

func TestCapabilities(t *testing.T) {
	want := []string{"Lister", "Deleter", "Exporter", "Restorer"}
	if got := backend.Capabilities(&cloudflare.Backend{}); !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

func TestStatesComeFromTheContainersAPIByName(t *testing.T) {
	e := setup(t, policy.Settings{}, true)
	e.awake("awake", map[string]string{"a.txt": "a"})
	e.asleep("asleep", t0.Add(-3*time.Hour))
	e.f.Add(fakes.CloudflareSandbox{Name: "failed", Instance: "failed", StateAt: t0})
	e.register("failed", "never-started")
	e.f.Add(fakes.CloudflareSandbox{Name: "not-ours", Awake: true, StartedAt: t0})
	rts, err := e.b.List(context.Background(), backend.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]backend.Runtime{}
	for _, rt := range rts {
		got[rt.ID] = rt
	}
	want := map[string]backend.State{"awake": backend.StateRunning, "asleep": backend.StateStopped, "failed": backend.StateUnknown, "never-started": backend.StateUnknown}
	if len(got) != len(want) {
		t.Fatalf("listed %v", rts)
	}
	for id, st := range want {
		if got[id].State != st {
			t.Errorf("%s is %s, want %s", id, got[id].State, st)
		}
	}
	if got["awake"].Unsaved == "" || got["asleep"].Unsaved != "" {
		t.Errorf("unsaved: awake %q, asleep %q", got["awake"].Unsaved, got["asleep"].Unsaved)
	}
	if !got["asleep"].LastActivity.Equal(t0.Add(-3 * time.Hour)) {
		t.Errorf("asleep since %v", got["asleep"].LastActivity)
	}
	e.noWaking(t)
	if n := e.f.Bridge().Total(); n != 0 {
		t.Errorf("listing made %d bridge calls", n)
	}
}

func TestWithoutTheContainersAPINothingIsTouched(t *testing.T) {
	e := setup(t, policy.Settings{Retention: time.Hour, IdleSuspend: time.Minute}, false)
	e.awake("a", map[string]string{"x": "1"})
	e.asleep("b", t0.Add(-48*time.Hour))
	for range 2 {
		e.clock.Advance(48 * time.Hour)
		if p, _ := e.pass(t); len(p.Actions) != 0 {
			t.Fatalf("acted on sandboxes of unknown state: %+v", p.Actions)
		}
	}
	if n := e.f.Bridge().Total(); n != 0 {
		t.Fatalf("%d bridge calls", n)
	}
}

func TestRetentionOfASleepingSandboxRecordsNothingSurvivedThenDestroys(t *testing.T) {
	e := setup(t, policy.Settings{Retention: 24 * time.Hour, Grace: time.Hour}, true)
	e.asleep("old", t0.Add(-72*time.Hour))
	e.awake("live", map[string]string{"main.go": "package main"})
	p, _ := e.pass(t)
	if len(p.Scheduled) != 1 || p.Scheduled[0].Runtime != "old" || len(p.Actions) != 0 {
		t.Fatalf("first pass: %+v %+v", p.Scheduled, p.Actions)
	}
	e.clock.Advance(2 * time.Hour)
	p, res := e.pass(t)
	r := fakes.Outcome(res, "old")
	if len(p.Actions) != 1 || r.Outcome != plan.Done || r.ArchiveID == "" {
		t.Fatalf("after the notice: %+v %+v", p.Actions, res.Results)
	}
	if !e.f.Destroyed("old") || e.f.Destroyed("live") {
		t.Fatal("destroyed the wrong sandbox")
	}
	if n := e.f.Bridge().Calls("POST /v1/sandbox/{id}/persist"); n != 0 {
		t.Fatalf("persisted a sleeping sandbox %d times (it would start it)", n)
	}
	a, _ := e.store.Archive(context.Background(), r.ArchiveID)
	m, err := archive.ParseManifest(a.Manifest)
	if err != nil || len(m.Objects) != 0 || !strings.HasPrefix(m.Survives[0], "nothing") {
		t.Fatalf("manifest: %+v %v", m, err)
	}
	e.noWaking(t)
}

func TestArchiveThenDestroyThenRestore(t *testing.T) {
	e := setup(t, policy.Settings{}, true)
	files := map[string]string{"main.go": "package main\n", "src/lib.go": "package src\n", "node_modules/left/index.js": "x",
		"web/node_modules/deep/a.js": "y", ".env": "SECRET=1\n"}
	e.awake("work", files)
	e.awake("other", map[string]string{"z": "z"})
	ctx := context.Background()
	res, err := e.eng.Apply(ctx, e.deletePlan(t, "work"), engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Results[0]
	if r.Outcome != plan.Done || r.ArchiveID == "" {
		t.Fatalf("result: %+v", r)
	}
	if !e.f.Destroyed("work") || e.f.Destroyed("other") {
		t.Fatal("destroyed the wrong sandbox")
	}
	a, err := e.store.Archive(ctx, r.ArchiveID)
	if err != nil {
		t.Fatal(err)
	}
	m, err := archive.ParseManifest(a.Manifest)
	if err != nil || len(m.Objects) != 1 || m.Objects[0].Kind != archive.KindPlainTar || len(m.Folders) != 1 || m.Folders[0].Files != 3 {
		t.Fatalf("manifest: %+v %v", m, err)
	}
	if !strings.Contains(m.Survives[0], "node_modules") || len(m.Dependencies) == 0 {
		t.Fatalf("the manifest does not say what was left out: %+v", m)
	}
	// Restore: a new sandbox, hydrated with what was kept.
	s, err := sink.NewLocal(filepath.Dir(filepath.Dir(filepath.Dir(a.Location))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.Location); err != nil {
		t.Fatal(err)
	}
	got, err := e.b.Restore(ctx, backend.Key{Backend: cloudflare.Name, ID: "work"}, backend.RestoreOptions{Manifest: a.Manifest, Sink: s})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(got, "cloudflare sandbox ")
	sb, ok := e.f.Get(name)
	want := map[string]string{"main.go": "package main\n", "src/lib.go": "package src\n", ".env": "SECRET=1\n"}
	if !ok || fmt.Sprint(sb.Files) != fmt.Sprint(want) {
		t.Fatalf("restored %q: %v", name, sb.Files)
	}
	e.noWaking(t)

	// A corrupted archive is refused before any sandbox is made.
	obj := filepath.Join(filepath.Dir(a.Location), filepath.Base(m.Objects[0].Name))
	data, _ := os.ReadFile(obj)
	data[600] ^= 0xff
	os.WriteFile(obj, data, 0o600)
	before := e.f.Bridge().Calls("POST /v1/sandbox")
	if _, err := e.b.Restore(ctx, backend.Key{Backend: cloudflare.Name, ID: "work"}, backend.RestoreOptions{Manifest: a.Manifest, Sink: s}); !errors.Is(err, archive.ErrMismatch) {
		t.Fatalf("corrupted archive: %v", err)
	}
	if e.f.Bridge().Calls("POST /v1/sandbox") != before {
		t.Fatal("a sandbox was made for a corrupted archive")
	}
}

func TestPersistFailureDestroysNothing(t *testing.T) {
	e := setup(t, policy.Settings{}, true)
	e.awake("work", map[string]string{"a": "b"})
	p := e.deletePlan(t, "work")
	e.f.Bridge().Fail(http.StatusServiceUnavailable, 1) // the persist call
	res, err := e.eng.Apply(context.Background(), p, engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Outcome != plan.Failed || !strings.Contains(r.Reason, "nothing was removed") {
		t.Fatalf("result: %+v", r)
	}
	if e.f.Destroyed("work") {
		t.Fatal("destroyed without an archive")
	}
}

func TestProtectedSandboxesUntouched(t *testing.T) {
	e := setup(t, policy.Settings{}, true)
	ctx := context.Background()
	lk := func(id string) ledger.Key {
		return ledger.Key{Source: "cloudflare[0]", Backend: cloudflare.Name, ID: id}
	}
	plans := map[string]*plan.Plan{}
	for _, id := range []string{"held", "leased", "pinned"} {
		e.asleep(id, t0.Add(-72*time.Hour))
	}
	for _, id := range []string{"held", "leased", "pinned"} {
		plans[id] = e.deletePlan(t, id)
	}
	e.store.TakeHold(ctx, ledger.HoldRequest{Key: lk("held"), Holder: "host-1", TTL: time.Hour, Now: t0})
	e.store.Update(ctx, lk("leased"), func(r *ledger.RuntimeRecord) error { r.LeaseUntil = t0.Add(time.Hour); return nil })
	e.store.Update(ctx, lk("pinned"), func(r *ledger.RuntimeRecord) error { r.Pinned = true; return nil })
	for id, p := range plans {
		res, err := e.eng.Apply(ctx, p, engine.ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := res.Results[0]; r.Outcome != plan.Skip {
			t.Errorf("%s: %+v", id, r)
		}
		if e.f.Destroyed(id) {
			t.Errorf("%s destroyed", id)
		}
	}
}

func TestDeleteIsIdempotent(t *testing.T) {
	e := setup(t, policy.Settings{}, true)
	e.asleep("x", t0)
	for range 2 {
		if err := e.b.Delete(context.Background(), backend.Runtime{Key: backend.Key{Backend: cloudflare.Name, ID: "x"}}, backend.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBurstOutageAndKeys(t *testing.T) {
	e := setup(t, policy.Settings{}, true)
	e.awake("a", nil)
	ctx := context.Background()
	e.f.API().Fail(http.StatusTooManyRequests, 3) // with Retry-After
	if rts, err := e.b.List(ctx, backend.ListOptions{}); err != nil || len(rts) != 1 {
		t.Fatalf("a burst the retries cover: %v", err)
	}
	e.f.API().Fail(http.StatusServiceUnavailable, 100)
	p, _, err := e.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Problems) == 0 || p.Problems[0].Code != plan.SourceUnreadable {
		t.Fatalf("outage not reported: %+v", p.Problems)
	}
	if s := fmt.Sprint(p.Problems); strings.Contains(s, apiToken) || strings.Contains(s, bridgeKey) {
		t.Fatal("a key leaked")
	}
	// The registered names could not be read: the source fails, loudly.
	e.b.Names = func(context.Context) ([]string, error) { return nil, errors.New("ledger closed") }
	if _, err := e.b.List(ctx, backend.ListOptions{}); err == nil || !strings.Contains(err.Error(), "ledger closed") {
		t.Fatalf("names error: %v", err)
	}
	// A persist refused with the key echoed in its message: scrubbed.
	e.b.Names = func(context.Context) ([]string, error) { return []string{"a"}, nil }
	wrong := &cloudflare.Backend{Bridge: e.b.Bridge, Key: remote.NewSecret("wrong-key-0123456789"), Names: e.b.Names}
	_, err = wrong.Export(ctx, backend.Runtime{Key: backend.Key{Backend: cloudflare.Name, ID: "a"}, State: backend.StateRunning},
		backend.ExportOptions{Sink: mustLocal(t), Name: "cloudflare/a/x", CreatedAt: t0})
	if err == nil || strings.Contains(err.Error(), "wrong-key-0123456789") {
		t.Fatalf("wrong key: %v", err)
	}
}

func mustLocal(t *testing.T) sink.Sink {
	s, err := sink.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBridgeRedirectIsRefused: rule "no redirect carries a credential".
// The bridge answering persist (a streamed call) or destroy (a JSON call)
// with a redirect to another port gets an error, an injected client
// included, and the target never sees the bridge key.
func TestBridgeRedirectIsRefused(t *testing.T) {
	e := setup(t, policy.Settings{}, true)
	e.awake("a", nil)
	var hits int
	var mu sync.Mutex
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
	}))
	defer target.Close()
	e.f.Bridge().Bend(func(op string, a *fakes.Answer) bool {
		if op == "POST /v1/sandbox/{id}/persist" || op == "DELETE /v1/sandbox/{id}" {
			a.Status, a.Body = http.StatusTemporaryRedirect, nil
			a.Header = http.Header{"Location": {target.URL + "/steal"}}
			return true
		}
		return false
	})
	e.b.HTTP = &http.Client{}
	ctx := context.Background()
	rt := backend.Runtime{Key: backend.Key{Backend: cloudflare.Name, ID: "a"}, State: backend.StateRunning}
	if _, err := e.b.Export(ctx, rt, backend.ExportOptions{Sink: mustLocal(t), Name: "cloudflare/a/x", CreatedAt: t0}); !errors.Is(err, remote.ErrRedirect) {
		t.Fatalf("persist answered by a redirect: %v", err)
	}
	if err := e.b.Delete(ctx, rt, backend.DeleteOptions{}); !errors.Is(err, remote.ErrRedirect) {
		t.Fatalf("destroy answered by a redirect: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 0 {
		t.Fatalf("the target was called %d times", hits)
	}
}
