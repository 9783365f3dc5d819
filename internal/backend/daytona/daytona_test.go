package daytona_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/daytona"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

const key = "dtn_test_key_0123456789"

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

var selector = map[string]string{"reclaimer.io/host": "test"}

type env struct {
	f     *fakes.Daytona
	clock *fakes.Clock
	b     *daytona.Backend
	eng   *engine.Engine
	store ledger.Store
}

func setup(t *testing.T, set policy.Settings) *env {
	t.Helper()
	clock := fakes.NewClock(t0)
	f := fakes.NewDaytona(t, key, clock.Now)
	b := &daytona.Backend{Client: fakes.Client(t, f.URL, remote.BearerAuth(remote.NewSecret(key))), Labels: selector}
	eng, store := fakes.Engine(t, clock, engine.Source{Name: "daytona[0]", Backend: b, Settings: set})
	return &env{f, clock, b, eng, store}
}

// add puts a sandbox with Daytona's default timers off (the loop's tests
// drive the states themselves).
func (e *env) add(id, state string, lastActivity time.Time, labels map[string]string) {
	if labels == nil {
		labels = selector
	}
	s := fakes.DaytonaSandbox{ID: id, State: state, Labels: labels, CreatedAt: lastActivity.Add(-time.Hour),
		LastActivity: lastActivity, AutoDelete: -1}
	if state == "stopped" {
		s.StoppedAt = lastActivity
	}
	e.f.Add(s)
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

func TestIdleSandboxIsStopped(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	e.add("idle", "started", t0.Add(-2*time.Hour), nil)
	e.add("active", "started", t0.Add(-5*time.Minute), nil) // Daytona's own lastActivityAt
	e.add("foreign", "started", t0.Add(-2*time.Hour), map[string]string{"team": "other"})
	p, res := e.pass(t)
	if len(p.Actions) != 1 || p.Actions[0].Runtime != "idle" || outcome(res, "idle").Outcome != plan.Done {
		t.Fatalf("plan %+v results %+v", p.Actions, res.Results)
	}
	for id, want := range map[string]string{"idle": "stopped", "active": "started", "foreign": "started"} {
		if s, _ := e.f.Get(id); s.State != want {
			t.Errorf("%s is %s, want %s", id, s.State, want)
		}
	}
	if n := e.f.Calls("POST /sandbox/{sandboxIdOrName}/start"); n != 0 {
		t.Errorf("inspection started %d sandboxes", n)
	}
}

func TestStaleSandboxArchivedToColdStorageAfterNotice(t *testing.T) {
	e := setup(t, policy.Settings{Retention: 7 * 24 * time.Hour, Grace: 24 * time.Hour})
	e.add("stale", "stopped", t0.Add(-10*24*time.Hour), nil)
	e.add("fresh", "stopped", t0.Add(-24*time.Hour), nil)
	p, _ := e.pass(t)
	if len(p.Actions) != 0 || len(p.Scheduled) != 1 {
		t.Fatalf("first pass must only announce: %+v %+v", p.Actions, p.Scheduled)
	}
	e.clock.Advance(25 * time.Hour)
	p, res := e.pass(t)
	if len(p.Actions) != 1 || outcome(res, "stale").Outcome != plan.Done {
		t.Fatalf("after the notice: %+v %+v", p.Actions, res.Results)
	}
	s, ok := e.f.Get("stale")
	if !ok || s.State != "archived" {
		t.Fatalf("stale: %+v (present %v): want archived in cold storage, not deleted", s, ok)
	}
	if e.f.Deleted("stale") != "" {
		t.Fatal("retention deleted the sandbox")
	}
	// Archived is not present: the next pass leaves it alone.
	if p, _ := e.pass(t); len(p.Actions) != 0 {
		t.Fatalf("acted on an archived sandbox: %+v", p.Actions)
	}
}

func TestHeldAndLeasedUntouched(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	e.add("leased", "started", t0.Add(-3*time.Hour), nil)
	e.add("held", "started", t0.Add(-3*time.Hour), nil)
	ctx := context.Background()
	if _, err := e.eng.Observe(ctx, engine.ObserveOptions{Record: true, Light: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Update(ctx, ledger.Key{Source: "daytona[0]", Backend: "daytona", ID: "leased"}, func(r *ledger.RuntimeRecord) error {
		r.LeaseUntil = t0.Add(time.Hour)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.TakeHold(ctx, ledger.HoldRequest{Key: ledger.Key{Source: "daytona[0]", Backend: "daytona", ID: "held"}, Holder: "agent", TTL: time.Hour, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if p, _ := e.pass(t); len(p.Actions) != 0 {
		t.Fatalf("acted on protected sandboxes: %+v", p.Actions)
	}
}

func TestBurstsOf429And500(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	e.add("idle", "started", t0.Add(-2*time.Hour), nil)
	e.f.Fail(http.StatusTooManyRequests, 2)
	e.f.Fail(http.StatusBadGateway, 2)
	e.f.Fail(http.StatusInternalServerError, 1)
	if _, res := e.pass(t); outcome(res, "idle").Outcome != plan.Done {
		t.Fatalf("%+v", res.Results)
	}
}

func TestDeletedByProviderBetweenPlanAndApply(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	e.add("idle", "started", t0.Add(-2*time.Hour), nil)
	ctx := context.Background()
	p, _, err := e.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil || len(p.Actions) != 1 {
		t.Fatalf("%v %+v", err, p)
	}
	e.f.Remove("idle")
	res, err := e.eng.Apply(ctx, p, engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := outcome(res, "idle"); r.Outcome != plan.Skip || !strings.HasPrefix(r.Reason, "changed since plan") {
		t.Fatalf("%+v", r)
	}
}

func TestNewActivityAtProviderBetweenPlanAndApply(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	e.add("idle", "started", t0.Add(-2*time.Hour), nil)
	ctx := context.Background()
	p, _, err := e.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil || len(p.Actions) != 1 {
		t.Fatalf("%v %+v", err, p)
	}
	e.f.Add(fakes.DaytonaSandbox{ID: "idle", State: "started", Labels: selector, CreatedAt: t0.Add(-3 * time.Hour), LastActivity: t0, AutoDelete: -1})
	res, _ := e.eng.Apply(ctx, p, engine.ApplyOptions{})
	if r := outcome(res, "idle"); r.Outcome != plan.Skip || !strings.Contains(r.Reason, "changed since plan") {
		t.Fatalf("%+v", r)
	}
	if s, _ := e.f.Get("idle"); s.State != "started" {
		t.Fatal("stopped a sandbox in use")
	}
}

func TestPaginationOver1000(t *testing.T) {
	e := setup(t, policy.Settings{})
	for i := range 1000 {
		e.f.Add(fakes.DaytonaSandbox{ID: fmt.Sprintf("sb-%04d", i), State: "started", Labels: selector,
			CreatedAt: t0.Add(-time.Duration(i) * time.Minute), LastActivity: t0, AutoDelete: -1})
	}
	e.add("other", "started", t0, map[string]string{"x": "y"})
	rts, err := e.b.List(context.Background(), backend.ListOptions{})
	if err != nil || len(rts) != 1000 {
		t.Fatalf("listed %d: %v", len(rts), err)
	}
	if n := e.f.Calls("GET /sandbox"); n != 5 {
		t.Errorf("%d pages of 200, want 5", n)
	}
}

func TestLifecycleIntervalsAsTheSpecSays(t *testing.T) {
	e := setup(t, policy.Settings{})
	e.f.Add(fakes.DaytonaSandbox{ID: "s", State: "started", Labels: selector, CreatedAt: t0, LastActivity: t0,
		AutoStop: 15, AutoArchive: 0, AutoDelete: 0})
	ctx := context.Background()
	rt := backend.Runtime{Key: backend.Key{Source: "daytona[0]", Backend: "daytona", ID: "s"}}
	cur, err := e.b.Lifecycle(ctx, rt, backend.LifecycleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.IdleSuspend != 15*time.Minute || cur.Archive != 0 || cur.Delete != backend.Immediately {
		t.Fatalf("read %+v: want auto-stop 15m, archive never (0), delete at once upon stop (0)", cur)
	}
	got, err := e.b.Lifecycle(ctx, rt, backend.LifecycleOptions{Set: &backend.Lifecycle{IdleSuspend: 30 * time.Minute, Archive: 48 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := e.f.Get("s")
	if s.AutoStop != 30 || s.AutoArchive != 48*60 || s.AutoDelete != -1 {
		t.Fatalf("fake has %+v; want 30, 2880, -1", s)
	}
	if got.Delete != 0 || got.IdleSuspend != 30*time.Minute {
		t.Fatalf("answer %+v", got)
	}
	// Touch moves the provider's last activity, without starting anything.
	e.clock.Advance(10 * time.Minute)
	if _, err := e.b.Lifecycle(ctx, rt, backend.LifecycleOptions{Touch: true}); err != nil {
		t.Fatal(err)
	}
	if s, _ := e.f.Get("s"); !s.LastActivity.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("last activity %v", s.LastActivity)
	}
}

// TestCrashMidArchiveFinishesAsArchive: a restart finishing an interrupted
// retention must archive to cold storage, never delete.
func TestCrashMidArchiveFinishesAsArchive(t *testing.T) {
	e := setup(t, policy.Settings{Retention: 24 * time.Hour})
	e.add("s", "stopped", t0.Add(-3*24*time.Hour), nil)
	ctx := context.Background()
	if _, err := e.eng.Observe(ctx, engine.ObserveOptions{Record: true, Light: true}); err != nil {
		t.Fatal(err)
	}
	k := ledger.Key{Source: "daytona[0]", Backend: "daytona", ID: "s"}
	if _, err := e.store.AppendIntent(ctx, ledger.Intent{PlanID: "p1", Key: k, Step: string(backend.StepArchive), At: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Update(ctx, k, func(r *ledger.RuntimeRecord) error { r.State = string(backend.StateArchived); return nil }); err != nil {
		t.Fatal(err)
	}
	if n, err := e.eng.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("recover: %d %v", n, err)
	}
	if s, ok := e.f.Get("s"); !ok || s.State != "archived" {
		t.Fatalf("after recovery: %+v present %v (deleted: %q)", s, ok, e.f.Deleted("s"))
	}
}
