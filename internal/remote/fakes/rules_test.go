package fakes_test

// The rules for remote providers (docs/backends.md), each tested against a
// contract fake told to misbehave in that one way; the fakes' validation
// of every request and of their own answers stays on.

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/daytona"
	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/backend/httpbackend"
	"github.com/reclaimer/reclaimer/internal/backend/rundir"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

const (
	e2bKey    = "e2b_test_key_0123456789"
	httpToken = "http-token-0123456789"
)

var sel = map[string]string{"pool": "agents"}

// world is an E2B source, an http source and a local run folder source
// on one engine.
type world struct {
	clock *fakes.Clock
	e2b   *fakes.E2B
	http  *fakes.HTTPServer
	runs  string
	eng   *engine.Engine
	store ledger.Store
}

func newWorld(t *testing.T, set policy.Settings, ops ...string) *world {
	t.Helper()
	clock := fakes.NewClock(t0)
	fe := fakes.NewE2B(t, e2bKey, clock.Now)
	fh := fakes.NewHTTPServer(t, httpToken, clock.Now, ops...)
	hb, err := httpbackend.Open(context.Background(), &httpbackend.Backend{
		Client: fakes.Client(t, fh.URL, remote.BearerAuth(remote.NewSecret(httpToken))), Labels: sel})
	if err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(t.TempDir(), "runs")
	if err := os.MkdirAll(filepath.Join(runs, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := t0.Add(-30 * 24 * time.Hour)
	if err := os.Chtimes(filepath.Join(runs, "old"), old, old); err != nil {
		t.Fatal(err)
	}
	eng, store := fakes.Engine(t, clock,
		engine.Source{Name: "e2b[0]", Label: "[[e2b]] 0", Settings: set, Backend: &e2b.Backend{
			Client: fakes.Client(t, fe.URL, remote.HeaderAuth("X-API-Key", remote.NewSecret(e2bKey))), Metadata: sel, Now: clock.Now}},
		engine.Source{Name: "http[0]", Label: "[[http]] 0", Settings: set, Backend: hb},
		engine.Source{Name: "dirs[0]", Label: "[[dirs]] 0", Settings: policy.Settings{Retention: 24 * time.Hour}, Backend: &rundir.Backend{Root: runs}},
	)
	return &world{clock, fe, fh, runs, eng, store}
}

func (w *world) plan(t *testing.T) (*plan.Plan, *engine.World) {
	t.Helper()
	p, wo, err := w.eng.Plan(context.Background(), engine.PlanOptions{})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return p, wo
}

func problem(p *plan.Plan, code plan.ProblemCode) *plan.Problem {
	for i := range p.Problems {
		if p.Problems[i].Code == code {
			return &p.Problems[i]
		}
	}
	return nil
}

func hasAction(p *plan.Plan, id string, step backend.Step) bool {
	return slices.ContainsFunc(p.Actions, func(a plan.Action) bool { return a.Runtime == id && a.Step == step })
}

func hasNotice(p *plan.Plan, id string, step backend.Step) bool {
	return slices.ContainsFunc(p.Scheduled, func(n plan.Notice) bool { return n.Runtime == id && n.Step == step })
}

// Rule: one source's bad data is that source's problem. An E2B sandbox
// listed without an id, and one whose id is "..", are skipped and
// reported; the pass goes on for the other sandboxes, the http source
// and the local run folders, and no request names "..".
func TestItemWithoutIDIsThatSourcesProblem(t *testing.T) {
	w := newWorld(t, policy.Settings{IdleSuspend: 30 * time.Minute}, "suspend", "delete")
	w.e2b.Add(fakes.E2BSandbox{ID: "good", Metadata: sel, State: "running", StartedAt: t0.Add(-2 * time.Hour), EndAt: t0.Add(time.Hour), OnTimeout: "pause"})
	w.http.Add(fakes.HTTPRuntime{ID: "h1", State: "running", LastActivity: t0.Add(-2 * time.Hour), Labels: sel})
	w.e2b.Misbehave("GET /v2/sandboxes", fakes.EditJSON(func(doc any) any {
		list := doc.([]any)
		for _, id := range []string{"", ".."} {
			bad := map[string]any{}
			for k, v := range list[0].(map[string]any) {
				bad[k] = v
			}
			bad["sandboxID"] = id
			list = append(list, bad)
		}
		return list
	}))
	p, wo := w.plan(t)
	var bad []string
	for _, pr := range p.Problems {
		if pr.Code == plan.BadItem && pr.Source == "e2b[0]" {
			bad = append(bad, pr.Runtime)
		}
	}
	if !slices.Equal(bad, []string{"", ".."}) {
		t.Errorf("bad items reported: %q, want the empty id and \"..\"; problems %+v", bad, p.Problems)
	}
	for _, id := range []string{"good", "h1"} {
		if !hasAction(p, id, backend.StepSuspend) {
			t.Errorf("%s: no suspend planned; plan %+v", id, p.Actions)
		}
	}
	if !hasNotice(p, "old", backend.StepArchive) {
		t.Errorf("the local run folder was not announced: %+v", p.Scheduled)
	}
	res, err := w.eng.Apply(context.Background(), p, engine.ApplyOptions{World: wo})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := w.e2b.Get("good"); s.State != "paused" {
		t.Errorf("good is %s, want paused (results %+v)", s.State, res.Results)
	}
	if r, _ := w.http.Get("h1"); r.State != "suspended" {
		t.Errorf("h1 is %s, want suspended", r.State)
	}
	if _, err := w.store.Runtime(context.Background(), ledger.Key{Source: "e2b[0]", Backend: "e2b", ID: ".."}); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the ledger recorded \"..\": %v", err)
	}
}

