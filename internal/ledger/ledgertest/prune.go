package ledgertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// testPruneJournal: PruneJournal deletes the entries finished before the
// bound (more than one batch of them) and the notices recorded before it
// with their delivery rows, and keeps unfinished entries of any age,
// entries finished at or after the bound, newer notices and their
// deliveries, archives and runtime records; it counts what it deleted, a
// second prune deletes nothing, and IDs are never reused after it.
func testPruneJournal(t *testing.T, s ledger.Store) {
	k := key("dir", "run-1")
	cut := at(30 * 24 * time.Hour)
	observe(t, s, ledger.Observation{Key: k, State: "stopped", At: t0})
	archive := ledger.Archive{ID: "a-old", Key: k, CreatedAt: t0, Location: "/archives/a-old", Formats: []string{"tar.zst"}}
	mustNil(t, "RecordArchive", s.RecordArchive(ctx(t), archive))

	finish := func(e ledger.JournalEntry, out ledger.Outcome) ledger.JournalEntry {
		t.Helper()
		mustNil(t, "RecordOutcome", s.RecordOutcome(ctx(t), e.ID, out))
		out.At = out.At.UTC()
		e.Outcome = &out
		return e
	}
	intent := func(step string, d time.Duration) ledger.JournalEntry {
		t.Helper()
		return appendIntent(t, s, ledger.Intent{Key: k, Step: step, Reason: "test", At: at(d)})
	}
	// Old and finished: more than a batch, so the prune takes several.
	var oldest int64
	for i := range ledger.PruneBatch + 2 {
		e := intent("caches", time.Duration(i)*time.Second)
		finish(e, ledger.Outcome{Result: ledger.ResultDone, At: at(time.Duration(i)*time.Second + time.Minute)})
		oldest = max(oldest, e.ID)
	}
	// Old but unfinished: what a crash left, recovery's to finish.
	crashed := intent("delete", time.Hour)
	// Begun long ago, finished only at the bound or after: kept.
	lateAtBound := finish(intent("archive", 2*time.Hour), ledger.Outcome{Result: ledger.ResultFailed, Reason: "x", At: cut})
	late := finish(intent("archive", 3*time.Hour), ledger.Outcome{Result: ledger.ResultDone, At: cut.Add(time.Hour)})
	recent := finish(intent("suspend", 31*24*time.Hour), ledger.Outcome{Result: ledger.ResultSkipped, At: at(31*24*time.Hour + time.Second)})
	recentOpen := intent("delete", 32*24*time.Hour)

	notice := func(kind string, when time.Time) ledger.Notice {
		t.Helper()
		n := ledger.Notice{Key: k, Kind: kind, Step: "delete", At: when, Message: kind + " at " + when.String()}
		id, err := s.RecordNotice(ctx(t), n)
		mustNil(t, "RecordNotice", err)
		n.ID, n.At = id, n.At.UTC()
		return n
	}
	deliver := func(n ledger.Notice, hook string, done bool) {
		t.Helper()
		d := ledger.NoticeDelivery{NoticeID: n.ID, Hook: hook, Attempts: 1, At: n.At.Add(time.Second)}
		if done {
			d.Delivered = d.At
		} else {
			d.LastError = "503"
		}
		mustNil(t, "RecordDelivery", s.RecordDelivery(ctx(t), d))
	}
	oldDelivered := notice("reclaimed", at(time.Hour))
	deliver(oldDelivered, "h1", true)
	deliver(oldDelivered, "h2", false)
	oldOwed := notice("failed", at(2*time.Hour))
	deliver(oldOwed, "h2", false)
	oldNone := notice("scheduled", cut.Add(-time.Nanosecond))
	atBound := notice("archived", cut)
	deliver(atBound, "h1", true)
	newer := notice("scheduled", cut.Add(time.Hour))
	deliver(newer, "h2", false)

	got, err := s.PruneJournal(ctx(t), cut)
	mustNil(t, "PruneJournal", err)
	mustEqual(t, "pruned", got, ledger.JournalPruned{Entries: ledger.PruneBatch + 2, Notices: 3, Deliveries: 3})

	mustEqual(t, "journal after the prune", listJournal(t, s, ledger.JournalFilter{}),
		[]ledger.JournalEntry{recentOpen, recent, late, lateAtBound, crashed})
	mustEqual(t, "unfinished after the prune", unfinished(t, s), []ledger.JournalEntry{crashed, recentOpen})
	ns, err := s.ListNotices(ctx(t), ledger.NoticeFilter{})
	mustNil(t, "ListNotices", err)
	mustEqual(t, "notices after the prune", ns, []ledger.Notice{atBound, newer})
	// The deliveries went with their notices: nothing is owed of them,
	// and a late report of one finds no notice. Those of the notices
	// kept are still there.
	for _, n := range []ledger.Notice{oldDelivered, oldOwed, oldNone} {
		mustBe(t, fmt.Sprintf("RecordDelivery of pruned notice %d", n.ID),
			s.RecordDelivery(ctx(t), ledger.NoticeDelivery{NoticeID: n.ID, Hook: "h1", At: cut}), ledger.ErrNotFound)
	}
	owed := func(hook string) []int64 {
		t.Helper()
		ps, err := s.PendingNotices(ctx(t), ledger.PendingFilter{Hook: hook})
		mustNil(t, "PendingNotices", err)
		ids := []int64{}
		for _, p := range ps {
			ids = append(ids, p.ID)
		}
		return ids
	}
	mustEqual(t, "owed to h1 (atBound delivered)", owed("h1"), []int64{newer.ID})
	mustEqual(t, "owed to h2", owed("h2"), []int64{atBound.ID, newer.ID})
	ps, err := s.PendingNotices(ctx(t), ledger.PendingFilter{Hook: "h2", After: atBound.ID})
	mustNil(t, "PendingNotices", err)
	if len(ps) != 1 || ps[0].Attempts != 1 {
		t.Fatalf("the delivery row of a notice kept: %+v, want 1 attempt", ps)
	}

	// Archives and runtime records are not the journal's.
	if _, err := s.Archive(ctx(t), archive.ID); err != nil {
		t.Fatalf("archive after the prune: %v", err)
	}
	if _, err := s.Runtime(ctx(t), k); err != nil {
		t.Fatalf("runtime after the prune: %v", err)
	}

	got, err = s.PruneJournal(ctx(t), cut)
	mustNil(t, "PruneJournal again", err)
	mustEqual(t, "pruned again", got, ledger.JournalPruned{})

	// IDs keep rising past what was pruned: the outbox's cursor and the
	// journal's pagination rely on it.
	if e := intent("caches", 33*24*time.Hour); e.ID <= recentOpen.ID || e.ID <= oldest {
		t.Fatalf("entry id %d after the prune, want above %d", e.ID, recentOpen.ID)
	}
	if n := notice("canceled", cut.Add(2*time.Hour)); n.ID <= newer.ID {
		t.Fatalf("notice id %d after the prune, want above %d", n.ID, newer.ID)
	}

	_, err = s.PruneJournal(ctx(t), time.Time{})
	mustFail(t, "PruneJournal at the zero time", err)
}

