package native_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/daytona"
	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/backend/httpbackend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/native"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

type world struct {
	clock *fakes.Clock
	e2b   *fakes.E2B
	dtn   *fakes.Daytona
	opts  native.Options
	store ledger.Store
	eng   *engine.Engine
}

func setup(t *testing.T, set policy.Settings) *world {
	t.Helper()
	clock := fakes.NewClock(t0)
	fe := fakes.NewE2B(t, "ek", clock.Now)
	fd := fakes.NewDaytona(t, "dk", clock.Now)
	sources := []engine.Source{
		{Name: "e2b[0]", Settings: set, Backend: &e2b.Backend{Client: fakes.Client(t, fe.URL, remote.HeaderAuth("X-API-Key", remote.NewSecret("ek"))),
			Metadata: map[string]string{"o": "r"}, Now: clock.Now}},
		{Name: "daytona[0]", Settings: set, Backend: &daytona.Backend{Client: fakes.Client(t, fd.URL, remote.BearerAuth(remote.NewSecret("dk"))),
			Labels: map[string]string{"o": "r"}}},
	}
	eng, store := fakes.Engine(t, clock, sources...)
	return &world{clock, fe, fd, native.Options{Sources: sources, Ledger: store, Now: clock.Now}, store, eng}
}

func row(t *testing.T, rep *native.Report, id string) native.Row {
	t.Helper()
	for _, r := range rep.Rows {
		if r.Runtime == id {
			return r
		}
	}
	t.Fatalf("no row for %s in %+v", id, rep.Rows)
	return native.Row{}
}

func setting(r native.Row, name string) native.Setting {
	for _, s := range r.Settings {
		if s.Name == name {
			return s
		}
	}
	return native.Setting{}
}

func TestSyncRepairsDriftAndIsIdempotent(t *testing.T) {
	w := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute, Retention: 7 * 24 * time.Hour})
	sel := map[string]string{"o": "r"}
	// Daytona defaults: auto-stop 15m (stricter), archive 7d after stop
	// (looser than 7d - 30m? within tolerance no: 7d vs 6d23h30m), and an
	// auto-delete at once upon stopping: stricter, and it would lose work.
	w.dtn.Add(fakes.DaytonaSandbox{ID: "d1", State: "started", Labels: sel, CreatedAt: t0.Add(-time.Hour), LastActivity: t0,
		AutoStop: 15, AutoArchive: 7 * 24 * 60, AutoDelete: 0})
	w.e2b.Add(fakes.E2BSandbox{ID: "e1", State: "running", Metadata: sel, StartedAt: t0.Add(-10 * time.Minute), EndAt: t0.Add(5 * time.Minute)})
	w.e2b.Add(fakes.E2BSandbox{ID: "e2", State: "paused", Metadata: sel, StartedAt: t0.Add(-time.Hour), EndAt: t0})
	ctx := context.Background()

	plan, err := native.Plan(ctx, w.opts)
	if err != nil {
		t.Fatal(err)
	}
	d1 := row(t, plan, "d1")
	if s := setting(d1, backend.TimerIdleSuspend); s.Drift != "stricter" || s.Provider != "15m" || s.Policy != "30m" {
		t.Errorf("auto-stop: %+v", s)
	}
	if s := setting(d1, backend.TimerDelete); s.Drift != "stricter" || s.Provider != "at once upon suspension" || !strings.HasPrefix(s.Action, "set") {
		t.Errorf("auto-delete: %+v", s)
	}
	if s := setting(row(t, plan, "e1"), backend.TimerDeadline); s.Drift != "stricter" || s.Action != "set (the provider was stricter than the policy)" {
		t.Errorf("e2b timeout: %+v", s)
	}
	if len(row(t, plan, "e2").Settings) != 0 {
		t.Errorf("a paused sandbox has no running timer: %+v", row(t, plan, "e2"))
	}
	// Plan wrote nothing.
	if s, _ := w.dtn.Get("d1"); s.AutoStop != 15 || s.AutoDelete != 0 {
		t.Fatalf("plan changed the provider: %+v", s)
	}

	rep, err := native.Sync(ctx, w.opts)
	if err != nil || rep.Failed != 0 || rep.Written != 2 {
		t.Fatalf("sync: %v %+v", err, rep)
	}
	s, _ := w.dtn.Get("d1")
	if s.AutoStop != 30 || s.AutoDelete != -1 || s.AutoArchive != 7*24*60-30 {
		t.Errorf("daytona after sync: stop %d archive %d delete %d", s.AutoStop, s.AutoArchive, s.AutoDelete)
	}
	e1, _ := w.e2b.Get("e1")
	if want := t0.Add(-10 * time.Minute).Add(30 * time.Minute); e1.EndAt.Sub(want).Abs() > time.Second {
		t.Errorf("e2b end %v, want %v", e1.EndAt, want)
	}
	if e2, _ := w.e2b.Get("e2"); e2.State != "paused" {
		t.Error("sync resumed a paused sandbox")
	}
	again, err := native.Sync(ctx, w.opts)
	if err != nil || again.Written != 0 || again.Drifted != 0 {
		t.Fatalf("second sync is not a no-op: %+v", again)
	}
}

