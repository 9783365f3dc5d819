package ledgertest

import (
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

func lastActivity(t *testing.T, s ledger.Store, k ledger.Key) time.Time {
	t.Helper()
	got, err := s.LastActivity(ctx(t), k)
	mustNil(t, "LastActivity "+k.String(), err)
	if got.Location() != time.UTC {
		t.Fatalf("LastActivity %s in %v, want UTC", k, got.Location())
	}
	return got
}

func testActivityKeepsNewest(t *testing.T, s ledger.Store) {
	k1, k2 := key("worktree", "repo/a"), key("docker", "never-observed")

	_, err := s.LastActivity(ctx(t), k1)
	mustBe(t, "LastActivity before any report", err, ledger.ErrNotFound)

	// Within one batch the newest wins, wherever it stands.
	mustNil(t, "RecordActivity", s.RecordActivity(ctx(t), []ledger.Activity{
		{Key: k1, At: at(2 * time.Minute)},
		{Key: k1, At: at(time.Minute).In(elsewhere)},
		{Key: k2, At: t0},
	}))
	mustEqual(t, "k1", lastActivity(t, s, k1), at(2*time.Minute))
	mustEqual(t, "k2", lastActivity(t, s, k2), t0)

	// A late report never moves activity back; a repeated one changes nothing.
	mustNil(t, "older report", s.RecordActivity(ctx(t), []ledger.Activity{{Key: k1, At: t0}}))
	mustNil(t, "same report", s.RecordActivity(ctx(t), []ledger.Activity{{Key: k1, At: at(2 * time.Minute)}}))
	mustEqual(t, "k1 after older", lastActivity(t, s, k1), at(2*time.Minute))

	mustNil(t, "newer report", s.RecordActivity(ctx(t), []ledger.Activity{{Key: k1, At: at(3*time.Minute + 1)}}))
	mustEqual(t, "k1 after newer", lastActivity(t, s, k1), at(3*time.Minute+1))

	all, err := s.ActivityTimes(ctx(t))
	mustNil(t, "ActivityTimes", err)
	mustEqual(t, "ActivityTimes", all, map[ledger.Key]time.Time{k1: at(3*time.Minute + 1), k2: t0})

	// Activity is its own record: reporting it creates no runtime.
	if keys := listKeys(t, s, ledger.RuntimeFilter{}); len(keys) != 0 {
		t.Fatalf("activity created runtimes %v", keys)
	}
	mustNil(t, "empty batch", s.RecordActivity(ctx(t), nil))
}

func testActivityBatchIsAtomic(t *testing.T, s ledger.Store) {
	k := key("dir", "run-1")
	mustNil(t, "RecordActivity", s.RecordActivity(ctx(t), []ledger.Activity{{Key: k, At: t0}}))

	err := s.RecordActivity(ctx(t), []ledger.Activity{
		{Key: k, At: at(time.Hour)},
		{Key: key("dir", "run-2")}, // zero time
	})
	mustFail(t, "batch with a zero time", err)
	all, err := s.ActivityTimes(ctx(t))
	mustNil(t, "ActivityTimes", err)
	mustEqual(t, "after failed batch", all, map[ledger.Key]time.Time{k: t0})
}
