package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// testInvalidInput checks that each write refuses bad input and leaves no
// trace of it.
func testInvalidInput(t *testing.T, s ledger.Store) {
	k := key("dir", "run-1")
	observe(t, s, ledger.Observation{Key: k, State: "idle", At: t0})
	c := ctx(t)
	cases := []struct {
		name string
		err  error
	}{
		{"Observe empty backend", s.Observe(c, []ledger.Observation{{Key: key("", "x"), At: t0}})},
		{"Observe zero time", s.Observe(c, []ledger.Observation{{Key: key("dir", "x")}})},
		{"RecordActivity empty id", s.RecordActivity(c, []ledger.Activity{{Key: key("dir", ""), At: t0}})},
		{"TakeHold zero ttl", errOf(s.TakeHold(c, ledger.HoldRequest{Key: k, Holder: "h", Now: t0}))},
		{"TakeHold negative ttl", errOf(s.TakeHold(c, ledger.HoldRequest{Key: k, Holder: "h", TTL: -time.Second, Now: t0}))},
		{"TakeHold empty holder", errOf(s.TakeHold(c, ledger.HoldRequest{Key: k, TTL: time.Minute, Now: t0}))},
		{"TakeHold zero time", errOf(s.TakeHold(c, ledger.HoldRequest{Key: k, Holder: "h", TTL: time.Minute}))},
		{"RenewHold zero ttl", errOf(s.RenewHold(c, ledger.HoldRenewal{Key: k, ID: "x", Now: t0}))},
		{"ListHolds zero time", errOf(s.ListHolds(c, ledger.HoldFilter{Key: k}))},
		{"RecordArchive empty id", s.RecordArchive(c, ledger.Archive{Key: k, CreatedAt: t0})},
		{"RecordArchive bad manifest", s.RecordArchive(c, ledger.Archive{ID: "a", Key: k, CreatedAt: t0, Manifest: json.RawMessage(`{"x":`)})},
		{"RecordNotice empty kind", errOf(s.RecordNotice(c, ledger.Notice{Key: k, At: t0}))},
		{"RecordNotice negative bytes", errOf(s.RecordNotice(c, ledger.Notice{Key: k, Kind: "archived", At: t0, FreedBytes: -1}))},
		{"AppendIntent empty step", errOf(s.AppendIntent(c, ledger.Intent{Key: k, At: t0}))},
		{"AppendIntent zero time", errOf(s.AppendIntent(c, ledger.Intent{Key: k, Step: "caches"}))},
	}
	for _, tc := range cases {
		mustFail(t, tc.name, tc.err)
	}

	id, err := s.AppendIntent(c, ledger.Intent{Key: k, Step: "caches", At: t0})
	mustNil(t, "AppendIntent", err)
	mustFail(t, "RecordOutcome unknown result", s.RecordOutcome(c, id, ledger.Outcome{Result: "maybe", At: t0}))
	mustFail(t, "RecordOutcome zero time", s.RecordOutcome(c, id, ledger.Outcome{Result: ledger.ResultDone}))

	// Nothing of the refused writes is visible.
	mustEqual(t, "runtimes", listKeys(t, s, ledger.RuntimeFilter{}), []ledger.Key{k})
	acts, err := s.ActivityTimes(c)
	mustNil(t, "ActivityTimes", err)
	mustEqual(t, "activity", len(acts), 0)
	mustEqual(t, "holds", listHolds(t, s, ledger.Key{}, t0), []ledger.Hold{})
	archives, err := s.ListArchives(c, ledger.Key{})
	mustNil(t, "ListArchives", err)
	mustEqual(t, "archives", len(archives), 0)
	notices, err := s.ListNotices(c, ledger.NoticeFilter{})
	mustNil(t, "ListNotices", err)
	mustEqual(t, "notices", len(notices), 0)
	mustEqual(t, "journal", len(listJournal(t, s, ledger.JournalFilter{})), 1)
	mustEqual(t, "still unfinished", len(unfinished(t, s)), 1)
}

func errOf[T any](_ T, err error) error { return err }