// testPruneJournalConcurrently: prunes running at once (the replicas of a
// fleet) delete each row once between them and leave nothing behind,
// more than a batch of notices included.
func testPruneJournalConcurrently(t *testing.T, s ledger.Store) {
	k := key("e2b", "sb-1")
	const entries, notices = 20, ledger.PruneBatch + 1
	for i := range entries {
		e := appendIntent(t, s, ledger.Intent{Key: k, Step: "suspend", At: at(time.Duration(i) * time.Second)})
		mustNil(t, "RecordOutcome", s.RecordOutcome(ctx(t), e.ID, ledger.Outcome{Result: ledger.ResultDone, At: at(time.Hour)}))
	}
	for i := range notices {
		id, err := s.RecordNotice(ctx(t), ledger.Notice{Key: k, Kind: "reclaimed", At: at(time.Duration(i) * time.Second)})
		mustNil(t, "RecordNotice", err)
		if i%2 == 0 {
			mustNil(t, "RecordDelivery", s.RecordDelivery(ctx(t), ledger.NoticeDelivery{NoticeID: id, Hook: "h", Delivered: at(time.Hour), At: at(time.Hour)}))
		}
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total ledger.JournalPruned
	)
	for range 3 {
		wg.Go(func() {
			p, err := s.PruneJournal(ctx(t), at(2*time.Hour))
			if err != nil {
				t.Errorf("PruneJournal: %v", err)
				return
			}
			mu.Lock()
			total.Entries += p.Entries
			total.Notices += p.Notices
			total.Deliveries += p.Deliveries
			mu.Unlock()
		})
	}
	wg.Wait()
	mustEqual(t, "pruned in all", total, ledger.JournalPruned{Entries: entries, Notices: notices, Deliveries: (notices + 1) / 2})
	mustEqual(t, "journal left", listJournal(t, s, ledger.JournalFilter{}), []ledger.JournalEntry{})
	ns, err := s.ListNotices(ctx(t), ledger.NoticeFilter{})
	mustNil(t, "ListNotices", err)
	if len(ns) != 0 {
		t.Fatalf("%d notices left after the prunes", len(ns))
	}
}
