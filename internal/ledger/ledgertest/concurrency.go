package ledgertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

const (
	workers    = 16
	perWorker  = 25
	sharedName = "shared"
)

// inParallel runs fn(w) for w in [0, n) at once and waits for all of them.
func inParallel(n int, fn func(w int)) {
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() { fn(w) })
	}
	wg.Wait()
}

// testConcurrentWriters has many goroutines write every kind of record at
// once, then checks that nothing was lost.
func testConcurrentWriters(t *testing.T, s ledger.Store) {
	c := ctx(t)
	shared := key("dir", sharedName)
	holdIDs := make([][]string, workers)
	inParallel(workers, func(w int) {
		for i := range perWorker {
			own := key("dir", fmt.Sprintf("w%02d-%03d", w, i))
			if err := s.Observe(c, []ledger.Observation{{Key: own, State: "idle", SizeBytes: int64(i), At: t0}}); err != nil {
				t.Errorf("Observe: %v", err)
				return
			}
			// Every worker reports on the shared runtime; the newest report
			// anywhere must win.
			err := s.RecordActivity(c, []ledger.Activity{
				{Key: own, At: at(time.Duration(i) * time.Second)},
				{Key: shared, At: at(time.Duration(w*perWorker+i) * time.Millisecond)},
			})
			if err != nil {
				t.Errorf("RecordActivity: %v", err)
				return
			}
			h, err := s.TakeHold(c, ledger.HoldRequest{Key: shared, Holder: own.ID, TTL: time.Hour, Now: t0})
			if err != nil {
				t.Errorf("TakeHold: %v", err)
				return
			}
			holdIDs[w] = append(holdIDs[w], h.ID)
			id, err := s.AppendIntent(c, ledger.Intent{PlanID: "p", Key: own, Step: "caches", At: t0})
			if err != nil {
				t.Errorf("AppendIntent: %v", err)
				return
			}
			// Leave every third entry unfinished, as a crash would.
			if i%3 != 0 {
				if err := s.RecordOutcome(c, id, ledger.Outcome{Result: ledger.ResultDone, FreedBytes: 1, At: t0}); err != nil {
					t.Errorf("RecordOutcome: %v", err)
					return
				}
			}
		}
	})
	if t.Failed() {
		return
	}

	total := workers * perWorker
	if n := len(listKeys(t, s, ledger.RuntimeFilter{})); n != total {
		t.Errorf("runtimes: %d, want %d", n, total)
	}
	acts, err := s.ActivityTimes(c)
	mustNil(t, "ActivityTimes", err)
	if len(acts) != total+1 {
		t.Errorf("activity for %d runtimes, want %d", len(acts), total+1)
	}
	if want := at(time.Duration(total-1) * time.Millisecond); !acts[shared].Equal(want) {
		t.Errorf("shared activity %v, want the newest report %v", acts[shared], want)
	}
	holds := listHolds(t, s, shared, t0)
	seen := map[string]bool{}
	for _, h := range holds {
		seen[h.ID] = true
	}
	for _, ids := range holdIDs {
		for _, id := range ids {
			if !seen[id] {
				t.Errorf("hold %s was taken but is not listed", id)
			}
		}
	}
	if len(holds) != total || len(seen) != total {
		t.Errorf("holds: %d listed, %d distinct, want %d", len(holds), len(seen), total)
	}
	if n := len(listJournal(t, s, ledger.JournalFilter{PlanID: "p"})); n != total {
		t.Errorf("journal entries: %d, want %d", n, total)
	}
	wantUnfinished := workers * ((perWorker + 2) / 3)
	if n := len(unfinished(t, s)); n != wantUnfinished {
		t.Errorf("unfinished entries: %d, want %d", n, wantUnfinished)
	}
}

// testConcurrentUpdates checks that Update is a real read-modify-write: no
// two updates read the same version and overwrite each other.
func testConcurrentUpdates(t *testing.T, s ledger.Store) {
	k := key("worktree", "repo/hot")
	observe(t, s, ledger.Observation{Key: k, State: "idle", At: t0})
	inParallel(workers, func(w int) {
		for range perWorker {
			_, err := s.Update(ctx(t), k, func(r *ledger.RuntimeRecord) error {
				var d time.Duration
				if r.RetentionOverride != nil {
					d = *r.RetentionOverride
				}
				d += time.Hour
				r.RetentionOverride = &d
				r.Pinned, r.PinReason = true, fmt.Sprintf("worker %d", w)
				return nil
			})
			if err != nil {
				t.Errorf("Update: %v", err)
				return
			}
			// Observations interleave with updates and must not undo them.
			if err := s.Observe(ctx(t), []ledger.Observation{{Key: k, State: "idle", At: t0}}); err != nil {
				t.Errorf("Observe: %v", err)
				return
			}
		}
	})
	if t.Failed() {
		return
	}
	got := getRuntime(t, s, k)
	if want := time.Duration(workers*perWorker) * time.Hour; got.RetentionOverride == nil || *got.RetentionOverride != want {
		t.Fatalf("RetentionOverride = %v, want %v: updates were lost", got.RetentionOverride, want)
	}
	if !got.Pinned {
		t.Fatal("an observation undid the pin")
	}
}

// testReadersDuringWrites reads while others write: every read succeeds and
// sees whole batches only.
func testReadersDuringWrites(t *testing.T, s ledger.Store) {
	const batch = 50
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				rs, err := s.ListRuntimes(ctx(t), ledger.RuntimeFilter{Backend: "dir"})
				if err != nil {
					t.Errorf("ListRuntimes: %v", err)
					return
				}
				if len(rs)%batch != 0 {
					t.Errorf("read %d runtimes: saw part of a batch of %d", len(rs), batch)
					return
				}
				if _, err := s.ActivityTimes(ctx(t)); err != nil {
					t.Errorf("ActivityTimes: %v", err)
					return
				}
			}
		})
	}
	inParallel(4, func(w int) {
		for i := range 10 {
			var obs []ledger.Observation
			var acts []ledger.Activity
			for j := range batch {
				k := key("dir", fmt.Sprintf("%d-%d-%d", w, i, j))
				obs = append(obs, ledger.Observation{Key: k, State: "idle", At: t0})
				acts = append(acts, ledger.Activity{Key: k, At: t0})
			}
			if err := s.Observe(ctx(t), obs); err != nil {
				t.Errorf("Observe: %v", err)
				return
			}
			if err := s.RecordActivity(ctx(t), acts); err != nil {
				t.Errorf("RecordActivity: %v", err)
				return
			}
		}
	})
	close(stop)
	wg.Wait()
	if n := len(listKeys(t, s, ledger.RuntimeFilter{})); n != 4*10*batch {
		t.Fatalf("runtimes: %d, want %d", n, 4*10*batch)
	}
}