func TestLeaseExtendsProviderTimersCappedByLifetime(t *testing.T) {
	w := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute, MaxLifetime: 6 * time.Hour})
	sel := map[string]string{"o": "r"}
	w.e2b.Add(fakes.E2BSandbox{ID: "e", State: "running", Metadata: sel, StartedAt: t0.Add(-time.Hour), EndAt: t0.Add(time.Minute)})
	w.dtn.Add(fakes.DaytonaSandbox{ID: "d", State: "started", Labels: sel, CreatedAt: t0.Add(-time.Hour), LastActivity: t0.Add(-20 * time.Minute),
		AutoStop: 30, AutoDelete: -1})
	ctx := context.Background()
	if _, err := w.eng.Observe(ctx, engine.ObserveOptions{Record: true, Light: true}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []ledger.Key{{Source: "e2b[0]", Backend: "e2b", ID: "e"}, {Source: "daytona[0]", Backend: "daytona", ID: "d"}} {
		if _, err := w.store.Update(ctx, k, func(r *ledger.RuntimeRecord) error { r.LeaseUntil = t0.Add(24 * time.Hour); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := native.Sync(ctx, w.opts)
	if err != nil || rep.Failed != 0 {
		t.Fatalf("%v %+v", err, rep)
	}
	// E2B: the lease moves the timeout, but not past creation + 6h.
	if e, _ := w.e2b.Get("e"); e.EndAt.Sub(t0.Add(5*time.Hour)).Abs() > time.Second {
		t.Errorf("e2b end %v, want the lifetime cap %v", e.EndAt, t0.Add(5*time.Hour))
	}
	if !row(t, rep, "d").Touch {
		t.Error("daytona: the lease did not restart the idle timer")
	}
	if d, _ := w.dtn.Get("d"); !d.LastActivity.Equal(t0) {
		t.Errorf("daytona last activity %v", d.LastActivity)
	}
	// Past the cap, no more touching.
	w.clock.Advance(6 * time.Hour)
	w.dtn.Add(fakes.DaytonaSandbox{ID: "d", State: "started", Labels: sel, CreatedAt: t0.Add(-time.Hour), LastActivity: w.clock.Now(), AutoStop: 30, AutoDelete: -1})
	rep, _ = native.Plan(ctx, w.opts)
	if r := row(t, rep, "d"); r.Touch {
		t.Errorf("touched past max_lifetime: %+v", r)
	}
}

func TestKillTimerNeverShortenedAndPinnedLeftAlone(t *testing.T) {
	w := setup(t, policy.Settings{IdleSuspend: 10 * time.Minute})
	sel := map[string]string{"o": "r"}
	w.e2b.Add(fakes.E2BSandbox{ID: "k", State: "running", Metadata: sel, StartedAt: t0, EndAt: t0.Add(time.Hour), OnTimeout: "kill"})
	w.dtn.Add(fakes.DaytonaSandbox{ID: "p", State: "started", Labels: sel, CreatedAt: t0, LastActivity: t0, AutoStop: 15, AutoDelete: 0})
	ctx := context.Background()
	if _, err := w.eng.Observe(ctx, engine.ObserveOptions{Record: true, Light: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Update(ctx, ledger.Key{Source: "daytona[0]", Backend: "daytona", ID: "p"}, func(r *ledger.RuntimeRecord) error { r.Pinned = true; return nil }); err != nil {
		t.Fatal(err)
	}
	rep, err := native.Sync(ctx, w.opts)
	if err != nil || rep.Failed != 0 {
		t.Fatalf("%v %+v", err, rep)
	}
	if s := setting(row(t, rep, "k"), backend.TimerDeadline); s.Drift != "looser" || !strings.HasPrefix(s.Action, "report only") {
		t.Errorf("kill timer: %+v", s)
	}
	if k, _ := w.e2b.Get("k"); !k.EndAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("kill timer moved to %v", k.EndAt)
	}
	if p, _ := w.dtn.Get("p"); p.AutoStop != 15 || p.AutoDelete != 0 {
		t.Errorf("pinned sandbox changed: %+v", p)
	}
}

func TestOutageOfOneProviderDoesNotStopTheOther(t *testing.T) {
	w := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	sel := map[string]string{"o": "r"}
	w.dtn.Add(fakes.DaytonaSandbox{ID: "d", State: "started", Labels: sel, CreatedAt: t0, LastActivity: t0, AutoStop: 15, AutoDelete: -1})
	w.e2b.Add(fakes.E2BSandbox{ID: "e", State: "running", Metadata: sel, StartedAt: t0, EndAt: t0.Add(time.Hour)})
	w.e2b.Fail(http.StatusInternalServerError, 100)
	rep, err := native.Sync(context.Background(), w.opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.HasPrefix(rep.Problems[0], "e2b[0]") {
		t.Errorf("problems %v", rep.Problems)
	}
	if d, _ := w.dtn.Get("d"); d.AutoStop != 30 {
		t.Errorf("daytona not synced during the e2b outage: %+v", d)
	}
}

func TestSyncOverTheHTTPProtocol(t *testing.T) {
	clock := fakes.NewClock(t0)
	f := fakes.NewHTTPServer(t, "tok", clock.Now, "suspend", "lifecycle", "lifecycle_write", "touch")
	f.Add(fakes.HTTPRuntime{ID: "r", State: "running", LastActivity: t0.Add(-time.Minute), CreatedAt: t0.Add(-time.Hour),
		IdleSuspend: 900, Delete: -1})
	f.Add(fakes.HTTPRuntime{ID: "held", State: "running", LastActivity: t0.Add(-10 * time.Minute), CreatedAt: t0.Add(-time.Hour), IdleSuspend: 1800})
	b, err := httpbackend.Open(context.Background(), &httpbackend.Backend{Client: fakes.Client(t, f.URL, remote.BearerAuth(remote.NewSecret("tok")))})
	if err != nil {
		t.Fatal(err)
	}
	src := engine.Source{Name: "http[0]", Backend: b, Settings: policy.Settings{IdleSuspend: 30 * time.Minute}}
	eng, store := fakes.Engine(t, clock, src)
	ctx := context.Background()
	if _, err := eng.Observe(ctx, engine.ObserveOptions{Record: true, Light: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.TakeHold(ctx, ledger.HoldRequest{Key: ledger.Key{Source: "http[0]", Backend: "http", ID: "held"}, Holder: "agent", TTL: time.Hour, Now: t0}); err != nil {
		t.Fatal(err)
	}
	opts := native.Options{Sources: []engine.Source{src}, Ledger: store, Now: clock.Now}
	rep, err := native.Sync(ctx, opts)
	if err != nil || rep.Failed != 0 || rep.Written != 2 {
		t.Fatalf("%v %+v", err, rep)
	}
	if s := setting(row(t, rep, "r"), backend.TimerDelete); s.Drift != "stricter" {
		t.Errorf("delete at once upon suspension not reported stricter: %+v", s)
	}
	if r, _ := f.Get("r"); r.IdleSuspend != 1800 || r.Delete != 0 {
		t.Errorf("server after sync: %+v", r)
	}
	if r, _ := f.Get("held"); !r.LastActivity.Equal(t0) {
		t.Errorf("held runtime's idle timer not restarted: %v", r.LastActivity)
	}
	// Nothing drifts any more; the hold still restarts its timer.
	again, err := native.Sync(ctx, opts)
	if err != nil || again.Drifted != 0 || again.Written != 1 || !row(t, again, "held").Touch {
		t.Fatalf("second sync: %v %+v", err, again)
	}
}

// TestProvidersActOnTheSyncedTimers: once synced, the providers suspend
// idle sandboxes by themselves, and the loop finds nothing left to do.
func TestProvidersActOnTheSyncedTimers(t *testing.T) {
	w := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	sel := map[string]string{"o": "r"}
	w.dtn.Add(fakes.DaytonaSandbox{ID: "d", State: "started", Labels: sel, CreatedAt: t0, LastActivity: t0, AutoDelete: -1}) // auto-stop off
	w.e2b.Add(fakes.E2BSandbox{ID: "e", State: "running", Metadata: sel, StartedAt: t0, EndAt: t0.Add(24 * time.Hour)})
	ctx := context.Background()
	if rep, err := native.Sync(ctx, w.opts); err != nil || rep.Written != 2 {
		t.Fatalf("%v %+v", err, rep)
	}
	w.clock.Advance(31 * time.Minute)
	if d, _ := w.dtn.Get("d"); d.State != "stopped" {
		t.Errorf("daytona did not stop it by itself: %s", d.State)
	}
	if e, _ := w.e2b.Get("e"); e.State != "paused" {
		t.Errorf("e2b did not pause it by itself: %s", e.State)
	}
	p, _, err := w.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil || len(p.Actions) != 0 {
		t.Fatalf("the loop still had work: %v %+v", err, p.Actions)
	}
}

// TestLoopGoesOnDuringAnOutage: one provider down, the other's sandboxes
// are still suspended in the same pass, and the outage is reported.
func TestLoopGoesOnDuringAnOutage(t *testing.T) {
	w := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	sel := map[string]string{"o": "r"}
	w.dtn.Add(fakes.DaytonaSandbox{ID: "d", State: "started", Labels: sel, CreatedAt: t0.Add(-2 * time.Hour), LastActivity: t0.Add(-time.Hour), AutoDelete: -1})
	w.e2b.Add(fakes.E2BSandbox{ID: "e", State: "running", Metadata: sel, StartedAt: t0.Add(-time.Hour), EndAt: t0.Add(time.Hour)})
	w.e2b.Fail(http.StatusBadGateway, 1000)
	ctx := context.Background()
	p, world, err := w.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 1 || p.Actions[0].Runtime != "d" {
		t.Fatalf("plan %+v", p.Actions)
	}
	if len(p.Problems) == 0 || p.Problems[0].Code != plan.SourceUnreadable || p.Problems[0].Source != "e2b[0]" {
		t.Fatalf("outage not reported: %+v", p.Problems)
	}
	res, err := w.eng.Apply(ctx, p, engine.ApplyOptions{World: world})
	if err != nil || res.Failed() {
		t.Fatalf("%v %+v", err, res)
	}
	if d, _ := w.dtn.Get("d"); d.State != "stopped" {
		t.Fatalf("daytona sandbox %s", d.State)
	}
}

func TestAutoPauseAlignedWithIdleSuspend(t *testing.T) {
	w := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	sel := map[string]string{"o": "r"}
	w.dtn.Add(fakes.DaytonaSandbox{ID: "vm", State: "started", Labels: sel, CreatedAt: t0, LastActivity: t0, AutoStop: 30, AutoPause: 5, AutoDelete: -1})
	w.dtn.Add(fakes.DaytonaSandbox{ID: "plain", State: "started", Labels: sel, CreatedAt: t0, LastActivity: t0, AutoStop: 30, AutoDelete: -1})
	ctx := context.Background()
	plan, err := native.Plan(ctx, w.opts)
	if err != nil {
		t.Fatal(err)
	}
	if s := setting(row(t, plan, "vm"), backend.TimerIdlePause); s.Drift != "stricter" || s.Provider != "5m" || s.Policy != "30m" {
		t.Fatalf("auto-pause: %+v", s)
	}
	if s := setting(row(t, plan, "plain"), backend.TimerIdlePause); s.Policy != "-" || s.Drift != "" {
		t.Fatalf("auto-pause off is left off: %+v", s)
	}
	if _, err := native.Sync(ctx, w.opts); err != nil {
		t.Fatal(err)
	}
	if s, _ := w.dtn.Get("vm"); s.AutoPause != 30 {
		t.Fatalf("auto-pause %d", s.AutoPause)
	}
	if s, _ := w.dtn.Get("plain"); s.AutoPause != 0 {
		t.Fatalf("auto-pause turned on: %d", s.AutoPause)
	}
}
