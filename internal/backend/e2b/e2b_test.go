package e2b_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

const key = "e2b_test_key_0123456789"

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

var selector = map[string]string{"owner": "reclaimer-test"}

type env struct {
	f     *fakes.E2B
	clock *fakes.Clock
	b     *e2b.Backend
	eng   *engine.Engine
	store ledger.Store
}

func setup(t *testing.T, set policy.Settings) *env {
	t.Helper()
	clock := fakes.NewClock(t0)
	f := fakes.NewE2B(t, key, clock.Now)
	b := &e2b.Backend{Client: fakes.Client(t, f.URL, remote.HeaderAuth("X-API-Key", remote.NewSecret(key))), Metadata: selector, Now: clock.Now}
	eng, store := fakes.Engine(t, clock, engine.Source{Name: "e2b[0]", Backend: b, Settings: set})
	return &env{f, clock, b, eng, store}
}

func (e *env) add(id, state string, started time.Time, meta map[string]string) {
	if meta == nil {
		meta = selector
	}
	e.f.Add(fakes.E2BSandbox{ID: id, State: state, StartedAt: started, EndAt: t0.Add(23 * time.Hour), Metadata: meta})
}

func (e *env) pass(t *testing.T) (*plan.Plan, *plan.Applied) {
	t.Helper()
	ctx := context.Background()
	p, w, err := e.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}

func outcome(res *plan.Applied, id string) plan.Result {
	for _, r := range res.Results {
		if r.Runtime == id {
			return r
		}
	}
	return plan.Result{}
}

