package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

var now = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// remoteish is an in-memory backend of sandboxes (one orchestrator): it
// lists, suspends and deletes, and records what it was asked.
type remoteish struct {
	mu         sync.Mutex
	rts        map[string]backend.Runtime
	suspended  []string
	suspendErr error
	deleteErr  error
}

func newRemoteish(ids ...string) *remoteish {
	r := &remoteish{rts: map[string]backend.Runtime{}}
	for _, id := range ids {
		r.rts[id] = backend.Runtime{Key: backend.Key{Backend: "sbx", ID: id}, State: backend.StateRunning,
			LastActivity: now.Add(-2 * time.Hour), Fingerprint: "v1"}
	}
	return r
}

func (r *remoteish) Name() string { return "sbx" }

func (r *remoteish) List(_ context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []backend.Runtime
	for _, id := range slices.Sorted(maps.Keys(r.rts)) {
		if len(opts.IDs) == 0 || slices.Contains(opts.IDs, id) {
			out = append(out, r.rts[id])
		}
	}
	return out, nil
}

func (r *remoteish) Suspend(_ context.Context, rt backend.Runtime, _ backend.SuspendOptions) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.suspendErr != nil {
		return r.suspendErr
	}
	cur, ok := r.rts[rt.ID]
	if !ok {
		return backend.ErrNotFound
	}
	cur.State = backend.StateSuspended
	r.rts[rt.ID] = cur
	r.suspended = append(r.suspended, rt.ID)
	return nil
}

func (r *remoteish) Delete(_ context.Context, rt backend.Runtime, _ backend.DeleteOptions) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deleteErr != nil {
		return r.deleteErr
	}
	delete(r.rts, rt.ID)
	return nil
}

func (r *remoteish) vanish(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.rts, id)
}

func (r *remoteish) suspendedIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.suspended)
}

// locking adds a Locker to a remoteish.
type locking struct {
	*remoteish
	lock  func(rt backend.Runtime, opts backend.LockOptions) (backend.Lock, error)
	calls []backend.Step
}

func (l *locking) Lock(_ context.Context, rt backend.Runtime, opts backend.LockOptions) (backend.Lock, error) {
	l.calls = append(l.calls, opts.Step)
	return l.lock(rt, opts)
}