func testCanceledContext(t *testing.T, s ledger.Store) {
	k := key("dir", "run-1")
	observe(t, s, ledger.Observation{Key: k, State: "idle", At: t0})
	c, cancel := context.WithCancel(ctx(t))
	cancel()

	cases := []struct {
		name string
		err  error
	}{
		{"Observe", s.Observe(c, []ledger.Observation{{Key: k, State: "running", At: at(time.Hour)}})},
		{"RecordActivity", s.RecordActivity(c, []ledger.Activity{{Key: k, At: t0}})},
		{"Update", errOf(s.Update(c, k, func(r *ledger.RuntimeRecord) error { r.Pinned = true; return nil }))},
		{"TakeHold", errOf(s.TakeHold(c, ledger.HoldRequest{Key: k, Holder: "h", TTL: time.Minute, Now: t0}))},
		{"AppendIntent", errOf(s.AppendIntent(c, ledger.Intent{Key: k, Step: "caches", At: t0}))},
		{"Runtime", errOf(s.Runtime(c, k))},
		{"ListRuntimes", errOf(s.ListRuntimes(c, ledger.RuntimeFilter{}))},
		{"ActivityTimes", errOf(s.ActivityTimes(c))},
		{"Unfinished", errOf(s.Unfinished(c))},
	}
	for _, tc := range cases {
		if !errors.Is(tc.err, context.Canceled) {
			t.Errorf("%s with a canceled context: error %v, want context.Canceled", tc.name, tc.err)
		}
	}
	got := getRuntime(t, s, k)
	if got.State != "idle" || got.Pinned {
		t.Fatalf("a canceled write took effect: %+v", got)
	}
}

func testCloseTwice(t *testing.T, s ledger.Store) {
	mustNil(t, "Close", s.Close())
	mustNil(t, "Close again", s.Close())
}

// testTimesOutOfRange checks that a time a store cannot keep is refused on
// write, never wrapped, and that reads with such a time still answer right.
func testTimesOutOfRange(t *testing.T, s ledger.Store) {
	k := key("dir", "run-1")
	observe(t, s, ledger.Observation{Key: k, State: "idle", At: t0})
	before := getRuntime(t, s, k)
	forever := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	ancient := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)

	_, err := s.Update(ctx(t), k, func(r *ledger.RuntimeRecord) error { r.LeaseUntil = forever; return nil })
	mustFail(t, "Update with a lease in year 9999", err)
	mustEqual(t, "after refused lease", getRuntime(t, s, k), before)

	// The edges themselves are kept exactly.
	edge, err := s.Update(ctx(t), k, func(r *ledger.RuntimeRecord) error {
		r.LeaseUntil, r.ScheduledAt = ledger.MaxTime, ledger.MinTime
		return nil
	})
	mustNil(t, "Update with the edge times", err)
	if !edge.LeaseUntil.Equal(ledger.MaxTime) || !edge.ScheduledAt.Equal(ledger.MinTime) {
		t.Fatalf("edge times read back as %v and %v", edge.LeaseUntil, edge.ScheduledAt)
	}

	mustFail(t, "Observe in year 9999", s.Observe(ctx(t), []ledger.Observation{{Key: k, At: forever}}))
	mustFail(t, "RecordActivity in year 1000", s.RecordActivity(ctx(t), []ledger.Activity{{Key: k, At: ancient}}))
	mustFail(t, "TakeHold expiring after MaxTime",
		errOf(s.TakeHold(ctx(t), ledger.HoldRequest{Key: k, Holder: "h", TTL: 100 * 365 * 24 * time.Hour, Now: ledger.MaxTime.AddDate(-50, 0, 0)})))
	mustFail(t, "AppendIntent in year 9999", errOf(s.AppendIntent(ctx(t), ledger.Intent{Key: k, Step: "caches", At: forever})))
	mustFail(t, "RecordNotice due in year 9999",
		errOf(s.RecordNotice(ctx(t), ledger.Notice{Key: k, Kind: "scheduled", Due: forever, At: t0})))

	h := takeHold(t, s, k, "h", time.Hour, t0)
	notice, err := s.RecordNotice(ctx(t), ledger.Notice{Key: k, Kind: "scheduled", At: t0})
	mustNil(t, "RecordNotice", err)
	mustEqual(t, "holds active in year 1000", listHolds(t, s, k, ancient), []ledger.Hold{h})
	mustEqual(t, "holds active in year 9999", listHolds(t, s, k, forever), []ledger.Hold{})
	ns, err := s.ListNotices(ctx(t), ledger.NoticeFilter{Since: ancient})
	mustNil(t, "ListNotices since year 1000", err)
	if len(ns) != 1 || ns[0].ID != notice {
		t.Fatalf("notices since year 1000: %+v, want notice %d", ns, notice)
	}
	n, err := s.PruneHolds(ctx(t), forever)
	mustNil(t, "PruneHolds in year 9999", err)
	if n != 1 {
		t.Fatalf("PruneHolds in year 9999 removed %d, want 1", n)
	}
}
