package sqlite

import (
	"database/sql"
	"io/fs"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// schema1 writes a ledger file as the program of schema 1 left it: a pin,
// activity, a hold, an archive, a notice and a journal entry of runtime
// dir/run-1, and a second runtime worktree/a.
func schema1(t *testing.T, path string, at time.Time) {
	t.Helper()
	one, err := fs.ReadFile(migrationFiles, "0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrate(t.Context(), db, fstest.MapFS{"0001_init.sql": {Data: one}}); err != nil {
		t.Fatal(err)
	}
	n := at.UnixNano()
	for _, q := range []string{
		`INSERT INTO runtimes (backend, id, state, home, size_bytes, first_seen, last_seen, decided)
			VALUES ('dir', 'run-1', 'stopped', '/runs/run-1/home', 7, ?1, ?1, '{"pinned":true,"pin_reason":"demo"}')`,
		`INSERT INTO runtimes (backend, id, state, first_seen, last_seen) VALUES ('worktree', 'a', 'stopped', ?1, ?1)`,
		`INSERT INTO activity (backend, runtime_id, at) VALUES ('dir', 'run-1', ?1)`,
		`INSERT INTO holds (id, backend, runtime_id, holder, taken_at, expires_at) VALUES ('h_1', 'dir', 'run-1', 'host', ?1, ?1 + 3600000000000)`,
		`INSERT INTO archives (id, backend, runtime_id, created_at, location) VALUES ('a1', 'dir', 'run-1', ?1, '/archives/x')`,
		`INSERT INTO notices (backend, runtime_id, kind, step, at) VALUES ('dir', 'run-1', 'scheduled', 'archive', ?1)`,
		`INSERT INTO journal (plan_id, backend, runtime_id, step, at) VALUES ('p', 'dir', 'run-1', 'caches', ?1)`,
	} {
		if _, err := db.ExecContext(t.Context(), q, n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestSchema1MigratesAndIsAdopted: a schema-1 file opens with every record
// kept under a legacy key (no source), and AdoptLegacy gives a runtime's
// record, activity, holds, archives, notices and journal to its source in
// one go; a key with its own record adopts nothing, and a second adoption
// moves nothing.
func TestSchema1MigratesAndIsAdopted(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	schema1(t, path, at)
	s := mustOpen(t, path)
	if got := appliedMigrations(t, s); len(got) < 2 || got[1] != "2 0002_source" {
		t.Fatalf("migrations %v", got)
	}
	legacy := ledger.Key{Backend: "dir", ID: "run-1"}
	r, err := s.Runtime(ctx, legacy)
	if err != nil || !r.Pinned || r.PinReason != "demo" || r.Home != "/runs/run-1/home" || r.SizeBytes != 7 || !r.FirstSeen.Equal(at) {
		t.Fatalf("legacy record after migration: %+v, %v", r, err)
	}
	states, err := s.RuntimeStates(ctx)
	if err != nil || len(states) != 2 || states[legacy] != "stopped" {
		t.Fatalf("states %v, %v", states, err)
	}

	adopted := ledger.Key{Source: "dirs:/runs", Backend: "dir", ID: "run-1"}
	// worktree/a: its source observed it already, so it has a record of
	// its own, which stays.
	own := ledger.Key{Source: "worktrees:/repo", Backend: "worktree", ID: "a"}
	if err := s.Observe(ctx, []ledger.Observation{{Key: own, State: "running", SizeBytes: -1, At: at.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	n, err := s.AdoptLegacy(ctx, []ledger.Key{adopted, own, {Source: "x", Backend: "dir", ID: "nope"}})
	if err != nil || n != 1 {
		t.Fatalf("adopt: %d, %v; want 1", n, err)
	}
	if _, err := s.Runtime(ctx, legacy); err == nil {
		t.Fatal("the legacy record is still there")
	}
	r, err = s.Runtime(ctx, adopted)
	if err != nil || !r.Pinned || r.PinReason != "demo" {
		t.Fatalf("adopted record %+v, %v", r, err)
	}
	if got, err := s.LastActivity(ctx, adopted); err != nil || !got.Equal(at) {
		t.Fatalf("adopted activity %v, %v", got, err)
	}
	if hs, err := s.ListHolds(ctx, ledger.HoldFilter{Key: adopted, Now: at}); err != nil || len(hs) != 1 || hs[0].Key != adopted {
		t.Fatalf("adopted holds %+v, %v", hs, err)
	}
	if as, err := s.ListArchives(ctx, adopted); err != nil || len(as) != 1 {
		t.Fatalf("adopted archives %+v, %v", as, err)
	}
	if ns, err := s.ListNotices(ctx, ledger.NoticeFilter{Key: adopted}); err != nil || len(ns) != 1 {
		t.Fatalf("adopted notices %+v, %v", ns, err)
	}
	// A notice from before the outbox was sent (or lost) by the program
	// of its day: an upgrade does not send it again.
	if ps, err := s.PendingNotices(ctx, ledger.PendingFilter{Hook: "h"}); err != nil || len(ps) != 0 {
		t.Fatalf("notices owed after the upgrade: %+v, %v", ps, err)
	}
	if js, err := s.ListJournal(ctx, ledger.JournalFilter{Key: adopted}); err != nil || len(js) != 1 {
		t.Fatalf("adopted journal %+v, %v", js, err)
	}
	if r, err := s.Runtime(ctx, own); err != nil || r.State != "running" {
		t.Fatalf("a key with its own record: %+v, %v", r, err)
	}
	if r, err := s.Runtime(ctx, ledger.Key{Backend: "worktree", ID: "a"}); err != nil || r.State != "stopped" {
		t.Fatalf("the legacy record of a key with its own stays: %+v, %v", r, err)
	}
	if n, err := s.AdoptLegacy(ctx, []ledger.Key{adopted}); err != nil || n != 0 {
		t.Fatalf("second adoption: %d, %v", n, err)
	}
	if _, err := s.AdoptLegacy(ctx, []ledger.Key{legacy}); err == nil {
		t.Fatal("adopting into a key without a source was accepted")
	}
}

// TestPathIsKept: the runtime's own folder is an observed field, kept
// when a later observation does not know it (a state flip by the engine).
func TestPathIsKept(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	k := ledger.Key{Source: "dirs:/runs", Backend: "dir", ID: "r"}
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := s.Observe(ctx, []ledger.Observation{{Key: k, State: "stopped", Path: "/runs/r", At: at}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Observe(ctx, []ledger.Observation{{Key: k, State: "archived", At: at.Add(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Runtime(ctx, k); err != nil || r.Path != "/runs/r" || r.State != "archived" {
		t.Fatalf("record %+v, %v", r, err)
	}
}