func newEngine(t *testing.T, sources ...engine.Source) (*engine.Engine, ledger.Store) {
	t.Helper()
	dir := t.TempDir()
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	eng, err := engine.New(engine.Options{Ledger: store, StateDir: filepath.Join(dir, "state"),
		ArchiveDir: filepath.Join(dir, "archives"), Sources: sources, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng, store
}

var idle = policy.Settings{IdleSuspend: 30 * time.Minute}

func planAndApply(t *testing.T, eng *engine.Engine, between func()) (*plan.Plan, *plan.Applied) {
	t.Helper()
	ctx := context.Background()
	p, _, err := eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if between != nil {
		between()
	}
	res, err := eng.Apply(ctx, p, engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}

// TestSameIDOfAnotherSourceIsAnotherRuntime: two orchestrators of one
// backend both have a sandbox "dev". A's vanishes between plan and apply;
// B's, under no policy, is not suspended in its stead, and A's pin never
// protected B's nor B's lease A's.
func TestSameIDOfAnotherSourceIsAnotherRuntime(t *testing.T) {
	a, b := newRemoteish("dev"), newRemoteish("dev")
	eng, store := newEngine(t, engine.Source{Name: "a", Backend: a, Settings: idle}, engine.Source{Name: "b", Backend: b})
	p, res := planAndApply(t, eng, func() { a.vanish("dev") })
	if len(p.Actions) != 1 || p.Actions[0].Source != "a" || p.Actions[0].Step != backend.StepSuspend {
		t.Fatalf("plan: %+v", p.Actions)
	}
	if len(res.Results) != 1 || res.Results[0].Outcome != plan.Skip || res.Results[0].Code != plan.ChangedSincePlan {
		t.Fatalf("A's dev vanished; results %+v", res.Results)
	}
	if got := b.suspendedIDs(); len(got) != 0 {
		t.Fatalf("B's dev was suspended under A's policy: %v", got)
	}

	// Marks follow the key, source included: B's pin does not protect A's
	// dev, back again.
	ctx := context.Background()
	kb := backend.Key{Source: "b", Backend: "sbx", ID: "dev"}
	if _, err := store.Update(ctx, kb, func(r *ledger.RuntimeRecord) error { r.Pinned = true; return nil }); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.rts["dev"] = newRemoteish("dev").rts["dev"]
	a.mu.Unlock()
	p, _, err := eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 1 || p.Actions[0].Source != "a" {
		t.Fatalf("B's pin changed A's plan: %+v skipped %+v", p.Actions, p.Skipped)
	}
}

// TestLockerIsAsked: a backend's lock is taken for the step and its answer
// decides; a lock the backend cannot take for this runtime falls back to
// the engine's own re-check.
func TestLockerIsAsked(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lock     func(rt backend.Runtime, _ backend.LockOptions) (backend.Lock, error)
		outcome  plan.Outcome
		code     plan.ResultCode
		suspends bool
	}{
		{"granted", func(rt backend.Runtime, _ backend.LockOptions) (backend.Lock, error) {
			return backend.Lock{Runtime: rt}, nil
		}, plan.Done, "", true},
		{"busy", func(backend.Runtime, backend.LockOptions) (backend.Lock, error) {
			return backend.Lock{}, errors.Join(errors.New("lock: a process started inside"), backend.ErrBusy)
		}, plan.Skip, plan.ChangedSincePlan, false},
		{"changed under the lock", func(rt backend.Runtime, _ backend.LockOptions) (backend.Lock, error) {
			rt.Fingerprint = "v2"
			return backend.Lock{Runtime: rt}, nil
		}, plan.Skip, plan.ChangedSincePlan, false},
		{"gone", func(backend.Runtime, backend.LockOptions) (backend.Lock, error) {
			return backend.Lock{}, backend.ErrNotFound
		}, plan.Skip, plan.ChangedSincePlan, false},
		{"unsupported: the engine re-checks", func(backend.Runtime, backend.LockOptions) (backend.Lock, error) {
			return backend.Lock{}, errors.ErrUnsupported
		}, plan.Done, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &locking{remoteish: newRemoteish("dev"), lock: tc.lock}
			eng, _ := newEngine(t, engine.Source{Name: "a", Backend: l, Settings: idle})
			_, res := planAndApply(t, eng, nil)
			if len(res.Results) != 1 || res.Results[0].Outcome != tc.outcome || res.Results[0].Code != tc.code {
				t.Fatalf("results %+v", res.Results)
			}
			if !slices.Equal(l.calls, []backend.Step{backend.StepSuspend}) {
				t.Errorf("lock asked for %v", l.calls)
			}
			if got := len(l.suspendedIDs()) == 1; got != tc.suspends {
				t.Errorf("suspended: %v, want %v", got, tc.suspends)
			}
		})
	}
}

// TestStepTheBackendCannotTakeIsSkipped: ErrUnsupported from a step is a
// skip with code unsupported, not a failure; a runtime gone by the time of
// the step is a skip too.
func TestStepTheBackendCannotTakeIsSkipped(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code plan.ResultCode
	}{
		{errors.Join(errors.New("suspend dev: this sandbox kind cannot pause"), errors.ErrUnsupported), plan.Unsupported},
		{errors.Join(errors.New("suspend dev: gone"), backend.ErrNotFound), plan.ChangedSincePlan},
	} {
		r := newRemoteish("dev")
		r.suspendErr = tc.err
		eng, store := newEngine(t, engine.Source{Name: "a", Backend: r, Settings: idle})
		_, res := planAndApply(t, eng, nil)
		if len(res.Results) != 1 || res.Results[0].Outcome != plan.Skip || res.Results[0].Code != tc.code ||
			strings.Contains(res.Results[0].Reason, "\n") {
			t.Fatalf("%v: results %+v", tc.err, res.Results)
		}
		if res.Failed() {
			t.Errorf("%v: counted as a failure", tc.err)
		}
		entries, err := store.ListJournal(context.Background(), ledger.JournalFilter{})
		if err != nil || len(entries) != 1 || entries[0].Outcome == nil || entries[0].Outcome.Result != ledger.ResultSkipped {
			t.Errorf("%v: journal %+v %v", tc.err, entries, err)
		}
	}
}