// Rule: a 503 on a narrowed read is that source's problem. A runtime with
// its own retention is re-read alone (GET /runtimes/{id}); its server
// failing that read leaves it alone in this pass, reported, while every
// other source is planned.
func TestNarrowedReadFailureIsThatSourcesProblem(t *testing.T) {
	// No policy of the remote sources reads activity: they are listed
	// lightly, and r1 alone is re-read for its own retention.
	w := newWorld(t, policy.Settings{Grace: time.Hour}, "suspend", "delete")
	w.http.Add(fakes.HTTPRuntime{ID: "r1", State: "suspended", LastActivity: t0.Add(-10 * 24 * time.Hour), Labels: sel})
	w.plan(t) // the ledger learns r1
	d := time.Hour
	if _, err := w.store.Update(context.Background(), ledger.Key{Source: "http[0]", Backend: "http", ID: "r1"}, func(r *ledger.RuntimeRecord) error {
		r.RetentionOverride = &d
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.http.FailOp("GET /runtimes/{id}", http.StatusServiceUnavailable, 100)
	p, _ := w.plan(t)
	pr := problem(p, plan.SourcePartial)
	if pr == nil || pr.Source != "http[0]" || !strings.Contains(pr.Message, "r1") {
		t.Fatalf("no source_partial problem for the http source: %+v", p.Problems)
	}
	if hasNotice(p, "r1", backend.StepArchive) || hasAction(p, "r1", backend.StepArchive) || hasAction(p, "r1", backend.StepDelete) {
		t.Errorf("r1 was planned although it could not be read: %+v %+v", p.Actions, p.Scheduled)
	}
	if !hasNotice(p, "old", backend.StepArchive) {
		t.Errorf("the other sources were not planned: %+v %+v", p.Actions, p.Scheduled)
	}
}

// Rule: an id is one path segment, or it is refused. "." and ".."
// (escaped or not) are never sent; a "/" inside an id is escaped and
// reaches the provider as one segment.
func TestIDsAreOnePathSegment(t *testing.T) {
	clock := fakes.NewClock(t0)
	fh := fakes.NewHTTPServer(t, httpToken, clock.Now, "suspend", "delete")
	c := fakes.Client(t, fh.URL, remote.BearerAuth(remote.NewSecret(httpToken)))
	for _, path := range []string{"/runtimes/../suspend", "/runtimes/./suspend", "/runtimes/%2E%2E/suspend", "/runtimes/%2e/suspend", "/runtimes//suspend"} {
		_, err := c.Do(context.Background(), remote.Request{Method: http.MethodPost, Path: path}, nil)
		if !errors.Is(err, remote.ErrBadID) || !errors.Is(err, backend.ErrProtected) {
			t.Errorf("%s: %v, want refused", path, err)
		}
	}
	if n := fh.Total(); n != 0 {
		t.Errorf("%d requests reached the provider", n)
	}
	b := &httpbackend.Backend{Client: c, Labels: sel}
	hb := httpbackend.With(b, map[string]bool{"suspend": true, "delete": true})
	fh.Add(fakes.HTTPRuntime{ID: "a/b", State: "running", Labels: sel})
	fh.Add(fakes.HTTPRuntime{ID: "a", State: "running", Labels: sel})
	s, _ := backend.As[backend.Suspender](hb)
	if err := s.Suspend(context.Background(), backend.Runtime{Key: backend.Key{Backend: "http", ID: "a/b"}}, backend.SuspendOptions{}); err != nil {
		t.Fatal(err)
	}
	if r, _ := fh.Get("a/b"); r.State != "suspended" {
		t.Errorf("a/b is %s", r.State)
	}
	if r, _ := fh.Get("a"); r.State != "running" {
		t.Errorf("a is %s: the id's slash was not escaped", r.State)
	}
	for _, id := range []string{".", ".."} {
		err := s.Suspend(context.Background(), backend.Runtime{Key: backend.Key{Backend: "http", ID: id}}, backend.SuspendOptions{})
		if !errors.Is(err, remote.ErrBadID) {
			t.Errorf("suspend %q: %v", id, err)
		}
	}
}

// Rule: a provider's clock is not ours. A last activity in 2100 is
// clamped to now and reported, so it exempts nothing; an activity in 1970
// on a sandbox created this year is raised to its creation, and said.
func TestProviderTimesInTheFutureAreClamped(t *testing.T) {
	w := newWorld(t, policy.Settings{IdleSuspend: 30 * time.Minute}, "suspend", "delete")
	future := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	w.http.Add(fakes.HTTPRuntime{ID: "ahead", State: "running", LastActivity: future, CreatedAt: future, Labels: sel})
	w.http.Add(fakes.HTTPRuntime{ID: "behind", State: "running", LastActivity: time.Unix(0, 0), CreatedAt: t0.Add(-2 * time.Hour), Labels: sel})
	p, wo := w.plan(t)
	said := map[string]string{}
	for _, pr := range p.Problems {
		if pr.Code == plan.ProviderClock {
			said[pr.Runtime] = pr.Message
		}
	}
	if !strings.Contains(said["ahead"], "in the future") || !strings.Contains(said["behind"], "before its creation") {
		t.Errorf("provider clock problems: %q", said)
	}
	for _, s := range wo.Runtimes {
		if s.Runtime.Backend != "http" {
			continue
		}
		if s.Runtime.LastActivity.After(t0.Add(engine.ClockSlack)) || s.Runtime.CreatedAt.After(t0.Add(engine.ClockSlack)) {
			t.Errorf("%s keeps a time in the future: %v %v", s.Runtime.ID, s.Runtime.LastActivity, s.Runtime.CreatedAt)
		}
		if s.Runtime.ID == "behind" && !s.Runtime.LastActivity.Equal(t0.Add(-2*time.Hour)) {
			t.Errorf("behind: last activity %v, want its creation", s.Runtime.LastActivity)
		}
	}
	// Taken from its creation, behind is idle 2h: suspended, not 20,000 days idle.
	for _, a := range p.Actions {
		if a.Runtime == "behind" && !strings.Contains(a.Reason, "idle 2h") {
			t.Errorf("behind: %s", a.Reason)
		}
	}
	if hasAction(p, "ahead", backend.StepSuspend) {
		t.Errorf("ahead suspended although its provider says it is active: %+v", p.Actions)
	}
}

// A creation in the future does not exempt a sandbox from max_lifetime
// forever: it counts from when reclaimer first saw it, and the suspend
// goes through apply's re-check although its provider's activity (in
// 2100) is clamped to a new now on every pass.
func TestFutureCreationStillReachesTheLifetimeCap(t *testing.T) {
	w := newWorld(t, policy.Settings{MaxLifetime: 2 * time.Hour}, "suspend", "delete")
	future := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	w.http.Add(fakes.HTTPRuntime{ID: "ahead", State: "running", LastActivity: future, CreatedAt: future, Labels: sel})
	if p, _ := pass(t, w.eng); hasAction(p, "ahead", backend.StepSuspend) {
		t.Fatalf("capped at first sight: %+v", p.Actions)
	}
	w.clock.Advance(3 * time.Hour)
	p, res := pass(t, w.eng)
	if !slices.ContainsFunc(p.Actions, func(a plan.Action) bool { return a.Runtime == "ahead" && a.Code == policy.RuleLifetime }) {
		t.Fatalf("no lifetime cap after 3h seen: %+v %+v", p.Actions, p.Problems)
	}
	if r := result(res, "ahead"); r.Outcome != plan.Done {
		t.Fatalf("result %+v", r)
	}
	if r, _ := w.http.Get("ahead"); r.State != "suspended" {
		t.Errorf("ahead is %s", r.State)
	}
}

func pass(t *testing.T, eng *engine.Engine) (*plan.Plan, *plan.Applied) {
	t.Helper()
	p, w, err := eng.Plan(context.Background(), engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Apply(context.Background(), p, engine.ApplyOptions{World: w})
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}

func result(res *plan.Applied, id string) plan.Result {
	for _, r := range res.Results {
		if r.Runtime == id {
			return r
		}
	}
	return plan.Result{}
}

// Rule: no deletion we did not announce. A Daytona sandbox whose
// auto-delete is 0 (deleted the moment it stops) is idle: the plan says
// that the timer is turned off first; apply turns it off, reads it back,
// and only then stops the sandbox, which is kept.
func TestSuspendThatWouldDeleteTurnsTheTimerOffFirst(t *testing.T) {
	clock := fakes.NewClock(t0)
	fd := fakes.NewDaytona(t, "dk-0123456789", clock.Now)
	fd.Add(fakes.DaytonaSandbox{ID: "d1", State: "started", Labels: sel, CreatedAt: t0.Add(-3 * time.Hour), LastActivity: t0.Add(-2 * time.Hour), AutoDelete: 0})
	b := &daytona.Backend{Client: fakes.Client(t, fd.URL, remote.BearerAuth(remote.NewSecret("dk-0123456789"))), Labels: sel}
	eng, _ := fakes.Engine(t, clock, engine.Source{Name: "daytona[0]", Backend: b, Settings: policy.Settings{IdleSuspend: 30 * time.Minute, Grace: time.Hour}})
	p, res := pass(t, eng)
	if len(p.Actions) != 1 || p.Actions[0].Step != backend.StepSuspend || !strings.Contains(p.Actions[0].Reason, "turned off and read back first") {
		t.Fatalf("plan %+v", p.Actions)
	}
	if r := result(res, "d1"); r.Outcome != plan.Done || !strings.Contains(r.Reason, "turned off") {
		t.Fatalf("result %+v", r)
	}
	s, ok := fd.Get("d1")
	if !ok || s.State != "stopped" || s.AutoDelete != -1 {
		t.Fatalf("sandbox %+v (deleted: %q), want stopped with auto-delete off", s, fd.Deleted("d1"))
	}
}

// Rule: no deletion we did not announce, where the timer cannot be
// changed. An http runtime deleted at once upon suspension (delete_seconds
// -1), whose server does not let reclaimer change that, is not suspended:
// a delete is announced, with the grace period, and carried out only when
// due.
func TestSuspendThatDeletesIsAnnouncedAsADelete(t *testing.T) {
	clock := fakes.NewClock(t0)
	fh := fakes.NewHTTPServer(t, httpToken, clock.Now, "suspend", "delete", "lifecycle", "lifecycle_write")
	fh.Add(fakes.HTTPRuntime{ID: "r1", State: "running", LastActivity: t0.Add(-2 * time.Hour), Labels: sel, Delete: -1,
		Changeable: []string{"idle_suspend"}})
	hb, err := httpbackend.Open(context.Background(), &httpbackend.Backend{Client: fakes.Client(t, fh.URL, remote.BearerAuth(remote.NewSecret(httpToken))), Labels: sel})
	if err != nil {
		t.Fatal(err)
	}
	eng, _ := fakes.Engine(t, clock, engine.Source{Name: "http[0]", Backend: hb, Settings: policy.Settings{IdleSuspend: 30 * time.Minute, Grace: time.Hour}})
	p, res := pass(t, eng)
	if len(p.Actions) != 0 || !hasNotice(p, "r1", backend.StepDelete) {
		t.Fatalf("first pass: actions %+v scheduled %+v", p.Actions, p.Scheduled)
	}
	if n := p.Scheduled[0]; n.Code != policy.RuleSuspendDeletes || !strings.Contains(n.Reason, "deletes it upon suspension") {
		t.Errorf("notice %+v", n)
	}
	if r, _ := fh.Get("r1"); r.State != "running" {
		t.Fatalf("r1 is %s after the announcing pass (results %+v)", r.State, res.Results)
	}
	clock.Advance(30 * time.Minute)
	if p, _ := pass(t, eng); len(p.Actions) != 0 {
		t.Fatalf("acted before the grace ended: %+v", p.Actions)
	}
	clock.Advance(31 * time.Minute)
	p, res = pass(t, eng)
	if !hasAction(p, "r1", backend.StepDelete) || result(res, "r1").Outcome != plan.Done {
		t.Fatalf("after the grace: %+v %+v", p.Actions, res.Results)
	}
	if _, ok := fh.Get("r1"); ok {
		t.Error("r1 still there")
	}
}

// Rule: an http server that reports no delete timer gets the same
// caution. Its lifecycle answer leaves delete_seconds out: unknown, so a
// write turning it off is sent and read back; the server still does not
// say, so the runtime is not suspended, and the result says why.
func TestUnreportedDeleteTimerIsNotTakenAsOff(t *testing.T) {
	clock := fakes.NewClock(t0)
	fh := fakes.NewHTTPServer(t, httpToken, clock.Now, "suspend", "delete", "lifecycle", "lifecycle_write")
	fh.Add(fakes.HTTPRuntime{ID: "r1", State: "running", LastActivity: t0.Add(-2 * time.Hour), Labels: sel, Delete: -1})
	for _, op := range []string{"GET /runtimes/{id}/lifecycle", "PUT /runtimes/{id}/lifecycle"} {
		fh.Misbehave(op, fakes.EditJSON(func(doc any) any {
			delete(doc.(map[string]any), "delete_seconds")
			return doc
		}))
	}
	hb, err := httpbackend.Open(context.Background(), &httpbackend.Backend{Client: fakes.Client(t, fh.URL, remote.BearerAuth(remote.NewSecret(httpToken))), Labels: sel})
	if err != nil {
		t.Fatal(err)
	}
	eng, _ := fakes.Engine(t, clock, engine.Source{Name: "http[0]", Backend: hb, Settings: policy.Settings{IdleSuspend: 30 * time.Minute, Grace: time.Hour}})
	p, res := pass(t, eng)
	if !hasAction(p, "r1", backend.StepSuspend) || !strings.Contains(p.Actions[0].Reason, "does not say whether it deletes") {
		t.Fatalf("plan %+v", p.Actions)
	}
	r := result(res, "r1")
	if r.Outcome != plan.Failed || !strings.Contains(r.Reason, "still deletes it upon suspension") {
		t.Fatalf("result %+v", r)
	}
	if n := fh.Calls("PUT /runtimes/{id}/lifecycle"); n != 1 {
		t.Errorf("%d writes of the timers, want 1", n)
	}
	if got, _ := fh.Get("r1"); got.State != "running" || got.Delete != 0 {
		t.Errorf("r1: %+v; want running, its delete timer off", got)
	}
}

// Rule: the timers are read again under the lock. Planned while the
// provider did not delete upon suspension, the runtime gains a delete
// timer reclaimer may not change before apply: the suspend is skipped.
func TestDeleteTimerAppearingBeforeApplyStopsTheSuspend(t *testing.T) {
	clock := fakes.NewClock(t0)
	fh := fakes.NewHTTPServer(t, httpToken, clock.Now, "suspend", "delete", "lifecycle")
	fh.Add(fakes.HTTPRuntime{ID: "r1", State: "running", LastActivity: t0.Add(-2 * time.Hour), Labels: sel})
	hb, err := httpbackend.Open(context.Background(), &httpbackend.Backend{Client: fakes.Client(t, fh.URL, remote.BearerAuth(remote.NewSecret(httpToken))), Labels: sel})
	if err != nil {
		t.Fatal(err)
	}
	eng, _ := fakes.Engine(t, clock, engine.Source{Name: "http[0]", Backend: hb, Settings: policy.Settings{IdleSuspend: 30 * time.Minute, Grace: time.Hour}})
	p, w, err := eng.Plan(context.Background(), engine.PlanOptions{})
	if err != nil || !hasAction(p, "r1", backend.StepSuspend) {
		t.Fatalf("plan %v %+v", err, p)
	}
	fh.Remove("r1")
	fh.Add(fakes.HTTPRuntime{ID: "r1", State: "running", LastActivity: t0.Add(-2 * time.Hour), Labels: sel, Delete: -1})
	res, err := eng.Apply(context.Background(), p, engine.ApplyOptions{World: w})
	if err != nil {
		t.Fatal(err)
	}
	if r := result(res, "r1"); r.Outcome != plan.Skip || !strings.Contains(r.Reason, "deletes it upon suspension") {
		t.Fatalf("result %+v", r)
	}
	if got, ok := fh.Get("r1"); !ok || got.State != "running" {
		t.Fatalf("r1: %+v %v", got, ok)
	}
}

// Rule: an archive that is a delete is called a delete. An http server
// that offers delete but not archive: retention announces a delete
// (retention_delete), sends a plain DELETE when due, and the plan, the
// result, the journal and the ledger's state all say delete, never
// archive. A server that archives gets an archive (mode=archive).
func TestRetentionWithoutArchiveIsADelete(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ops   []string
		step  backend.Step
		state backend.State
	}{
		{"no archive", []string{"suspend", "delete"}, backend.StepDelete, backend.StateDeleted},
		{"archive", []string{"suspend", "delete", "archive"}, backend.StepArchive, backend.StateArchived},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakes.NewClock(t0)
			fh := fakes.NewHTTPServer(t, httpToken, clock.Now, tc.ops...)
			fh.Add(fakes.HTTPRuntime{ID: "r1", State: "suspended", LastActivity: t0.Add(-10 * 24 * time.Hour), Labels: sel})
			hb, err := httpbackend.Open(context.Background(), &httpbackend.Backend{Client: fakes.Client(t, fh.URL, remote.BearerAuth(remote.NewSecret(httpToken))), Labels: sel})
			if err != nil {
				t.Fatal(err)
			}
			eng, store := fakes.Engine(t, clock, engine.Source{Name: "http[0]", Backend: hb, Settings: policy.Settings{Retention: 7 * 24 * time.Hour, Grace: time.Hour}})
			p, _ := pass(t, eng)
			if len(p.Scheduled) != 1 || p.Scheduled[0].Step != tc.step {
				t.Fatalf("notice %+v, want a %s", p.Scheduled, tc.step)
			}
			if tc.step == backend.StepDelete && (p.Scheduled[0].Code != policy.RuleRetentionDelete || !strings.Contains(p.Scheduled[0].Reason, "cannot archive")) {
				t.Errorf("notice %+v", p.Scheduled[0])
			}
			clock.Advance(2 * time.Hour)
			p, res := pass(t, eng)
			r := result(res, "r1")
			if len(p.Actions) != 1 || p.Actions[0].Step != tc.step || r.Step != tc.step || r.Outcome != plan.Done || r.ArchiveID != "" {
				t.Fatalf("plan %+v result %+v", p.Actions, r)
			}
			k := ledger.Key{Source: "http[0]", Backend: "http", ID: "r1"}
			rec, err := store.Runtime(context.Background(), k)
			if err != nil || rec.State != string(tc.state) {
				t.Errorf("ledger state %q (%v), want %s", rec.State, err, tc.state)
			}
			journal, err := store.ListJournal(context.Background(), ledger.JournalFilter{Key: k})
			if err != nil || len(journal) == 0 || journal[0].Intent.Step != string(tc.step) {
				t.Errorf("journal %+v %v", journal, err)
			}
			got, kept := fh.Get("r1")
			if tc.step == backend.StepDelete && kept {
				t.Errorf("r1 still there: %+v", got)
			}
			if tc.step == backend.StepArchive && (!kept || got.State != "archived") {
				t.Errorf("r1 after the archive: %+v %v", got, kept)
			}
		})
	}
}

