package postgres

import (
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
)

// TestSchema1MigratesAndIsAdopted: a ledger written before keys carried
// their source (schema 1: rows keyed by backend and id) opens at the
// current schema with its rows under source ”; AdoptLegacy gives a
// runtime's rows (record, pin, activity, holds, journal) to its source,
// and a key with a record of its own keeps it.
func TestSchema1MigratesAndIsAdopted(t *testing.T) {
	url := pgtest.NewSchema(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(migrationFiles, "0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, pool, fstest.MapFS{"0001_init.sql": {Data: data}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO runtimes (backend, runtime_id, state, pinned, pin_reason, first_seen, last_seen) VALUES ('dir', 'r1', 'stopped', true, 'demo', 1, 1)`,
		`INSERT INTO activity (backend, runtime_id, at) VALUES ('dir', 'r1', 5)`,
		`INSERT INTO holds (id, backend, runtime_id, holder, taken_at, expires_at) VALUES ('h1', 'dir', 'r1', 'host', 1, 9223372036854775807)`,
		`INSERT INTO journal (backend, runtime_id, step, at) VALUES ('dir', 'r1', 'caches', 1)`,
		`INSERT INTO runtimes (backend, runtime_id, state, first_seen, last_seen) VALUES ('dir', 'r2', 'stopped', 1, 1)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	pool.Close()

	s := openURL(t, url)
	if got := applied(t, s); len(got) < 2 {
		t.Fatalf("migrations %v", got)
	}
	legacy := ledger.Key{Backend: "dir", ID: "r1"}
	if rec, err := s.Runtime(ctx, legacy); err != nil || !rec.Pinned {
		t.Fatalf("the legacy record after the migration: %+v %v", rec, err)
	}
	mine := ledger.Key{Source: "dirs:/srv/runs", Backend: "dir", ID: "r1"}
	own := ledger.Key{Source: "dirs:/srv/runs", Backend: "dir", ID: "r2"}
	if err := s.Observe(ctx, []ledger.Observation{{Key: own, State: "stopped", Path: "/srv/runs/r2", At: time.Unix(0, 2).UTC()}}); err != nil {
		t.Fatal(err)
	}
	n, err := s.AdoptLegacy(ctx, []ledger.Key{mine, own})
	if err != nil || n != 1 {
		t.Fatalf("adopt: %d %v, want r1 only (r2 has a record under its source)", n, err)
	}
	rec, err := s.Runtime(ctx, mine)
	if err != nil || !rec.Pinned || rec.PinReason != "demo" {
		t.Fatalf("adopted record: %+v %v", rec, err)
	}
	if _, err := s.Runtime(ctx, legacy); err == nil {
		t.Error("the legacy record is still there")
	}
	if at, err := s.LastActivity(ctx, mine); err != nil || at.UnixNano() != 5 {
		t.Errorf("adopted activity: %v %v", at, err)
	}
	holds, err := s.ListHolds(ctx, ledger.HoldFilter{Key: mine, Now: time.Unix(0, 2).UTC()})
	if err != nil || len(holds) != 1 {
		t.Errorf("adopted holds: %+v %v", holds, err)
	}
	entries, err := s.ListJournal(ctx, ledger.JournalFilter{Key: mine})
	if err != nil || len(entries) != 1 {
		t.Errorf("adopted journal: %+v %v", entries, err)
	}
	if r2, err := s.Runtime(ctx, own); err != nil || r2.Path != "/srv/runs/r2" {
		t.Errorf("r2 kept its own record: %+v %v", r2, err)
	}
}