// TestLegacyRecordsAreAdoptedByTheOneSourceListingThem: a record written
// before keys carried their source (its pin included) goes to the one
// source that lists its runtime; when two do, neither gets it, the pass
// says so, and the pin protects both rather than none.
func TestLegacyRecordsAreAdoptedByTheOneSourceListingThem(t *testing.T) {
	ctx := context.Background()
	legacy := func(t *testing.T, store ledger.Store, id string) {
		k := backend.Key{Backend: "sbx", ID: id}
		if err := store.Observe(ctx, []ledger.Observation{{Key: k, State: "running", At: now.Add(-time.Hour)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Update(ctx, k, func(r *ledger.RuntimeRecord) error { r.Pinned = true; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	pinned := func(store ledger.Store, k backend.Key) bool {
		r, err := store.Runtime(ctx, k)
		return err == nil && r.Pinned
	}
	eng, store := newEngine(t, engine.Source{Name: "a", Backend: newRemoteish("one", "both"), Settings: idle},
		engine.Source{Name: "b", Backend: newRemoteish("both"), Settings: idle})
	legacy(t, store, "one")
	legacy(t, store, "both")
	p, _, err := eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !pinned(store, backend.Key{Source: "a", Backend: "sbx", ID: "one"}) {
		t.Error("the pin of a runtime only a lists did not go to a")
	}
	for _, src := range []string{"a", "b"} {
		if pinned(store, backend.Key{Source: src, Backend: "sbx", ID: "both"}) {
			t.Errorf("a legacy pin listed by two sources went to %s", src)
		}
	}
	var problems []plan.ProblemCode
	for _, pr := range p.Problems {
		problems = append(problems, pr.Code)
	}
	if !slices.Equal(problems, []plan.ProblemCode{plan.LegacyAmbiguous}) {
		t.Errorf("problems %+v, want one legacy_ambiguous", p.Problems)
	}
	if len(p.Actions) != 0 {
		t.Errorf("a legacy pin protects a/one, a/both and b/both; planned %+v", p.Actions)
	}
}

// stalling lists like its remoteish until told to stall, then waits for
// its context (a provider answering 429 with a long Retry-After).
type stalling struct {
	*remoteish
	stall bool
}

func (s *stalling) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	if s.stall {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.remoteish.List(ctx, opts)
}

// TestListingTimeIsBounded: a source whose listing outlasts its
// list_timeout is a source_timeout problem of that source; the pass goes
// on with the others, and the stalled source's runtimes are not missing.
func TestListingTimeIsBounded(t *testing.T) {
	slow := &stalling{remoteish: newRemoteish("s1")}
	eng, store := newEngine(t, engine.Source{Name: "slow", Label: `[[http]] endpoint = "https://slow"`, Backend: slow, Settings: idle,
		ListTimeout: 50 * time.Millisecond}, engine.Source{Name: "fast", Backend: newRemoteish("f1"), Settings: idle})
	ctx := context.Background()
	if _, _, err := eng.Plan(ctx, engine.PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	slow.stall = true
	p, _, err := eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Problems) != 1 || p.Problems[0].Code != plan.SourceTimeout || p.Problems[0].Source != "slow" ||
		!strings.Contains(p.Problems[0].Label, "https://slow") {
		t.Fatalf("problems %+v", p.Problems)
	}
	if len(p.Actions) != 1 || p.Actions[0].Source != "fast" {
		t.Errorf("actions %+v, want the fast source's", p.Actions)
	}
	if rec, err := store.Runtime(ctx, backend.Key{Source: "slow", Backend: "sbx", ID: "s1"}); err != nil || rec.State == string(backend.StateMissing) {
		t.Errorf("the stalled source's runtime: %+v %v", rec, err)
	}
}

// stallsOnIDs lists lightly at once but stalls a narrowed re-read (a
// provider whose GET /runtimes/{id} never answers) until its context ends.
type stallsOnIDs struct{ *remoteish }

func (s stallsOnIDs) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	if len(opts.IDs) > 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.remoteish.List(ctx, opts)
}

// TestNarrowedReadTimeIsBounded: the re-read of a lightly listed runtime
// is bounded by its source's list_timeout like the listing: past it, that
// runtime is a source_partial problem, left alone in this pass, and the
// other sources are planned.
func TestNarrowedReadTimeIsBounded(t *testing.T) {
	// No policy of the slow source reads activity, so it is listed
	// lightly; s1 has a retention of its own, so it is re-read.
	slow := stallsOnIDs{newRemoteish("s1")}
	eng, store := newEngine(t, engine.Source{Name: "slow", Backend: slow, Settings: policy.Settings{Grace: time.Hour},
		ListTimeout: 50 * time.Millisecond}, engine.Source{Name: "fast", Backend: newRemoteish("f1"), Settings: idle})
	ctx := context.Background()
	if _, _, err := eng.Plan(ctx, engine.PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	d := time.Minute
	if _, err := store.Update(ctx, backend.Key{Source: "slow", Backend: "sbx", ID: "s1"}, func(r *ledger.RuntimeRecord) error {
		r.RetentionOverride = &d
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second) // the pass's own bound, far above list_timeout
	defer cancel()
	p, _, err := eng.Plan(pctx, engine.PlanOptions{})
	if err != nil {
		t.Fatalf("plan: %v (the stalled re-read ran into the pass's bound)", err)
	}
	var partial *plan.Problem
	for i := range p.Problems {
		if p.Problems[i].Code == plan.SourcePartial && p.Problems[i].Source == "slow" {
			partial = &p.Problems[i]
		}
	}
	if partial == nil || !strings.Contains(partial.Message, "list_timeout") || !strings.Contains(partial.Message, "s1") {
		t.Fatalf("no source_partial problem naming list_timeout and s1: %+v", p.Problems)
	}
	for _, a := range p.Actions {
		if a.Source == "slow" {
			t.Errorf("s1 was planned although it could not be re-read: %+v", a)
		}
	}
	if len(p.Actions) != 1 || p.Actions[0].Source != "fast" {
		t.Errorf("actions %+v, want the fast source's", p.Actions)
	}
}

// waiter is a source that counts the listings under way when it was
// asked to list, and stalls until its context ends when stall is set.
type waiter struct {
	*remoteish
	stall   bool
	running *atomic.Int32 // stalled listings under way, shared
	seen    chan int32    // fast: how many were under way when it started
}

func (w *waiter) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	if w.stall {
		w.running.Add(1)
		defer w.running.Add(-1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	select {
	case w.seen <- w.running.Load():
	default:
	}
	return w.remoteish.List(ctx, opts)
}

// TestStalledSourcesDoNotStarveTheOthers: rule "no stalled source starves
// the others". With every listing slot taken by sources that stall until
// their list_timeout, another source is still listed soon (after
// SlowListing), not only once they time out; the pass reports the stalled
// ones and plans the other's runtime.
func TestStalledSourcesDoNotStarveTheOthers(t *testing.T) {
	dir := t.TempDir()
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	const slots = 2
	running := &atomic.Int32{}
	var sources []engine.Source
	for i := range 3 {
		slow := &waiter{remoteish: newRemoteish(fmt.Sprintf("s%d", i)), stall: true, running: running}
		sources = append(sources, engine.Source{Name: fmt.Sprintf("slow%d", i), Backend: slow, Settings: idle, ListTimeout: time.Second})
	}
	fast := &waiter{remoteish: newRemoteish("f1"), running: running, seen: make(chan int32, 1)}
	sources = append(sources, engine.Source{Name: "fast", Backend: fast, Settings: idle})
	eng, err := engine.New(engine.Options{Ledger: store, StateDir: filepath.Join(dir, "state"), ArchiveDir: filepath.Join(dir, "archives"),
		Sources: sources, Now: func() time.Time { return now }, Concurrency: slots, SlowListing: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	// The order the listings take their slots in is the scheduler's: try
	// until the stalled ones took them all first.
	for try := 0; ; try++ {
		begin := time.Now()
		p, _, err := eng.Plan(context.Background(), engine.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(begin)
		if len(p.Problems) != 3 || p.Problems[0].Code != plan.SourceTimeout {
			t.Fatalf("problems %+v", p.Problems)
		}
		if len(p.Actions) != 1 || p.Actions[0].Source != "fast" {
			t.Fatalf("actions %+v, want the other source's", p.Actions)
		}
		under := <-fast.seen
		if under < slots {
			if try == 10 {
				t.Fatal("in 10 passes the other source was never listed while the stalled listings were under way: it waited for their slots")
			}
			continue
		}
		// Without the rule the other source would have waited for a
		// slot until a stalled listing timed out, and a second round of
		// them after that: two list_timeouts at least.
		if took > 1800*time.Millisecond {
			t.Fatalf("the pass took %s with %d stalled listings under way when the other began", took, under)
		}
		return
	}
}