// An explicit archive of a runtime whose backend cannot archive is
// refused, and never sent as a DELETE.
func TestArchiveRequestOnBackendWithoutArchiveIsRefused(t *testing.T) {
	clock := fakes.NewClock(t0)
	fh := fakes.NewHTTPServer(t, httpToken, clock.Now, "suspend", "delete")
	fh.Add(fakes.HTTPRuntime{ID: "r1", State: "suspended", LastActivity: t0.Add(-time.Hour), Labels: sel})
	hb, err := httpbackend.Open(context.Background(), &httpbackend.Backend{Client: fakes.Client(t, fh.URL, remote.BearerAuth(remote.NewSecret(httpToken))), Labels: sel})
	if err != nil {
		t.Fatal(err)
	}
	eng, _ := fakes.Engine(t, clock, engine.Source{Name: "http[0]", Backend: hb})
	p, _, err := eng.Plan(context.Background(), engine.PlanOptions{Requests: []policy.Request{{Key: backend.Key{Source: "http[0]", Backend: "http", ID: "r1"}, Step: backend.StepArchive}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 0 || !slices.ContainsFunc(p.Skipped, func(s plan.Skipped) bool { return strings.Contains(s.Reason, "cannot archive") }) {
		t.Fatalf("plan %+v skipped %+v", p.Actions, p.Skipped)
	}
	d, _ := backend.As[backend.Deleter](hb)
	err = d.Delete(context.Background(), backend.Runtime{Key: backend.Key{Backend: "http", ID: "r1"}}, backend.DeleteOptions{Step: backend.StepArchive})
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("archive through the backend: %v", err)
	}
	if _, ok := fh.Get("r1"); !ok {
		t.Error("r1 was deleted by an archive")
	}
}
