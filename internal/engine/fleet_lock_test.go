package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/rundir"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// host is one replica of a fleet: its own state folder and ledger
// connection, the runtime lock of the shared PostgreSQL ledger.
type host struct {
	store *postgres.Store
	eng   *engine.Engine
}

func newHost(t *testing.T, url, runs string) host {
	t.Helper()
	store, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	eng, err := engine.New(engine.Options{Ledger: store, Locker: store, StateDir: t.TempDir(),
		ArchiveDir: filepath.Join(t.TempDir(), "archives"),
		Sources:    []engine.Source{{Name: "dirs[0]", Backend: &rundir.Backend{Root: runs}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return host{store: store, eng: eng}
}

func planDelete(t *testing.T, eng *engine.Engine, k backend.Key) *plan.Plan {
	t.Helper()
	p, _, err := eng.Plan(t.Context(), engine.PlanOptions{Requests: []policy.Request{{Key: k, Step: backend.StepDelete}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 1 || p.Actions[0].Step != backend.StepDelete {
		t.Fatalf("plan: %+v", p.Actions)
	}
	return p
}

// TestFleetLockKeepsAHoldAndAPassApart: with the PostgreSQL ledger, the
// runtime lock excludes replicas on other hosts (other state folders, other
// connections): a pass skips a runtime another replica is writing a hold
// on, and a hold taken under the lock while passes remove runtimes is
// either seen by the pass (runtime kept) or sees the runtime gone (no
// hold): never a hold on a removed runtime.
func TestFleetLockKeepsAHoldAndAPassApart(t *testing.T) {
	url := pgtest.NewDatabase(t)
	runs := t.TempDir()
	const n = 8
	for i := range n {
		if err := os.MkdirAll(filepath.Join(runs, fmt.Sprintf("r%02d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	owner, api := newHost(t, url, runs), newHost(t, url, runs)

	// The replica serving the API holds r00's lock: the owner's pass skips.
	k0 := backend.Key{Source: "dirs[0]", Backend: "dir", ID: "r00"}
	p := planDelete(t, owner.eng, k0)
	unlock, err := api.eng.LockRuntime(t.Context(), k0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := owner.eng.Apply(t.Context(), p, engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Outcome != plan.Skip || !strings.Contains(r.Reason, "acting on it") {
		t.Fatalf("apply while another host holds the lock: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(runs, "r00")); err != nil {
		t.Fatalf("r00 was touched while locked: %v", err)
	}
	unlock()

	// Each runtime at once: the owner applies a delete, the API replica
	// takes a hold the way the server does (lock, re-read, hold).
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		k := backend.Key{Source: "dirs[0]", Backend: "dir", ID: fmt.Sprintf("r%02d", i)}
		p := planDelete(t, owner.eng, k)
		wg.Go(func() {
			if _, err := owner.eng.Apply(t.Context(), p, engine.ApplyOptions{}); err != nil {
				t.Errorf("apply %s: %v", k, err)
			}
		})
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			unlock, err := api.eng.LockRuntime(ctx, k)
			if err != nil {
				t.Errorf("lock %s: %v", k, err)
				return
			}
			defer unlock()
			lk := k
			rec, err := api.store.Runtime(ctx, lk)
			if err != nil || !backend.State(rec.State).Present() {
				return // gone, or not yet seen: the server refuses the hold
			}
			if _, err := api.store.TakeHold(ctx, ledger.HoldRequest{Key: lk, Holder: "agent", TTL: time.Hour, Now: time.Now()}); err != nil {
				t.Errorf("hold %s: %v", k, err)
			}
		})
	}
	wg.Wait()
	kept, removed := 0, 0
	for i := 1; i < n; i++ {
		lk := ledger.Key{Source: "dirs[0]", Backend: "dir", ID: fmt.Sprintf("r%02d", i)}
		holds, err := owner.store.ListHolds(t.Context(), ledger.HoldFilter{Key: lk, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		_, statErr := os.Stat(filepath.Join(runs, lk.ID))
		switch {
		case len(holds) > 0 && errors.Is(statErr, os.ErrNotExist):
			t.Errorf("%s: removed although a hold was written on it", lk)
		case len(holds) > 0:
			kept++
		case errors.Is(statErr, os.ErrNotExist):
			removed++
		}
	}
	t.Logf("of %d runtimes raced: %d held and kept, %d removed", n-1, kept, removed)
}
