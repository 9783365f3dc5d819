package httpbackend_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/httpbackend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

const token = "orchestrator-token-0123"

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

var selector = map[string]string{"pool": "agents"}

var allOps = []string{"suspend", "delete", "archive", "lifecycle", "lifecycle_write", "touch"}

type env struct {
	f     *fakes.HTTPServer
	clock *fakes.Clock
	b     backend.Backend
	eng   *engine.Engine
	store ledger.Store
	raw   *httpbackend.Backend
}

func setup(t *testing.T, set policy.Settings, ops ...string) *env {
	t.Helper()
	clock := fakes.NewClock(t0)
	f := fakes.NewHTTPServer(t, token, clock.Now, ops...)
	b := &httpbackend.Backend{Client: fakes.Client(t, f.URL, remote.BearerAuth(remote.NewSecret(token))), Labels: selector}
	opened, err := httpbackend.Open(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	eng, store := fakes.Engine(t, clock, engine.Source{Name: "http[0]", Backend: opened, Settings: set})
	return &env{f, clock, opened, eng, store, b}
}

func (e *env) add(id, state string, last time.Time) {
	e.f.Add(fakes.HTTPRuntime{ID: id, State: state, LastActivity: last, CreatedAt: last.Add(-time.Hour), Labels: selector})
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

func TestIdleSuspendedStaleArchivedAfterNotice(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute, Retention: 7 * 24 * time.Hour, Grace: time.Hour}, allOps...)
	e.add("idle", "running", t0.Add(-time.Hour))
	e.add("stale", "suspended", t0.Add(-8*24*time.Hour))
	e.add("fresh", "running", t0.Add(-time.Minute))
	e.f.Add(fakes.HTTPRuntime{ID: "foreign", State: "running", LastActivity: t0.Add(-time.Hour), Labels: map[string]string{"pool": "other"}})
	p, res := e.pass(t)
	if len(p.Actions) != 1 || outcome(res, "idle").Outcome != plan.Done || len(p.Scheduled) != 1 {
		t.Fatalf("plan %+v scheduled %+v", p.Actions, p.Scheduled)
	}
	if r, _ := e.f.Get("fresh"); r.State != "running" {
		t.Fatalf("fresh: %s", r.State)
	}
	e.clock.Advance(2 * time.Hour)
	if _, res := e.pass(t); outcome(res, "stale").Outcome != plan.Done {
		t.Fatalf("%+v", res.Results)
	}
	for id, want := range map[string]string{"idle": "suspended", "stale": "archived", "fresh": "suspended", "foreign": "running"} {
		if r, _ := e.f.Get(id); r.State != want {
			t.Errorf("%s: %s, want %s", id, r.State, want)
		}
	}
}

func TestUnadvertisedOperationsAreNeverCalled(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute, Retention: time.Minute, Grace: 0}) // list only
	e.add("idle", "running", t0.Add(-time.Hour))
	e.add("stale", "suspended", t0.Add(-time.Hour))
	if got := backend.Capabilities(e.b); len(got) != 1 || got[0] != "Lister" {
		t.Fatalf("a list-only server gave roles %v", got)
	}
	// The policy knows the backend cannot act: nothing is planned, and the
	// fake fails the test on any unadvertised call.
	p, _ := e.pass(t)
	if len(p.Actions) != 0 {
		t.Fatalf("planned %+v", p.Actions)
	}
	if r, _ := e.f.Get("idle"); r.State != "running" {
		t.Fatal(r.State)
	}
}

func TestRolesFollowTheCapabilities(t *testing.T) {
	for _, tc := range []struct {
		ops  []string
		want []string
	}{
		{[]string{"suspend"}, []string{"Lister", "Suspender"}},
		{[]string{"delete", "touch"}, []string{"Lister", "Deleter"}},
		{[]string{"lifecycle", "suspend"}, []string{"Lister", "Suspender", "NativeLifecycle"}},
		{allOps, []string{"Lister", "Suspender", "Deleter", "NativeLifecycle"}},
	} {
		e := setup(t, policy.Settings{}, tc.ops...)
		if got := backend.Capabilities(e.b); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%v: roles %v, want %v", tc.ops, got, tc.want)
		}
	}
	// A server down at start: every role, each checking again when used.
	b := &httpbackend.Backend{Client: fakes.Client(t, "http://127.0.0.1:1", remote.BearerAuth(remote.NewSecret(token)))}
	opened, err := httpbackend.Open(context.Background(), b)
	if err == nil || len(backend.Capabilities(opened)) != 4 {
		t.Fatalf("%v %v", err, backend.Capabilities(opened))
	}
	s, _ := backend.As[backend.Suspender](opened)
	if err := s.Suspend(context.Background(), backend.Runtime{Key: backend.Key{Source: "http[0]", Backend: "http", ID: "x"}}, backend.SuspendOptions{}); errors.Is(err, errors.ErrUnsupported) || err == nil {
		t.Fatalf("want the outage, got %v", err)
	}
}

