package server_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/clock"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/server"
)

// TestJournalRetention: the daemon prunes the journal and the notices
// with their deliveries as it prunes usage samples (its first pass, then
// hourly), past journal_retention but never within notice_horizon, which
// is longer here: what the outbox may still owe stays until the horizon
// has passed it too.
func TestJournalRetention(t *testing.T) { testJournalRetention(t, "2h") }

// TestJournalRetentionOff: journal_retention = "off" keeps it all.
func TestJournalRetentionOff(t *testing.T) { testJournalRetention(t, "off") }

func testJournalRetention(t *testing.T, retention string) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	fake := clock.NewFake(time.Now())
	now := fake.Now()
	path := filepath.Join(dir, "state", "ledger.db")

	// The ledger as an earlier run left it.
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	k := ledger.Key{Source: "old", Backend: "dir", ID: "gone"}
	finished := func(ago time.Duration) int64 {
		t.Helper()
		id, err := st.AppendIntent(context.Background(), ledger.Intent{Key: k, Step: "delete", At: now.Add(-ago - time.Minute)})
		if err == nil {
			err = st.RecordOutcome(context.Background(), id, ledger.Outcome{Result: ledger.ResultDone, At: now.Add(-ago)})
		}
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	notice := func(ago time.Duration) int64 {
		t.Helper()
		id, err := st.RecordNotice(context.Background(), ledger.Notice{Key: k, Kind: "reclaimed", Step: "delete", At: now.Add(-ago)})
		if err == nil {
			err = st.RecordDelivery(context.Background(), ledger.NoticeDelivery{NoticeID: id, Hook: "h", Attempts: 1,
				Delivered: now.Add(-ago), At: now.Add(-ago)})
		}
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	oldEntry, oldNotice := finished(4*time.Hour), notice(4*time.Hour)
	// Past the retention (2h) but within the horizon (3h).
	midEntry, midNotice := finished(150*time.Minute), notice(150*time.Minute)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	h := startDaemon(t, dir, writeConfig(t, dir, "journal_retention = \""+retention+"\"\nnotice_horizon = \"3h\"\n",
		"[[dirs]]\nroot = \""+runs+"\"\n"), server.Options{Clock: fake})
	h.waitPass("start")
	st, err = sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids := func() (entries, notices []int64) {
		t.Helper()
		es, err := st.ListJournal(context.Background(), ledger.JournalFilter{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			entries = append(entries, e.ID)
		}
		ns, err := st.ListNotices(context.Background(), ledger.NoticeFilter{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			notices = append(notices, n.ID)
		}
		return entries, notices
	}
	if retention == "off" {
		fake.BlockUntil(2)
		fake.Advance(time.Hour)
		if p := h.waitPass("timer"); p.Err != nil {
			t.Fatal(p.Err)
		}
		if es, ns := ids(); len(es) != 2 || len(ns) != 2 {
			t.Fatalf("journal_retention off: entries %v, notices %v; want all 2 and 2", es, ns)
		}
		return
	}
	if es, ns := ids(); len(es) != 1 || es[0] != midEntry || len(ns) != 1 || ns[0] != midNotice {
		t.Fatalf("after the first pass: entries %v, notices %v; want only %d and %d (%d and %d pruned)",
			es, ns, midEntry, midNotice, oldEntry, oldNotice)
	}

	// An hour on, the next prune finds them past the horizon too.
	fake.BlockUntil(2)
	fake.Advance(time.Hour)
	if p := h.waitPass("timer"); p.Err != nil {
		t.Fatal(p.Err)
	}
	if es, ns := ids(); len(es) != 0 || len(ns) != 0 {
		t.Fatalf("an hour later: entries %v, notices %v; want none", es, ns)
	}
}
