package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// replicaOf is one fleet replica's engine over a shared E2B source, with
// its own elector on the shared PostgreSQL ledger.
func replicaOf(t *testing.T, url string, fake *fakes.E2B, name string) (*engine.Engine, *leader.Elector, context.CancelFunc) {
	t.Helper()
	st, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	el, err := leader.New(leader.Config{Lessor: st, Lease: "remote", Replica: name, TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); el.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	client := fakes.Client(t, fake.URL, remote.HeaderAuth("X-API-Key", remote.NewSecret("key")))
	src := engine.Source{Name: "sandboxes", Kind: "e2b", Shared: true, Settings: policy.Settings{IdleSuspend: time.Hour},
		Backend: &e2b.Backend{Client: client, Metadata: map[string]string{"fleet": "t"}}}
	eng, err := engine.New(engine.Options{Ledger: st, Locker: st, Fencer: st, Lead: el.Term, Sources: []engine.Source{src},
		StateDir: filepath.Join(t.TempDir(), "state")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng, el, func() { cancel(); <-done }
}

func waitLeading(t *testing.T, el *leader.Elector) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := el.Term(); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no term within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSharedSourcesFollowTheLeader: a follower neither lists nor acts on
// a shared source; a plan made while leading and applied after the term
// ended calls the provider for nothing and journals nothing.
func TestSharedSourcesFollowTheLeader(t *testing.T) {
	url := pgtest.NewDatabase(t)
	fake := fakes.NewE2B(t, "key", time.Now)
	for i := range 5 {
		fake.Add(fakes.E2BSandbox{ID: fmt.Sprintf("sb-%d", i), Metadata: map[string]string{"fleet": "t"},
			StartedAt: time.Now().Add(-2 * time.Hour), EndAt: time.Now().Add(time.Hour)})
	}
	a, elA, stopA := replicaOf(t, url, fake, "a")
	waitLeading(t, elA)
	b, elB, _ := replicaOf(t, url, fake, "b")

	// b follows: it plans nothing of the shared source and lists nothing.
	fake.ResetCalls()
	p, w, err := b.Plan(t.Context(), engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 0 || len(w.Runtimes) != 0 || fake.Total() != 0 {
		t.Fatalf("a follower planned %d actions over %d runtimes with %d provider calls", len(p.Actions), len(w.Runtimes), fake.Total())
	}

	// a leads: it plans a suspend of each idle sandbox...
	p, w, err = a.Plan(t.Context(), engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 5 || p.Actions[0].Step != backend.StepSuspend {
		t.Fatalf("the leader's plan: %+v", p.Actions)
	}
	// ... and loses the lead before applying it: b takes over.
	stopA()
	waitLeading(t, elB)
	fake.ResetCalls()
	res, err := a.Apply(t.Context(), p, engine.ApplyOptions{World: w})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Results {
		if r.Outcome != plan.Pending || r.Code != plan.Stopped {
			t.Errorf("%s of %s by the old leader: %s %s %s", r.Step, r.Runtime, r.Outcome, r.Code, r.Reason)
		}
	}
	if n := fake.Total(); n != 0 {
		t.Errorf("the old leader made %d provider calls", n)
	}
	st, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if j, err := st.ListJournal(t.Context(), ledger.JournalFilter{}); err != nil || len(j) != 0 {
		t.Errorf("journal after the old leader's apply: %d entries, %v", len(j), err)
	}
	// A write fenced by the old generation is refused.
	term, _ := elB.Term()
	stale := term.Fence()
	stale.Generation--
	err = st.Fenced(t.Context(), stale, func(ctx context.Context, s ledger.Store) error { return nil })
	if err == nil {
		t.Error("a write under the old generation committed")
	}
	// The new leader pauses them, each once.
	p, w, err = b.Plan(t.Context(), engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err = b.Apply(t.Context(), p, engine.ApplyOptions{World: w})
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, r := range res.Results {
		if r.Outcome == plan.Done {
			done++
		}
	}
	if done != 5 || fake.Calls("POST /sandboxes/{sandboxID}/pause") != 5 {
		t.Errorf("the new leader: %d done, %d pauses", done, fake.Calls("POST /sandboxes/{sandboxID}/pause"))
	}
}
