package ledgertest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

func testArchives(t *testing.T, s ledger.Store) {
	k := key("worktree", "repo/feature")
	older := ledger.Archive{
		ID: "arch-1", Key: k, CreatedAt: t0.In(elsewhere),
		Location: "/var/lib/reclaimer/archives/arch-1",
		Formats:  []string{"git-bundle"},
		Bytes:    2048,
		Objects:  []ledger.ArchiveObject{{Name: "branch.bundle", Bytes: 2048, SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}},
		Manifest: json.RawMessage(`{"branch": "feature", "snapshot": "refs/reclaimer/arch-1", "untracked": ["notes.txt"]}`),
	}
	newer := ledger.Archive{
		ID: "arch-2", Key: k, CreatedAt: at(24 * time.Hour),
		Location: "s3://bucket/arch-2", Formats: []string{"git-bundle", "tar.zst"}, Bytes: 4096,
		Objects: []ledger.ArchiveObject{
			{Name: "branch.bundle", Bytes: 1024, SHA256: "aa"},
			{Name: "workspace.tar.zst", Bytes: 3072, SHA256: "bb"},
		},
	}
	other := ledger.Archive{ID: "arch-3", Key: key("dir", "run-1"), CreatedAt: at(time.Hour)}
	for _, a := range []ledger.Archive{newer, older, other} {
		mustNil(t, "RecordArchive "+a.ID, s.RecordArchive(ctx(t), a))
	}

	got, err := s.Archive(ctx(t), "arch-1")
	mustNil(t, "Archive", err)
	sameJSON(t, "manifest", got.Manifest, older.Manifest)
	want := older
	want.CreatedAt = t0
	got.Manifest, want.Manifest = nil, nil
	mustEqual(t, "arch-1", got, want)

	got, err = s.Archive(ctx(t), "arch-3")
	mustNil(t, "Archive", err)
	mustEqual(t, "minimal archive", got, ledger.Archive{ID: "arch-3", Key: key("dir", "run-1"), CreatedAt: at(time.Hour)})

	_, err = s.Archive(ctx(t), "arch-404")
	mustBe(t, "Archive unknown", err, ledger.ErrNotFound)

	ids := func(as []ledger.Archive) []string {
		out := []string{}
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	list, err := s.ListArchives(ctx(t), k)
	mustNil(t, "ListArchives", err)
	mustEqual(t, "newest first", ids(list), []string{"arch-2", "arch-1"})
	list, err = s.ListArchives(ctx(t), ledger.Key{})
	mustNil(t, "ListArchives all", err)
	mustEqual(t, "all, newest first", ids(list), []string{"arch-2", "arch-3", "arch-1"})
	list, err = s.ListArchives(ctx(t), key("dir", "nothing"))
	mustNil(t, "ListArchives none", err)
	mustEqual(t, "none", ids(list), []string{})

	// Recording the same archive again (a retried step) is harmless, even
	// with its manifest formatted differently.
	again := older
	again.Manifest = json.RawMessage(`{"branch":"feature","snapshot":"refs/reclaimer/arch-1","untracked":["notes.txt"]}`)
	mustNil(t, "RecordArchive again", s.RecordArchive(ctx(t), again))
	list, err = s.ListArchives(ctx(t), k)
	mustNil(t, "ListArchives", err)
	mustEqual(t, "after repeat", ids(list), []string{"arch-2", "arch-1"})

	// Another archive under a used ID would hide one: refuse it.
	changed := older
	changed.Bytes = 1
	mustBe(t, "RecordArchive with a used id", s.RecordArchive(ctx(t), changed), ledger.ErrConflict)
	got, err = s.Archive(ctx(t), "arch-1")
	mustNil(t, "Archive", err)
	if got.Bytes != older.Bytes {
		t.Fatalf("conflicting record overwrote bytes: %d", got.Bytes)
	}

	// Deleting (a prune) removes the record; again, or an unknown id, is
	// harmless; the other archives stay.
	mustNil(t, "DeleteArchive", s.DeleteArchive(ctx(t), "arch-1"))
	mustNil(t, "DeleteArchive again", s.DeleteArchive(ctx(t), "arch-1"))
	mustNil(t, "DeleteArchive unknown", s.DeleteArchive(ctx(t), "arch-404"))
	_, err = s.Archive(ctx(t), "arch-1")
	mustBe(t, "Archive after delete", err, ledger.ErrNotFound)
	list, err = s.ListArchives(ctx(t), ledger.Key{})
	mustNil(t, "ListArchives after delete", err)
	mustEqual(t, "after delete", ids(list), []string{"arch-2", "arch-3"})
	// The id is free again.
	mustNil(t, "RecordArchive after delete", s.RecordArchive(ctx(t), changed))
}

func testNotices(t *testing.T, s ledger.Store) {
	k1, k2 := key("dir", "run-1"), key("docker", "c1")
	record := func(n ledger.Notice) ledger.Notice {
		t.Helper()
		id, err := s.RecordNotice(ctx(t), n)
		mustNil(t, "RecordNotice", err)
		n.ID = id
		n.At, n.Due = n.At.UTC(), n.Due.UTC() // the zero Due stays zero
		return n
	}
	// Recorded out of time order on purpose.
	canceled := record(ledger.Notice{Key: k1, Kind: "canceled", Step: "archive", At: at(2 * time.Hour), Message: "activity"})
	scheduled := record(ledger.Notice{Key: k1, Kind: "scheduled", Step: "archive", Due: at(72 * time.Hour).In(elsewhere), At: t0.In(elsewhere),
		Message: "inactive 14d", PlanID: "20260314T150926Z-1a2b3c4d"})
	other := record(ledger.Notice{Key: k2, Kind: "failed", Step: "delete", At: at(time.Hour), Message: "provider said 500"})
	done := record(ledger.Notice{Key: k2, Kind: "archived", Step: "archive", At: at(5 * time.Hour), Message: "idle 30d",
		PlanID: "20260314T200926Z-5e6f7a8b", ArchiveID: "a-1", FreedBytes: 1 << 40})
	again := record(ledger.Notice{Key: k1, Kind: "scheduled", Step: "archive", Due: at(96 * time.Hour), At: at(3 * time.Hour)})
	if scheduled.ID == canceled.ID || scheduled.ID == other.ID || again.ID == scheduled.ID {
		t.Fatalf("notice ids repeat: %d %d %d %d", canceled.ID, scheduled.ID, other.ID, again.ID)
	}

	list := func(f ledger.NoticeFilter) []ledger.Notice {
		t.Helper()
		ns, err := s.ListNotices(ctx(t), f)
		mustNil(t, "ListNotices", err)
		if ns == nil {
			ns = []ledger.Notice{}
		}
		return ns
	}
	mustEqual(t, "k1, oldest first", list(ledger.NoticeFilter{Key: k1}), []ledger.Notice{scheduled, canceled, again})
	mustEqual(t, "all", list(ledger.NoticeFilter{}), []ledger.Notice{scheduled, other, canceled, again, done})
	mustEqual(t, "since is inclusive", list(ledger.NoticeFilter{Key: k1, Since: at(2 * time.Hour)}), []ledger.Notice{canceled, again})
	mustEqual(t, "limit", list(ledger.NoticeFilter{Since: at(time.Minute), Limit: 2}), []ledger.Notice{other, canceled})
	mustEqual(t, "since the future", list(ledger.NoticeFilter{Since: at(100 * time.Hour)}), []ledger.Notice{})

	// An identical notice recorded again (a retried pass) is the same notice,
	// with or without a due time.
	for _, n := range []ledger.Notice{scheduled, canceled} {
		dup := n
		dup.ID = 0
		id, err := s.RecordNotice(ctx(t), dup)
		mustNil(t, "RecordNotice again", err)
		if id != n.ID {
			t.Fatalf("repeated notice got id %d, want %d", id, n.ID)
		}
	}
	// A notice that differs only in its message is a new one.
	differs := canceled
	differs.ID, differs.Message = 0, "pinned"
	differs = record(differs)
	mustEqual(t, "after repeats", list(ledger.NoticeFilter{Key: k1}), []ledger.Notice{scheduled, canceled, differs, again})
}

func appendIntent(t *testing.T, s ledger.Store, in ledger.Intent) ledger.JournalEntry {
	t.Helper()
	id, err := s.AppendIntent(ctx(t), in)
	mustNil(t, "AppendIntent", err)
	in.At = in.At.UTC()
	return ledger.JournalEntry{ID: id, Intent: in}
}

func listJournal(t *testing.T, s ledger.Store, f ledger.JournalFilter) []ledger.JournalEntry {
	t.Helper()
	es, err := s.ListJournal(ctx(t), f)
	mustNil(t, "ListJournal", err)
	if es == nil {
		es = []ledger.JournalEntry{}
	}
	return es
}

func unfinished(t *testing.T, s ledger.Store) []ledger.JournalEntry {
	t.Helper()
	es, err := s.Unfinished(ctx(t))
	mustNil(t, "Unfinished", err)
	if es == nil {
		es = []ledger.JournalEntry{}
	}
	return es
}

func testJournal(t *testing.T, s ledger.Store) {
	k1, k2 := key("worktree", "repo/a"), key("dir", "run-2")
	e1 := appendIntent(t, s, ledger.Intent{PlanID: "plan-1", Key: k1, Step: "caches",
		Paths: []string{"/w/repo/a/.cache", "/w/repo/a/.npm"}, Reason: "stopped", At: t0.In(elsewhere)})
	e2 := appendIntent(t, s, ledger.Intent{PlanID: "plan-1", Key: k2, Step: "dependencies",
		Paths: []string{"/runs/run-2/node_modules"}, Reason: "disk above 90%", At: at(time.Second)})
	e3 := appendIntent(t, s, ledger.Intent{PlanID: "plan-2", Key: k1, Step: "archive", Reason: "inactive 30d", At: at(time.Hour)})
	e4 := appendIntent(t, s, ledger.Intent{Key: k2, Step: "delete", Reason: "on request", At: at(2 * time.Hour)})
	if !(e1.ID < e2.ID && e2.ID < e3.ID && e3.ID < e4.ID) {
		t.Fatalf("entry ids do not rise: %d %d %d %d", e1.ID, e2.ID, e3.ID, e4.ID)
	}

	mustEqual(t, "newest first", listJournal(t, s, ledger.JournalFilter{}), []ledger.JournalEntry{e4, e3, e2, e1})
	mustEqual(t, "plan-1", listJournal(t, s, ledger.JournalFilter{PlanID: "plan-1"}), []ledger.JournalEntry{e2, e1})
	mustEqual(t, "k1", listJournal(t, s, ledger.JournalFilter{Key: k1}), []ledger.JournalEntry{e3, e1})
	mustEqual(t, "plan-1 and k1", listJournal(t, s, ledger.JournalFilter{PlanID: "plan-1", Key: k1}), []ledger.JournalEntry{e1})
	mustEqual(t, "limit", listJournal(t, s, ledger.JournalFilter{Limit: 1}), []ledger.JournalEntry{e4})
	mustEqual(t, "unknown plan", listJournal(t, s, ledger.JournalFilter{PlanID: "plan-9"}), []ledger.JournalEntry{})

	// A crash now would leave all four half done, oldest first.
	mustEqual(t, "all unfinished", unfinished(t, s), []ledger.JournalEntry{e1, e2, e3, e4})

	done := ledger.Outcome{Result: ledger.ResultDone, Reason: "", FreedBytes: 1 << 30, At: at(2 * time.Second).In(elsewhere)}
	mustNil(t, "RecordOutcome", s.RecordOutcome(ctx(t), e1.ID, done))
	skipped := ledger.Outcome{Result: ledger.ResultSkipped, Reason: "changed since plan", At: at(3 * time.Second)}
	mustNil(t, "RecordOutcome", s.RecordOutcome(ctx(t), e3.ID, skipped))
	failed := ledger.Outcome{Result: ledger.ResultFailed, Reason: "provider said 500", At: at(3 * time.Hour)}
	mustNil(t, "RecordOutcome", s.RecordOutcome(ctx(t), e4.ID, failed))

	done.At = done.At.UTC()
	e1.Outcome, e3.Outcome, e4.Outcome = &done, &skipped, &failed
	mustEqual(t, "unfinished after outcomes", unfinished(t, s), []ledger.JournalEntry{e2})
	mustEqual(t, "entries carry outcomes", listJournal(t, s, ledger.JournalFilter{}), []ledger.JournalEntry{e4, e3, e2, e1})

	// Recovery repeating an outcome is harmless; contradicting one is not.
	mustNil(t, "same outcome again", s.RecordOutcome(ctx(t), e1.ID, done))
	retried := done
	retried.At = at(time.Hour) // a retry may carry a later time; the first one stays
	mustNil(t, "same outcome, later", s.RecordOutcome(ctx(t), e1.ID, retried))
	mustBe(t, "different outcome", s.RecordOutcome(ctx(t), e1.ID,
		ledger.Outcome{Result: ledger.ResultFailed, Reason: "recovery", At: at(time.Hour)}), ledger.ErrConflict)
	mustBe(t, "different bytes", s.RecordOutcome(ctx(t), e1.ID,
		ledger.Outcome{Result: ledger.ResultDone, FreedBytes: 1, At: done.At}), ledger.ErrConflict)
	mustEqual(t, "first outcome stays", listJournal(t, s, ledger.JournalFilter{PlanID: "plan-1", Key: k1}), []ledger.JournalEntry{e1})

	mustNil(t, "finish the last", s.RecordOutcome(ctx(t), e2.ID, ledger.Outcome{Result: ledger.ResultDone, At: at(time.Minute)}))
	mustEqual(t, "nothing unfinished", unfinished(t, s), []ledger.JournalEntry{})
}

func testJournalPagination(t *testing.T, s ledger.Store) {
	var all []ledger.JournalEntry
	for i := range 7 {
		e := appendIntent(t, s, ledger.Intent{PlanID: "p", Key: key("dir", "r"), Step: "caches", At: at(time.Duration(i) * time.Second)})
		all = append([]ledger.JournalEntry{e}, all...) // newest first
	}
	var got []ledger.JournalEntry
	var before int64
	for range len(all) + 1 {
		page := listJournal(t, s, ledger.JournalFilter{PlanID: "p", Before: before, Limit: 3})
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		before = page[len(page)-1].ID
	}
	mustEqual(t, "pages joined", got, all)
}

func testOutcomeOfUnknownEntry(t *testing.T, s ledger.Store) {
	err := s.RecordOutcome(ctx(t), 12345, ledger.Outcome{Result: ledger.ResultDone, At: t0})
	mustBe(t, "RecordOutcome of an unknown entry", err, ledger.ErrNotFound)
}
