package modal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/modal"
	"github.com/reclaimer/reclaimer/internal/backend/modal/modalpb"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

const (
	tokenID = "ak-test-0123456789"
	secret  = "as-secret-0123456789"
)

var (
	t0       = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	selector = map[string]string{"owner": "reclaimer-test"}
)

type env struct {
	f     *fakes.Modal
	clock *fakes.Clock
	c     *modal.Client
	b     *modal.Backend
	eng   *engine.Engine
	store ledger.Store
}

func client(t testing.TB, f *fakes.Modal, clock *fakes.Clock, id, sec string) *modal.Client {
	c, err := modal.Dial(modal.ClientOptions{Endpoint: f.URL, TokenID: remote.NewSecret(id), TokenSecret: remote.NewSecret(sec),
		Rate: 10000, Concurrency: 16, Retries: 6, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func setup(t *testing.T, set policy.Settings) *env {
	t.Helper()
	clock := fakes.NewClock(t0)
	f := fakes.NewModal(t, tokenID, secret, clock.Now)
	c := client(t, f, clock, tokenID, secret)
	b := &modal.Backend{Client: c, Tags: selector}
	eng, store := fakes.Engine(t, clock, engine.Source{Name: "modal[0]", Backend: b, Settings: set})
	return &env{f, clock, c, b, eng, store}
}

func ptr(v uint32) *uint32 { return &v }

func (e *env) add(id string, started time.Time, tags map[string]string) {
	if tags == nil {
		tags = selector
	}
	e.f.Add(fakes.ModalSandbox{ID: id, Tags: tags, CreatedAt: started.Add(-time.Second), StartedAt: started, TimeoutSecs: 3600, IdleTimeoutSecs: ptr(600)})
}

func TestCapabilities(t *testing.T) {
	want := []string{"Lister", "Deleter", "Exporter", "NativeLifecycle", "Restorer"}
	if got := backend.Capabilities(&modal.Backend{}); !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if _, ok := backend.As[backend.Suspender](&modal.Backend{}); ok {
		t.Fatal("Modal cannot pause a sandbox")
	}
}

func TestListScopeStatesAndPages(t *testing.T) {
	e := setup(t, policy.Settings{})
	for i := range 250 {
		e.add(fmt.Sprintf("sb-%03d", i), t0.Add(-time.Duration(i)*time.Minute), nil)
	}
	e.add("sb-foreign", t0.Add(-time.Hour), map[string]string{"owner": "someone-else"})
	e.f.Add(fakes.ModalSandbox{ID: "sb-queued", Tags: selector, CreatedAt: t0.Add(-time.Minute)})
	e.f.Add(fakes.ModalSandbox{ID: "sb-ended", Tags: selector, CreatedAt: t0.Add(-time.Hour), StartedAt: t0.Add(-time.Hour),
		FinishedAt: t0.Add(-time.Minute), Result: modalpb.GenericStatus_GENERIC_STATUS_SUCCESS})
	rts, err := e.b.List(context.Background(), backend.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rts) != 251 {
		t.Fatalf("listed %d, want 251", len(rts))
	}
	states := map[string]backend.State{}
	for _, rt := range rts {
		states[rt.ID] = rt.State
		if rt.Unsaved == "" {
			t.Fatalf("%s carries no unsaved work: it would be removed without an archive", rt.ID)
		}
	}
	if states["sb-queued"] != backend.StateStarting || states["sb-001"] != backend.StateRunning {
		t.Errorf("states: queued %s, running %s", states["sb-queued"], states["sb-001"])
	}
	if _, ok := states["sb-foreign"]; ok {
		t.Error("a sandbox with other tags was listed")
	}
	if _, ok := states["sb-ended"]; ok {
		t.Error("a finished sandbox was listed")
	}
	if n := e.f.Calls("SandboxList"); n != 4 {
		t.Errorf("%d pages, want 4 (three and the empty end)", n)
	}
}

func TestLoopLeavesRunningSandboxesAndSaysSo(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 10 * time.Minute, Retention: time.Hour})
	e.add("sb-idle", t0.Add(-48*time.Hour), nil)
	p, _ := e.pass(t)
	if len(p.Actions) != 0 {
		t.Fatalf("acted on a running sandbox with no suspend: %+v", p.Actions)
	}
	if n := e.f.Calls("SandboxTerminate") + e.f.Calls("SandboxSnapshotFs"); n != 0 {
		t.Fatalf("%d removals", n)
	}
}

func (e *env) pass(t *testing.T) (*plan.Plan, *plan.Applied) { return fakes.Pass(t, e.eng) }

// deletePlan is a plan deleting id as observed now (the loop's own
// policies leave a running sandbox alone, see
// TestLoopLeavesRunningSandboxesAndSaysSo).
func (e *env) deletePlan(t *testing.T, id string) *plan.Plan {
	return fakes.RemovalPlan(t, e.eng, e.clock.Now(), backend.Key{Backend: modal.Name, ID: id})
}

func TestArchiveThenTerminateThroughTheEngine(t *testing.T) {
	e := setup(t, policy.Settings{})
	e.add("sb-done", t0.Add(-2*time.Hour), nil)
	e.add("sb-other", t0.Add(-2*time.Hour), nil)
	ctx := context.Background()
	res, err := e.eng.Apply(ctx, e.deletePlan(t, "sb-done"), engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Results[0]
	if r.Outcome != plan.Done || r.ArchiveID == "" {
		t.Fatalf("result: %+v", r)
	}
	if s, _ := e.f.Get("sb-done"); s.Result != modalpb.GenericStatus_GENERIC_STATUS_TERMINATED {
		t.Fatal("not terminated")
	}
	if s, _ := e.f.Get("sb-other"); s.Result != modalpb.GenericStatus_GENERIC_STATUS_UNSPECIFIED {
		t.Fatal("another sandbox was terminated")
	}
	a, err := e.store.Archive(ctx, r.ArchiveID)
	if err != nil {
		t.Fatal(err)
	}
	m, err := archive.ParseManifest(a.Manifest)
	if err != nil || !strings.HasPrefix(m.Image, "im-") || e.f.Image(m.Image) != "sb-done" {
		t.Fatalf("manifest: %+v %v", m, err)
	}
	if !strings.Contains(strings.Join(m.Survives, " "), m.Image) || !strings.Contains(m.Restore, m.Image) {
		t.Fatalf("manifest does not say what survives and how: %+v", m)
	}
	// The manifest is in the archive storage, as recorded.
	if _, err := os.Stat(a.Location); err != nil {
		t.Fatalf("manifest not stored at %s: %v", a.Location, err)
	}
	_, err = e.b.Restore(ctx, backend.Key{Backend: modal.Name, ID: "sb-done"}, backend.RestoreOptions{Manifest: a.Manifest})
	var start *modal.StartCommand
	if !errors.As(err, &start) || !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(start.Command, "modal.Image.from_id(\""+m.Image+"\")") {
		t.Fatalf("restore: %v", err)
	}
	// Snapshot came before terminate: the image exists and points at it.
	if e.f.Calls("SandboxSnapshotFs") != 1 || e.f.Calls("SandboxTerminate") != 1 {
		t.Fatalf("calls: snapshot %d, terminate %d", e.f.Calls("SandboxSnapshotFs"), e.f.Calls("SandboxTerminate"))
	}
}

func TestFailedSnapshotRemovesNothing(t *testing.T) {
	e := setup(t, policy.Settings{})
	e.add("sb-keep", t0.Add(-2*time.Hour), nil)
	e.f.FailSnapshots(modalpb.GenericStatus_GENERIC_STATUS_FAILURE)
	res, err := e.eng.Apply(context.Background(), e.deletePlan(t, "sb-keep"), engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Outcome != plan.Failed || !strings.Contains(r.Reason, "nothing was removed") {
		t.Fatalf("result: %+v", r)
	}
	if e.f.Calls("SandboxTerminate") != 0 {
		t.Fatal("terminated without an archive")
	}
}

func TestHeldLeasedPinnedUntouched(t *testing.T) {
	e := setup(t, policy.Settings{})
	ctx := context.Background()
	lk := func(id string) ledger.Key { return ledger.Key{Source: "modal[0]", Backend: modal.Name, ID: id} }
	for _, id := range []string{"sb-held", "sb-leased", "sb-pinned"} {
		e.add(id, t0.Add(-2*time.Hour), nil)
	}
	plans := map[string]*plan.Plan{}
	for _, id := range []string{"sb-held", "sb-leased", "sb-pinned"} {
		plans[id] = e.deletePlan(t, id)
	}
	if _, err := e.store.TakeHold(ctx, ledger.HoldRequest{Key: lk("sb-held"), Holder: "agent-7", TTL: time.Hour, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Update(ctx, lk("sb-leased"), func(r *ledger.RuntimeRecord) error { r.LeaseUntil = t0.Add(time.Hour); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Update(ctx, lk("sb-pinned"), func(r *ledger.RuntimeRecord) error { r.Pinned = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for id, p := range plans {
		res, err := e.eng.Apply(ctx, p, engine.ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := res.Results[0]; r.Outcome != plan.Skip || !strings.HasPrefix(r.Reason, "changed since plan") {
			t.Errorf("%s: %+v", id, r)
		}
	}
	if n := e.f.Calls("SandboxTerminate") + e.f.Calls("SandboxSnapshotFs"); n != 0 {
		t.Fatalf("%d calls touched protected sandboxes", n)
	}
}

func TestTerminateIsIdempotent(t *testing.T) {
	e := setup(t, policy.Settings{})
	e.add("sb-x", t0, nil)
	ctx := context.Background()
	for _, id := range []string{"sb-x", "sb-x", "sb-never-existed"} {
		if err := e.b.Delete(ctx, backend.Runtime{Key: backend.Key{Backend: modal.Name, ID: id}}, backend.DeleteOptions{Step: backend.StepDelete}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

func TestInspectionNeverWaitsOrWakes(t *testing.T) {
	e := setup(t, policy.Settings{})
	e.add("sb-a", t0.Add(-time.Hour), nil)
	ctx := context.Background()
	if _, err := e.b.List(ctx, backend.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	// A narrowed listing may only read tags and ask, without waiting,
	// whether it ended: the fake fails the test on any other call.
	e.f.Allow("SandboxTagsGet", "SandboxWait")
	for range 3 {
		rts, err := e.b.List(ctx, backend.ListOptions{IDs: []string{"sb-a"}})
		if err != nil || len(rts) != 1 || rts[0].State != backend.StateRunning {
			t.Fatalf("narrowed: %v %+v", err, rts)
		}
		if _, err := e.b.Lifecycle(ctx, rts[0], backend.LifecycleOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// It ended behind our back: gone.
	e.f.Allow(fakes.ModalRPCs...)
	e.b.Delete(ctx, backend.Runtime{Key: backend.Key{Backend: modal.Name, ID: "sb-a"}}, backend.DeleteOptions{})
	e.f.Add(fakes.ModalSandbox{ID: "sb-b", Tags: selector, CreatedAt: t0, StartedAt: t0})
	if _, err := e.b.List(ctx, backend.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.Add(fakes.ModalSandbox{ID: "sb-b", Tags: selector, CreatedAt: t0, StartedAt: t0, FinishedAt: t0.Add(time.Minute), Result: modalpb.GenericStatus_GENERIC_STATUS_IDLE_TIMEOUT})
	if rts, err := e.b.List(ctx, backend.ListOptions{IDs: []string{"sb-b"}}); err != nil || len(rts) != 0 {
		t.Fatalf("an ended sandbox: %v %+v", err, rts)
	}
}

func TestNativeLifecycleIsFixedAtCreation(t *testing.T) {
	e := setup(t, policy.Settings{})
	e.add("sb-a", t0.Add(-10*time.Minute), nil)
	ctx := context.Background()
	rts, err := e.b.List(ctx, backend.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := e.f.Total()
	l, err := e.b.Lifecycle(ctx, backend.Runtime{Key: rts[0].Key}, backend.LifecycleOptions{Set: &backend.Lifecycle{IdleSuspend: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	want := backend.Lifecycle{Deadline: t0.Add(50 * time.Minute), DeadlineStep: backend.StepDelete, IdleSuspend: 10 * time.Minute, Delete: backend.Immediately}
	if !l.Deadline.Equal(want.Deadline) || l.DeadlineStep != want.DeadlineStep || l.IdleSuspend != want.IdleSuspend || l.Delete != want.Delete || len(l.Can) != 0 {
		t.Fatalf("lifecycle %+v, want %+v", l, want)
	}
	if e.f.Total() != before {
		t.Fatal("reading the fixed timers made a call")
	}
}

func TestBurstOutageAndCredentials(t *testing.T) {
	e := setup(t, policy.Settings{})
	e.add("sb-a", t0, nil)
	ctx := context.Background()
	e.f.Fail(codes.ResourceExhausted, 3) // each with a pushback of 0 ms
	if rts, err := e.b.List(ctx, backend.ListOptions{}); err != nil || len(rts) != 1 {
		t.Fatalf("a burst the retries cover: %v", err)
	}
	e.f.Fail(codes.Unavailable, 100)
	p, _, err := e.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Problems) == 0 || p.Problems[0].Code != plan.SourceUnreadable {
		t.Fatalf("outage not reported: %+v", p.Problems)
	}
	for range 2 {
		if _, err := e.b.List(ctx, backend.ListOptions{}); !errors.Is(err, remote.ErrUnavailable) {
			t.Fatalf("during the outage: %v", err)
		}
	}
	before := e.f.Total()
	_, err = e.b.List(ctx, backend.ListOptions{})
	if !errors.Is(err, remote.ErrUnavailable) || e.f.Total() != before {
		t.Fatalf("cool-down: %v, %d calls", err, e.f.Total()-before)
	}

	// A wrong secret: refused, and neither token is in the message.
	clock := fakes.NewClock(t0)
	f := fakes.NewModal(t, tokenID, secret, clock.Now)
	wrong := "as-wrong-secret-98765"
	b := &modal.Backend{Client: client(t, f, clock, tokenID, wrong), Tags: selector}
	_, err = b.List(ctx, backend.ListOptions{})
	if err == nil || !strings.Contains(err.Error(), "Unauthenticated") {
		t.Fatalf("wrong secret: %v", err)
	}
	for _, s := range []string{err.Error(), fmt.Sprint(p.Skipped), fmt.Sprintf("%+v", b)} {
		if strings.Contains(s, wrong) || strings.Contains(s, secret) {
			t.Fatalf("a secret leaked: %s", s)
		}
	}
	t.Setenv("RECLAIMER_TEST_MODAL_ID", "")
	if _, _, err := modal.LoadTokens("RECLAIMER_TEST_MODAL_ID", "X"); err == nil || !strings.Contains(err.Error(), "RECLAIMER_TEST_MODAL_ID") {
		t.Fatalf("missing credentials: %v", err)
	}
}

func TestDialRefusesPlainTextOffLoopback(t *testing.T) {
	for _, ep := range []string{"http://api.modal.com", "ftp://x", "https://user:pw@api.modal.com", "https://api.modal.com/path"} {
		if _, err := modal.Dial(modal.ClientOptions{Endpoint: ep}); err == nil {
			t.Errorf("%s accepted", ep)
		}
	}
	c, err := modal.Dial(modal.ClientOptions{})
	if err != nil || c.Endpoint() != "https://api.modal.com:443" {
		t.Fatalf("default endpoint: %v %v", c, err)
	}
	c.Close()
}
