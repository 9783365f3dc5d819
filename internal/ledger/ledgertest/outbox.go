package ledgertest

import (
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// testOutbox: a notice is owed to each webhook until its delivery to that
// webhook is recorded as delivered or given up; the filters narrow by
// kind, source, time and cursor; an ended delivery stays ended.
func testOutbox(t *testing.T, s ledger.Store) {
	ka := ledger.Key{Source: "host-a/dirs:/runs", Backend: "dir", ID: "run-1"}
	kb := ledger.Key{Source: "sandboxes", Backend: "e2b", ID: "sb-1"}
	record := func(n ledger.Notice) ledger.PendingNotice {
		t.Helper()
		id, err := s.RecordNotice(ctx(t), n)
		mustNil(t, "RecordNotice", err)
		n.ID, n.At, n.Due = id, n.At.UTC(), n.Due.UTC()
		return ledger.PendingNotice{Notice: n}
	}
	sched := record(ledger.Notice{Key: ka, Kind: "scheduled", Step: "archive", Due: at(72 * time.Hour), At: t0, Message: "idle 14d",
		PlanID: "20260314T150926Z-1a2b3c4d"})
	failed := record(ledger.Notice{Key: kb, Kind: "failed", Step: "delete", At: at(time.Hour), Message: "provider said 500"})
	canceled := record(ledger.Notice{Key: ka, Kind: "canceled", Step: "archive", At: at(2 * time.Hour), Message: "pinned",
		ArchiveID: "a-1", FreedBytes: 7})

	pending := func(f ledger.PendingFilter) []ledger.PendingNotice {
		t.Helper()
		ps, err := s.PendingNotices(ctx(t), f)
		mustNil(t, "PendingNotices", err)
		if ps == nil {
			ps = []ledger.PendingNotice{}
		}
		return ps
	}
	all := []ledger.PendingNotice{sched, failed, canceled}
	mustEqual(t, "owed to a webhook never delivered to", pending(ledger.PendingFilter{Hook: "h1"}), all)
	mustEqual(t, "kinds", pending(ledger.PendingFilter{Hook: "h1", Kinds: []string{"scheduled", "failed"}}),
		[]ledger.PendingNotice{sched, failed})
	mustEqual(t, "sources", pending(ledger.PendingFilter{Hook: "h1", Sources: []string{ka.Source}}),
		[]ledger.PendingNotice{sched, canceled})
	mustEqual(t, "no source", pending(ledger.PendingFilter{Hook: "h1", Sources: []string{}}), []ledger.PendingNotice{})
	mustEqual(t, "the horizon is inclusive", pending(ledger.PendingFilter{Hook: "h1", Since: at(time.Hour)}),
		[]ledger.PendingNotice{failed, canceled})
	mustEqual(t, "cursor and limit", pending(ledger.PendingFilter{Hook: "h1", After: sched.ID, Limit: 1}),
		[]ledger.PendingNotice{failed})

	// A round cut short (a stop) keeps it owed, with its attempts.
	mustNil(t, "RecordDelivery attempts", s.RecordDelivery(ctx(t), ledger.NoticeDelivery{NoticeID: sched.ID, Hook: "h1",
		Attempts: 2, LastError: "POST http://127.0.0.1/hook: 503 Service Unavailable", At: at(time.Minute)}))
	tried := sched
	tried.Attempts = 2
	mustEqual(t, "after two attempts", pending(ledger.PendingFilter{Hook: "h1"}), []ledger.PendingNotice{tried, failed, canceled})

	// Delivered to h1: no longer owed to it, still to h2.
	mustNil(t, "RecordDelivery delivered", s.RecordDelivery(ctx(t), ledger.NoticeDelivery{NoticeID: sched.ID, Hook: "h1",
		Attempts: 3, Delivered: at(2 * time.Minute), At: at(2 * time.Minute)}))
	mustEqual(t, "delivered to h1", pending(ledger.PendingFilter{Hook: "h1"}), []ledger.PendingNotice{failed, canceled})
	mustEqual(t, "still owed to h2", pending(ledger.PendingFilter{Hook: "h2"}), all)
	// A late report (another replica's round, a give-up) changes nothing.
	mustNil(t, "RecordDelivery after delivered", s.RecordDelivery(ctx(t), ledger.NoticeDelivery{NoticeID: sched.ID, Hook: "h1",
		Attempts: 1, LastError: "late", At: at(3 * time.Minute)}))
	mustEqual(t, "a late report", pending(ledger.PendingFilter{Hook: "h1"}), []ledger.PendingNotice{failed, canceled})

	// Given up: not owed any more either.
	mustNil(t, "RecordDelivery gave up", s.RecordDelivery(ctx(t), ledger.NoticeDelivery{NoticeID: failed.ID, Hook: "h1",
		Attempts: 5, GaveUp: at(3 * time.Minute), LastError: "connection refused", At: at(3 * time.Minute)}))
	mustEqual(t, "given up", pending(ledger.PendingFilter{Hook: "h1"}), []ledger.PendingNotice{canceled})

	mustBe(t, "RecordDelivery of an unknown notice", s.RecordDelivery(ctx(t), ledger.NoticeDelivery{NoticeID: canceled.ID + 1000,
		Hook: "h1", At: t0}), ledger.ErrNotFound)
	for name, d := range map[string]ledger.NoticeDelivery{
		"no notice":             {Hook: "h1", At: t0},
		"no webhook":            {NoticeID: canceled.ID, At: t0},
		"no time":               {NoticeID: canceled.ID, Hook: "h1"},
		"negative attempts":     {NoticeID: canceled.ID, Hook: "h1", Attempts: -1, At: t0},
		"delivered and gave up": {NoticeID: canceled.ID, Hook: "h1", Delivered: t0, GaveUp: t0, At: t0},
	} {
		mustFail(t, "RecordDelivery "+name, s.RecordDelivery(ctx(t), d))
	}
	mustEqual(t, "after refused records", pending(ledger.PendingFilter{Hook: "h1"}), []ledger.PendingNotice{canceled})
	mustFail(t, "PendingNotices without a webhook", errOf(s.PendingNotices(ctx(t), ledger.PendingFilter{})))
}