func TestIdleSandboxIsPausedNotOthers(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	e.add("idle", "running", t0.Add(-2*time.Hour), nil)
	e.add("busy", "running", t0.Add(-2*time.Hour), nil)
	e.add("foreign", "running", t0.Add(-2*time.Hour), map[string]string{"owner": "someone-else"})
	e.add("asleep", "paused", t0.Add(-2*time.Hour), nil)
	// The ledger is E2B's only activity source.
	if err := e.store.RecordActivity(context.Background(), []ledger.Activity{{Key: ledger.Key{Source: "e2b[0]", Backend: "e2b", ID: "busy"}, At: t0.Add(-5 * time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	p, res := e.pass(t)
	if len(p.Actions) != 1 || p.Actions[0].Runtime != "idle" || p.Actions[0].Step != backend.StepSuspend {
		t.Fatalf("plan: %+v", p.Actions)
	}
	if r := outcome(res, "idle"); r.Outcome != plan.Done {
		t.Fatalf("apply: %+v", r)
	}
	for id, want := range map[string]string{"idle": "paused", "busy": "running", "foreign": "running", "asleep": "paused"} {
		if s, _ := e.f.Get(id); s.State != want {
			t.Errorf("%s is %s, want %s", id, s.State, want)
		}
	}
	if n := e.f.Calls("POST /sandboxes/{sandboxID}/connect") + e.f.Calls("POST /sandboxes/{sandboxID}/resume"); n != 0 {
		t.Errorf("%d calls woke a sandbox", n)
	}
}

func TestStaleSandboxKilledOnlyAfterNotice(t *testing.T) {
	e := setup(t, policy.Settings{Retention: 7 * 24 * time.Hour, Grace: 24 * time.Hour})
	e.add("stale", "paused", t0.Add(-10*24*time.Hour), nil)
	e.add("fresh", "paused", t0.Add(-2*24*time.Hour), nil)
	p, _ := e.pass(t)
	if len(p.Actions) != 0 || len(p.Scheduled) != 1 || p.Scheduled[0].Runtime != "stale" {
		t.Fatalf("first pass must only announce: actions %+v, scheduled %+v", p.Actions, p.Scheduled)
	}
	if _, ok := e.f.Get("stale"); !ok {
		t.Fatal("killed before the notice ran out")
	}
	e.clock.Advance(12 * time.Hour)
	if p, _ := e.pass(t); len(p.Actions) != 0 {
		t.Fatalf("acted within the grace period: %+v", p.Actions)
	}
	e.clock.Advance(13 * time.Hour)
	p, res := e.pass(t)
	if len(p.Actions) != 1 || p.Actions[0].Runtime != "stale" || outcome(res, "stale").Outcome != plan.Done {
		t.Fatalf("after the notice: plan %+v, results %+v", p.Actions, res.Results)
	}
	if !e.f.Killed("stale") || e.f.Killed("fresh") {
		t.Errorf("killed: stale %v, fresh %v", e.f.Killed("stale"), e.f.Killed("fresh"))
	}
}

func TestHeldAndLeasedUntouched(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute, Retention: 24 * time.Hour})
	e.add("leased", "running", t0.Add(-48*time.Hour), nil)
	e.add("held", "running", t0.Add(-48*time.Hour), nil)
	ctx := context.Background()
	if _, err := e.eng.Observe(ctx, engine.ObserveOptions{Record: true, Light: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Update(ctx, ledger.Key{Source: "e2b[0]", Backend: "e2b", ID: "leased"}, func(r *ledger.RuntimeRecord) error {
		r.LeaseUntil = t0.Add(2 * time.Hour)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.TakeHold(ctx, ledger.HoldRequest{Key: ledger.Key{Source: "e2b[0]", Backend: "e2b", ID: "held"}, Holder: "agent-7", TTL: time.Hour, Now: t0}); err != nil {
		t.Fatal(err)
	}
	p, _ := e.pass(t)
	if len(p.Actions) != 0 {
		t.Fatalf("acted on protected sandboxes: %+v", p.Actions)
	}
	for _, id := range []string{"leased", "held"} {
		if s, _ := e.f.Get(id); s.State != "running" {
			t.Errorf("%s is %s", id, s.State)
		}
	}
}

func TestPausedSandboxNeverResumedByInspection(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: time.Minute, Retention: 24 * time.Hour})
	e.add("asleep", "paused", t0.Add(-time.Hour), nil)
	ctx := context.Background()
	for range 3 {
		e.pass(t)
		if _, err := e.b.List(ctx, backend.ListOptions{IDs: []string{"asleep"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.b.Lifecycle(ctx, backend.Runtime{Key: backend.Key{Source: "e2b[0]", Backend: "e2b", ID: "asleep"}}, backend.LifecycleOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if s, _ := e.f.Get("asleep"); s.State != "paused" {
		t.Fatalf("inspection changed a paused sandbox: %s", s.State)
	}
	// The fake fails the test on connect or resume; count them too.
	if n := e.f.Calls("POST /sandboxes/{sandboxID}/connect") + e.f.Calls("POST /sandboxes/{sandboxID}/resume"); n != 0 {
		t.Fatalf("%d wake-up calls", n)
	}
}

func TestBurstsOf429And500(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	e.add("idle", "running", t0.Add(-2*time.Hour), nil)
	e.f.Fail(http.StatusTooManyRequests, 3)
	e.f.Fail(http.StatusInternalServerError, 2)
	_, res := e.pass(t)
	if r := outcome(res, "idle"); r.Outcome != plan.Done {
		t.Fatalf("a burst the retries cover failed the pass: %+v", r)
	}
	// A burst longer than the retries fails that backend's listing, and is
	// reported in the plan rather than ending it.
	e.add("idle2", "running", t0.Add(-2*time.Hour), nil)
	e.f.Fail(http.StatusServiceUnavailable, 50)
	p, _, err := e.eng.Plan(context.Background(), engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 0 || len(p.Problems) == 0 || p.Problems[0].Code != plan.SourceUnreadable {
		t.Fatalf("outage not reported: %+v %+v", p.Actions, p.Problems)
	}
	if strings.Contains(fmt.Sprint(p.Problems), key) {
		t.Fatal("the key leaked into a message")
	}
}

func TestDeletedByProviderBetweenPlanAndApply(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	e.add("idle", "running", t0.Add(-2*time.Hour), nil)
	ctx := context.Background()
	p, _, err := e.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil || len(p.Actions) != 1 {
		t.Fatalf("plan: %v %+v", err, p)
	}
	e.f.Remove("idle")
	res, err := e.eng.Apply(ctx, p, engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := outcome(res, "idle")
	if r.Outcome != plan.Skip || !strings.HasPrefix(r.Reason, "changed since plan") {
		t.Fatalf("want changed since plan, got %+v", r)
	}
}

func TestPaginationOver1000(t *testing.T) {
	e := setup(t, policy.Settings{})
	for i := range 1000 {
		e.add(fmt.Sprintf("sb-%04d", i), []string{"running", "paused"}[i%2], t0.Add(-time.Duration(i)*time.Minute), nil)
	}
	for i := range 30 {
		e.add(fmt.Sprintf("other-%d", i), "running", t0, map[string]string{"owner": "x"})
	}
	rts, err := e.b.List(context.Background(), backend.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rts) != 1000 {
		t.Fatalf("listed %d, want 1000", len(rts))
	}
	if n := e.f.Calls("GET /v2/sandboxes"); n != 10 {
		t.Errorf("%d pages, want 10", n)
	}
}

func TestTimeoutOfKillSandboxOnlyExtended(t *testing.T) {
	e := setup(t, policy.Settings{})
	e.f.Add(fakes.E2BSandbox{ID: "k", State: "running", StartedAt: t0, EndAt: t0.Add(time.Hour), Metadata: selector, OnTimeout: "kill"})
	ctx := context.Background()
	rt := backend.Runtime{Key: backend.Key{Source: "e2b[0]", Backend: "e2b", ID: "k"}}
	cur, err := e.b.Lifecycle(ctx, rt, backend.LifecycleOptions{})
	if err != nil || cur.DeadlineStep != backend.StepDelete || !cur.Deadline.Equal(t0.Add(time.Hour)) {
		t.Fatalf("read: %+v %v", cur, err)
	}
	_, err = e.b.Lifecycle(ctx, rt, backend.LifecycleOptions{Set: &backend.Lifecycle{Deadline: t0.Add(10 * time.Minute)}})
	if !errors.Is(err, backend.ErrProtected) {
		t.Fatalf("shortening a kill timer: %v", err)
	}
	got, err := e.b.Lifecycle(ctx, rt, backend.LifecycleOptions{Set: &backend.Lifecycle{Deadline: t0.Add(3 * time.Hour)}})
	if err != nil || !got.Deadline.Equal(t0.Add(3*time.Hour)) {
		t.Fatalf("extend: %+v %v", got, err)
	}
	if s, _ := e.f.Get("k"); !s.EndAt.Equal(t0.Add(3 * time.Hour)) {
		t.Fatalf("fake end %v", s.EndAt)
	}
}
