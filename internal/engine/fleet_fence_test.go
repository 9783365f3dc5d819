package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/cloudflare"
	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/backend/rundir"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// The fence of every write the leader makes for a remote runtime, beyond
// the journal intents and state marks: observations, outcomes, failure
// notices, archives. Each test has a stale leader: replica a, whose lease
// was taken over by replica b in the database (the generation bumped)
// while a's own term, by its clock, still runs (a long lease that a does
// not renew during the test). Whatever a writes then must be refused
// (ledger.ErrFenced) and leave nothing; b's writes commit.

// staleTTL is the lease of a replica that goes stale: no renewal (every
// TTL/3) happens while a test runs, so only the lease row says it ended.
const staleTTL = 3 * time.Minute

// replica is one fleet replica for these tests.
type replica struct {
	st   *postgres.Store
	el   *leader.Elector
	eng  *engine.Engine
	logs *testtree.SyncBuffer
}

func newReplica(t *testing.T, url, name string, ttl time.Duration, sources ...engine.Source) *replica {
	t.Helper()
	st, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	el, err := leader.New(leader.Config{Lessor: st, Lease: "remote", Replica: name, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); el.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	logs := &testtree.SyncBuffer{}
	eng, err := engine.New(engine.Options{Ledger: st, Locker: st, Fencer: st, Lead: el.Term, Sources: sources,
		StateDir: filepath.Join(t.TempDir(), "state"), ArchiveDir: filepath.Join(t.TempDir(), "archives"),
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &replica{st: st, el: el, eng: eng, logs: logs}
}

// staleAndNew starts replica a, which leads, then replica b, which
// follows; take makes b take a's lease over.
func staleAndNew(t *testing.T, url string, a, b []engine.Source) (stale, fresh *replica, take func() error) {
	t.Helper()
	stale = newReplica(t, url, "a", staleTTL, a...)
	waitLeading(t, stale.el)
	// b takes over at once on a's resignation (or at its next attempt,
	// TTL/3, if it missed the notification), and renews so rarely that
	// no renewal can be late in a test.
	fresh = newReplica(t, url, "b", 30*time.Second, b...)
	var once sync.Once
	var err error
	take = func() error {
		once.Do(func() { err = takeOver(stale, fresh) })
		return err
	}
	return stale, fresh, take
}

// takeOver gives a's lease up in the database behind a's back (a's term
// goes on by its own clock) and waits until b holds it, with a higher
// generation.
func takeOver(a, b *replica) error {
	term, ok := a.el.Term()
	if !ok {
		return errors.New("a does not lead")
	}
	old := term.Lease()
	if err := a.st.Resign(context.Background(), old); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if t, ok := b.el.Term(); ok {
			if g := t.Lease().Generation; g <= old.Generation {
				return fmt.Errorf("b leads under generation %d, a had %d", g, old.Generation)
			}
			break
		}
		if time.Now().After(deadline) {
			return errors.New("b did not take the lease over within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !term.Valid() {
		return errors.New("a's term ended by its own clock: the test needs it running")
	}
	return nil
}

func e2bSource(t *testing.T, fake *fakes.E2B) engine.Source {
	client := fakes.Client(t, fake.URL, remote.HeaderAuth("X-API-Key", remote.NewSecret("key")))
	return engine.Source{Name: "sandboxes", Kind: "e2b", Shared: true, Settings: policy.Settings{IdleSuspend: time.Hour},
		Backend: &e2b.Backend{Client: client, Metadata: map[string]string{"fleet": "t"}}}
}

func addSandbox(fake *fakes.E2B, id string, started time.Time) {
	fake.Add(fakes.E2BSandbox{ID: id, Metadata: map[string]string{"fleet": "t"}, StartedAt: started, EndAt: time.Now().Add(48 * time.Hour)})
}

func sbKey(id string) backend.Key { return backend.Key{Source: "sandboxes", Backend: e2b.Name, ID: id} }

func stateOf(t *testing.T, st ledger.Store, k backend.Key) string {
	t.Helper()
	r, err := st.Runtime(t.Context(), k)
	if errors.Is(err, ledger.ErrNotFound) {
		return "(none)"
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

// wasFenced checks that r logged a write refused by the lease row.
func wasFenced(t *testing.T, r *replica) {
	t.Helper()
	if !strings.Contains(r.logs.String(), ledger.ErrFenced.Error()) {
		t.Errorf("no write refused by the fence in the stale leader's log:\n%s", r.logs.String())
	}
}

// TestFencedObservations: a stale leader's listing of a shared source is
// not recorded (no remote runtime marked missing, none added) and its
// runtimes are not planned on, while its own sources' observations are
// written as before; the new leader's are recorded.
func TestFencedObservations(t *testing.T) {
	url := pgtest.NewDatabase(t)
	fake := fakes.NewE2B(t, "key", time.Now)
	for i := range 3 {
		addSandbox(fake, fmt.Sprintf("sb-%d", i), time.Now())
	}
	runs := t.TempDir()
	if err := os.Mkdir(filepath.Join(runs, "r0"), 0o755); err != nil {
		t.Fatal(err)
	}
	local := engine.Source{Name: "a/dirs:runs", Kind: "dirs", Backend: &rundir.Backend{Root: runs}}
	a, b, take := staleAndNew(t, url, []engine.Source{e2bSource(t, fake), local}, []engine.Source{e2bSource(t, fake)})
	ctx := t.Context()
	dir := func(id string) backend.Key { return backend.Key{Source: local.Name, Backend: "dir", ID: id} }

	// The valid term records the listing.
	if _, _, err := a.eng.Plan(ctx, engine.PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sb-0", "sb-1", "sb-2"} {
		if s := stateOf(t, a.st, sbKey(id)); s != "running" {
			t.Fatalf("%s recorded as %s by the leader", id, s)
		}
	}
	if s := stateOf(t, a.st, dir("r0")); s == "(none)" {
		t.Fatal("r0 not recorded")
	}

	if err := take(); err != nil {
		t.Fatal(err)
	}
	fake.Remove("sb-0")
	addSandbox(fake, "sb-9", time.Now())
	if err := os.Mkdir(filepath.Join(runs, "r1"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, w, err := a.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatalf("the stale leader's pass: %v", err)
	}
	wasFenced(t, a)
	for _, s := range w.Runtimes {
		if s.Source.Shared {
			t.Errorf("the stale leader's world holds %s, whose listing it could not record", s.Runtime.Key)
		}
	}
	if s := stateOf(t, a.st, sbKey("sb-0")); s != "running" {
		t.Errorf("sb-0 is %s after the stale leader's listing, want running (not marked missing)", s)
	}
	if s := stateOf(t, a.st, sbKey("sb-9")); s != "(none)" {
		t.Errorf("sb-9 recorded (%s) from the stale leader's listing", s)
	}
	if s := stateOf(t, a.st, dir("r1")); s == "(none)" {
		t.Error("the stale leader's own run folder r1 was not recorded: local observations are not fenced")
	}

	// The new leader's listing is recorded.
	if _, _, err := b.eng.Plan(ctx, engine.PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	if s := stateOf(t, b.st, sbKey("sb-0")); s != string(backend.StateMissing) {
		t.Errorf("sb-0 is %s after the new leader's listing, want missing", s)
	}
	if s := stateOf(t, b.st, sbKey("sb-9")); s != "running" {
		t.Errorf("sb-9 is %s after the new leader's listing, want running", s)
	}
}

// TestFencedOutcomeFinishedByRecovery: the lease is taken over while the
// leader's pause is at the provider. The pause happens (it was in flight),
// but its outcome and the state it left are refused: the entry stays
// unfinished, and the new leader's recovery finishes it from what it
// observes, without pausing again.
func TestFencedOutcomeFinishedByRecovery(t *testing.T) {
	url := pgtest.NewDatabase(t)
	fake := fakes.NewE2B(t, "key", time.Now)
	addSandbox(fake, "sb-0", time.Now().Add(-2*time.Hour))
	a, b, take := staleAndNew(t, url, []engine.Source{e2bSource(t, fake)}, []engine.Source{e2bSource(t, fake)})
	ctx := t.Context()
	p, w, err := a.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 1 || p.Actions[0].Step != backend.StepSuspend {
		t.Fatalf("the leader's plan: %+v", p.Actions)
	}
	var takeErr error
	fake.Intercept(func(op string, _ *http.Request) *fakes.Answer {
		if op == "POST /sandboxes/{sandboxID}/pause" {
			takeErr = take()
		}
		return nil
	})
	res, err := a.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
	fake.Intercept(nil)
	if err != nil || takeErr != nil {
		t.Fatal(err, takeErr)
	}
	if r := res.Results[0]; r.Outcome != plan.Done {
		t.Fatalf("the pause in flight: %s %s %s", r.Outcome, r.Code, r.Reason)
	}
	wasFenced(t, a)
	if got, _ := fake.Get("sb-0"); got.State != "paused" {
		t.Fatalf("sb-0 is %s at the provider", got.State)
	}
	unfinished, err := b.st.Unfinished(ctx)
	if err != nil || len(unfinished) != 1 || unfinished[0].Intent.Key != sbKey("sb-0") {
		t.Fatalf("unfinished after the refused outcome: %+v, %v", unfinished, err)
	}
	if s := stateOf(t, b.st, sbKey("sb-0")); s != "running" {
		t.Errorf("sb-0's state %s was written by the stale leader", s)
	}

	// The stale leader's own recovery may not finish it either.
	if n, err := a.eng.Recover(ctx); err != nil || n != 0 {
		t.Errorf("the stale leader recovered %d entries: %v", n, err)
	}
	if u, _ := b.st.Unfinished(ctx); len(u) != 1 {
		t.Fatalf("the stale leader's recovery closed the entry: %+v", u)
	}

	// The new leader's recovery re-observes and finishes it.
	n, err := b.eng.Recover(ctx)
	if err != nil || n != 1 {
		t.Fatalf("the new leader recovered %d entries: %v", n, err)
	}
	if u, _ := b.st.Unfinished(ctx); len(u) != 0 {
		t.Fatalf("still unfinished after the new leader's recovery: %+v", u)
	}
	j, err := b.st.ListJournal(ctx, ledger.JournalFilter{})
	if err != nil || len(j) != 1 || j[0].Outcome == nil || j[0].Outcome.Result != ledger.ResultDone {
		t.Fatalf("journal after recovery: %+v, %v", j, err)
	}
	if s := stateOf(t, b.st, sbKey("sb-0")); s != string(backend.StateSuspended) {
		t.Errorf("sb-0 is %s after the recovery, want suspended", s)
	}
	// Nothing is left to do, and nothing is paused twice.
	p, w, err = b.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Apply(ctx, p, engine.ApplyOptions{World: w}); err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 0 || fake.Calls("POST /sandboxes/{sandboxID}/pause") != 1 {
		t.Errorf("after recovery: %d actions planned, %d pauses", len(p.Actions), fake.Calls("POST /sandboxes/{sandboxID}/pause"))
	}
}

func deleteRequest(t *testing.T, eng *engine.Engine, k backend.Key) (*plan.Plan, *engine.World) {
	t.Helper()
	p, w, err := eng.Plan(t.Context(), engine.PlanOptions{Requests: []policy.Request{{Key: k, Step: backend.StepDelete}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 1 || p.Actions[0].Step != backend.StepDelete {
		t.Fatalf("plan: %+v", p.Actions)
	}
	return p, w
}

func noticesOf(t *testing.T, st ledger.Store, k backend.Key, kind string) int {
	t.Helper()
	ns, err := st.ListNotices(t.Context(), ledger.NoticeFilter{Key: k})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, x := range ns {
		if x.Kind == kind {
			n++
		}
	}
	return n
}

// TestFencedFailureNotice: a removal whose provider call fails after the
// lease was taken over leaves no "failed" notice (and is not reported as
// failed, so nothing announces it); the valid term's failure is recorded.
func TestFencedFailureNotice(t *testing.T) {
	url := pgtest.NewDatabase(t)
	fake := fakes.NewE2B(t, "key", time.Now)
	for _, id := range []string{"sb-0", "sb-1"} { // paused: a request may remove them
		fake.Add(fakes.E2BSandbox{ID: id, Metadata: map[string]string{"fleet": "t"}, State: "paused", StartedAt: time.Now(), EndAt: time.Now().Add(48 * time.Hour)})
	}
	a, b, take := staleAndNew(t, url, []engine.Source{e2bSource(t, fake)}, []engine.Source{e2bSource(t, fake)})
	ctx := t.Context()
	refuse := func(steal bool, errs *[]error) {
		fake.Intercept(func(op string, _ *http.Request) *fakes.Answer {
			if op != "DELETE /sandboxes/{sandboxID}" {
				return nil
			}
			if steal {
				*errs = append(*errs, take())
			}
			return &fakes.Answer{Status: http.StatusForbidden, Header: http.Header{"Content-Type": {"application/json"}},
				Body: []byte(`{"code":403,"message":"not allowed"}`)}
		})
	}

	p, w := deleteRequest(t, a.eng, sbKey("sb-0"))
	var errs []error
	refuse(true, &errs)
	res, err := a.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
	if err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	if r := res.Results[0]; r.Outcome != plan.Pending || r.Code != plan.Stopped {
		t.Errorf("the stale leader's failed delete: %s %s %s (want pending, stopped: its failure is not recorded)", r.Outcome, r.Code, r.Reason)
	}
	wasFenced(t, a)
	if n := noticesOf(t, b.st, sbKey("sb-0"), "failed"); n != 0 {
		t.Errorf("%d failed notices written by the stale leader", n)
	}
	if u, _ := b.st.Unfinished(ctx); len(u) != 1 {
		t.Errorf("unfinished: %+v, want the stale leader's delete", u)
	}

	// The valid term's failure is recorded, with its notice.
	p, w = deleteRequest(t, b.eng, sbKey("sb-1"))
	refuse(false, nil)
	res, err = b.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
	fake.Intercept(nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Outcome != plan.Failed {
		t.Errorf("the new leader's failed delete: %s %s %s", r.Outcome, r.Code, r.Reason)
	}
	if n := noticesOf(t, b.st, sbKey("sb-1"), "failed"); n != 1 {
		t.Errorf("%d failed notices of the new leader's failed delete, want 1", n)
	}
	j, err := b.st.ListJournal(ctx, ledger.JournalFilter{Key: sbKey("sb-1")})
	if err != nil || len(j) != 1 || j[0].Outcome == nil || j[0].Outcome.Result != ledger.ResultFailed {
		t.Errorf("journal of sb-1: %+v, %v", j, err)
	}
}

// TestFencedArchiveRecord: a Cloudflare sandbox archived by idle_archive
// by a leader whose lease was taken over while it persisted the
// workspace: the archive is not recorded and the sandbox not destroyed
// (nor any other acted on); the valid term records and destroys.
func TestFencedArchiveRecord(t *testing.T) {
	url := pgtest.NewDatabase(t)
	f := fakes.NewCloudflare(t, "bridge-key", "api-token", "acct", time.Now)
	started := time.Now().Add(-time.Hour)
	for _, name := range []string{"cf-0", "cf-1"} {
		f.Add(fakes.CloudflareSandbox{Name: name, Awake: true, Files: map[string]string{"main.go": "package main\n"}, StartedAt: started, StateAt: started})
	}
	source := func() engine.Source {
		// Idle for an hour, past idle_suspend: archived (Cloudflare cannot
		// suspend), announced with no grace, so the next pass acts.
		return engine.Source{Name: "cloudflare", Kind: "cloudflare", Shared: true, Settings: policy.Settings{IdleSuspend: 30 * time.Minute},
			Backend: &cloudflare.Backend{
				Bridge: fakes.Client(t, f.BridgeURL, remote.BearerAuth(remote.NewSecret("bridge-key"))), Key: remote.NewSecret("bridge-key"),
				Names: func(context.Context) ([]string, error) { return []string{"cf-0", "cf-1"}, nil },
				Containers: &cloudflare.Containers{Client: fakes.Client(t, f.APIURL, remote.BearerAuth(remote.NewSecret("api-token"))),
					AccountID: "acct", Application: "sandbox"}}}
	}
	a, b, take := staleAndNew(t, url, []engine.Source{source()}, []engine.Source{source()})
	ctx := t.Context()
	key := func(id string) backend.Key {
		return backend.Key{Source: "cloudflare", Backend: cloudflare.Name, ID: id}
	}
	pass := func(r *replica) (*plan.Plan, *plan.Applied) {
		t.Helper()
		p, w, err := r.eng.Plan(ctx, engine.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
		if err != nil {
			t.Fatal(err)
		}
		return p, res
	}
	if p, _ := pass(a); len(p.Scheduled) != 2 || len(p.Actions) != 0 {
		t.Fatalf("the first pass: %d announced, %d actions", len(p.Scheduled), len(p.Actions))
	}
	var takeErr error
	f.Bridge().Intercept(func(op string, _ *http.Request) *fakes.Answer {
		if strings.HasSuffix(op, "/persist") {
			takeErr = take()
		}
		return nil
	})
	p, res := pass(a)
	f.Bridge().Intercept(nil)
	if takeErr != nil {
		t.Fatal(takeErr)
	}
	if len(p.Actions) != 2 || p.Actions[0].Step != backend.StepArchive {
		t.Fatalf("the stale leader's plan: %+v", p.Actions)
	}
	for _, r := range res.Results {
		if r.Outcome != plan.Pending || r.Code != plan.Stopped || r.ArchiveID != "" {
			t.Errorf("the stale leader's archive of %s: %s %s %s %q", r.Runtime, r.Outcome, r.Code, r.Reason, r.ArchiveID)
		}
	}
	wasFenced(t, a)
	for _, id := range []string{"cf-0", "cf-1"} {
		if as, err := b.st.ListArchives(ctx, key(id)); err != nil || len(as) != 0 {
			t.Errorf("archives of %s recorded by the stale leader: %+v, %v", id, as, err)
		}
		if f.Destroyed(id) {
			t.Errorf("the stale leader destroyed %s", id)
		}
	}

	_, res = pass(b)
	for _, r := range res.Results {
		as, err := b.st.ListArchives(ctx, key(r.Runtime))
		if r.Outcome != plan.Done || err != nil || len(as) != 1 || as[0].ID != r.ArchiveID || !f.Destroyed(r.Runtime) {
			t.Errorf("the new leader's archive of %s: %s %s; recorded %+v, %v; destroyed %v", r.Runtime, r.Outcome, r.Reason, as, err, f.Destroyed(r.Runtime))
		}
	}
	if len(res.Results) != 2 {
		t.Errorf("the new leader archived %d sandboxes, want 2", len(res.Results))
	}
}

// TestFencedAnnouncements: the notices a leader schedules after its lease
// was taken over (between its plan and its apply) are refused, and its
// apply gives none to announce (a webhook of a notice nobody recorded
// would be sent again by the next leader, which schedules it); the new
// leader's are recorded once and given to announce.
func TestFencedAnnouncements(t *testing.T) {
	url := pgtest.NewDatabase(t)
	fake := fakes.NewE2B(t, "key", time.Now)
	for _, id := range []string{"sb-0", "sb-1"} {
		fake.Add(fakes.E2BSandbox{ID: id, Metadata: map[string]string{"fleet": "t"}, State: "paused",
			StartedAt: time.Now().Add(-2 * time.Hour), EndAt: time.Now().Add(48 * time.Hour)})
	}
	// Past their retention: a delete announced a day ahead.
	source := func() engine.Source {
		s := e2bSource(t, fake)
		s.Settings = policy.Settings{Retention: time.Hour, Grace: 24 * time.Hour}
		return s
	}
	a, b, take := staleAndNew(t, url, []engine.Source{source()}, []engine.Source{source()})
	ctx := t.Context()
	plans := func(r *replica) (*plan.Plan, *engine.World) {
		t.Helper()
		p, w, err := r.eng.Plan(ctx, engine.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Scheduled) != 2 {
			t.Fatalf("%d notices scheduled, want 2: %+v", len(p.Scheduled), p)
		}
		return p, w
	}
	p, w := plans(a)
	if err := take(); err != nil {
		t.Fatal(err)
	}
	res, err := a.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Announced) != 0 {
		t.Errorf("the stale leader gave %d notices to announce", len(res.Announced))
	}
	if !strings.Contains(strings.Join(res.Messages, "\n"), ledger.ErrFenced.Error()) {
		t.Errorf("the stale leader's messages do not say its notices were refused: %q", res.Messages)
	}
	for _, id := range []string{"sb-0", "sb-1"} {
		if n := noticesOf(t, b.st, sbKey(id), "scheduled"); n != 0 {
			t.Errorf("%s: %d scheduled notices written by the stale leader", id, n)
		}
	}
	p, w = plans(b)
	if res, err = b.eng.Apply(ctx, p, engine.ApplyOptions{World: w}); err != nil {
		t.Fatal(err)
	}
	if len(res.Announced) != 2 {
		t.Fatalf("the new leader gave %d notices to announce, want 2", len(res.Announced))
	}
	for _, id := range []string{"sb-0", "sb-1"} {
		if n := noticesOf(t, b.st, sbKey(id), "scheduled"); n != 1 {
			t.Errorf("%s: %d scheduled notices, want 1", id, n)
		}
	}
}