func TestHeldUntouchedAndOutageReported(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, allOps...)
	e.add("held", "running", t0.Add(-time.Hour))
	ctx := context.Background()
	if _, err := e.store.TakeHold(ctx, ledger.HoldRequest{Key: ledger.Key{Source: "http[0]", Backend: "http", ID: "held"}, Holder: "x", TTL: time.Hour, Now: t0}); err != nil {
		t.Fatal(err)
	}
	e.f.Fail(http.StatusTooManyRequests, 2)
	e.f.Fail(http.StatusInternalServerError, 2)
	if p, _ := e.pass(t); len(p.Actions) != 0 {
		t.Fatalf("%+v", p.Actions)
	}
	e.f.Fail(http.StatusServiceUnavailable, 100)
	p, _, err := e.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil || len(p.Problems) == 0 || p.Problems[0].Code != plan.SourceUnreadable {
		t.Fatalf("%v %+v", err, p.Problems)
	}
}

func TestGoneBetweenPlanAndApply(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, allOps...)
	e.add("idle", "running", t0.Add(-time.Hour))
	ctx := context.Background()
	p, _, err := e.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil || len(p.Actions) != 1 {
		t.Fatal(err, p)
	}
	e.f.Remove("idle")
	res, _ := e.eng.Apply(ctx, p, engine.ApplyOptions{})
	if r := outcome(res, "idle"); r.Outcome != plan.Skip || !strings.HasPrefix(r.Reason, "changed since plan") {
		t.Fatalf("%+v", r)
	}
}

func TestPaginationOver1000(t *testing.T) {
	e := setup(t, policy.Settings{}, allOps...)
	for i := range 2500 {
		e.add(fmt.Sprintf("rt-%04d", i), "running", t0)
	}
	l, _ := backend.As[backend.Lister](e.b)
	rts, err := l.List(context.Background(), backend.ListOptions{})
	if err != nil || len(rts) != 2500 {
		t.Fatalf("%d %v", len(rts), err)
	}
	if n := e.f.Calls("GET /runtimes"); n != 3 {
		t.Errorf("%d pages", n)
	}
}

// TestEndlessListingsEnd: rule "a listing ends", on the http protocol's
// cursor in the body. A server that names a fresh next_cursor every time,
// with runtimes of another pool (which it should have filtered out),
// with empty pages, or with runtimes of ours without end, is stopped at the
// source's bounds, under a deadline and a memory ceiling; the pass reports
// it and does not use the partial listing. The fake checks every request
// against the protocol's document; only the listing's answers are its own.
func TestEndlessListingsEnd(t *testing.T) {
	for _, how := range []string{"theirs", "empty", "ours"} {
		t.Run(how, func(t *testing.T) {
			e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, allOps...)
			e.add("r1", "running", t0.Add(-2*time.Hour))
			// Smaller than the defaults, so that the race detector on a
			// loaded machine stays within the deadline.
			e.raw.Bounds = remote.Bounds{MaxPages: 300, MaxItems: 5000}
			var n int
			e.f.Intercept(func(op string, _ *http.Request) *fakes.Answer {
				if op != "GET /runtimes" {
					return nil
				}
				n++
				var items []string
				for i := range 200 {
					pool := "other"
					if how == "ours" {
						pool = "agents"
					}
					if how != "empty" {
						items = append(items, fmt.Sprintf(`{"id":"x%d-%d","state":"running","labels":{"pool":%q}}`, n, i, pool))
					}
				}
				return &fakes.Answer{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
					Body: fmt.Appendf(nil, `{"items":[%s],"next_cursor":"c%d"}`, strings.Join(items, ","), n)}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var p *plan.Plan
			var err error
			testtree.HeapCeiling(t, 96<<20, func() { p, _, err = e.eng.Plan(ctx, engine.PlanOptions{}) })
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Problems) != 1 || p.Problems[0].Code != plan.SourceUnreadable || !strings.Contains(p.Problems[0].Message, "does not end") {
				t.Fatalf("problems %+v", p.Problems)
			}
			if len(p.Actions) != 0 || ctx.Err() != nil {
				t.Fatalf("actions %+v from a partial listing (deadline: %v)", p.Actions, ctx.Err())
			}
		})
	}
}
