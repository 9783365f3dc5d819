package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/ledgertest"
	"github.com/reclaimer/reclaimer/internal/ledger/schema"
)

func openTemp(tb testing.TB) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), filepath.Join(tb.TempDir(), "ledger.db"))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Store { return openTemp(t) })
}

func BenchmarkStore(b *testing.B) {
	ledgertest.Benchmark(b, func(b *testing.B) ledger.Store { return openTemp(b) })
}

func mustOpen(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open %s: %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestReopenKeepsData(t *testing.T) {
	ctx := t.Context()
	// A folder that does not exist yet, with characters a URI would parse.
	path := filepath.Join(t.TempDir(), "state dir", "led?ger#1%.db")
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	k := ledger.Key{Backend: "worktree", ID: "repo/a"}

	s := mustOpen(t, path)
	if err := s.Observe(ctx, []ledger.Observation{{Key: k, State: "idle", SizeBytes: 42, At: now}}); err != nil {
		t.Fatal(err)
	}
	pinned, err := s.Update(ctx, k, func(r *ledger.RuntimeRecord) error {
		r.Pinned, r.PinReason, r.LeaseUntil = true, "demo", now.Add(time.Hour)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordActivity(ctx, []ledger.Activity{{Key: k, At: now}}); err != nil {
		t.Fatal(err)
	}
	hold, err := s.TakeHold(ctx, ledger.HoldRequest{Key: k, Holder: "agent", TTL: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	entry, err := s.AppendIntent(ctx, ledger.Intent{PlanID: "p", Key: k, Step: "archive", At: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("ledger file not at the path given: %v", err)
	}

	s = mustOpen(t, path)
	got, err := s.Runtime(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, pinned) {
		t.Fatalf("after reopen:\n got %+v\nwant %+v", got, pinned)
	}
	last, err := s.LastActivity(ctx, k)
	if err != nil || !last.Equal(now) {
		t.Fatalf("LastActivity after reopen = %v, %v; want %v", last, err, now)
	}
	holds, err := s.ListHolds(ctx, ledger.HoldFilter{Key: k, Now: now})
	if err != nil || len(holds) != 1 || holds[0] != hold {
		t.Fatalf("holds after reopen = %+v, %v; want [%+v]", holds, err, hold)
	}
	// What a crash leaves unfinished is still there to recover.
	unfinished, err := s.Unfinished(ctx)
	if err != nil || len(unfinished) != 1 || unfinished[0].ID != entry {
		t.Fatalf("unfinished after reopen = %+v, %v; want entry %d", unfinished, err, entry)
	}
}

func appliedMigrations(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.read.QueryContext(t.Context(), `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d %s", v, name))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	embedded, err := schema.Load(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range embedded {
		want = append(want, fmt.Sprintf("%d %s", m.Version, m.Name))
	}
	if len(want) == 0 || want[0] != "1 0001_init" {
		t.Fatalf("embedded migrations = %v, want 0001_init first", want)
	}

	for i := range 3 {
		s := mustOpen(t, path)
		if got := appliedMigrations(t, s); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("open %d: applied %v, want %v", i, got, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConcurrentOpensMigrateOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	var wg sync.WaitGroup
	stores := make([]*Store, 4)
	for i := range stores {
		wg.Go(func() {
			s, err := Open(t.Context(), path)
			if err != nil {
				t.Errorf("Open %d: %v", i, err)
				return
			}
			stores[i] = s
		})
	}
	wg.Wait()
	embedded, err := schema.Load(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stores {
		if s != nil {
			if got := appliedMigrations(t, s); len(got) != len(embedded) {
				t.Errorf("applied %v, want each migration once", got)
			}
			s.Close()
		}
	}
}

func TestMigrationFailureLeavesSchemaAsItWas(t *testing.T) {
	db, err := sql.Open("sqlite", dsn(filepath.Join(t.TempDir(), "m.db"), false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := t.Context()

	first := fstest.MapFS{"0001_one.sql": {Data: []byte(`CREATE TABLE one (x INTEGER);`)}}
	if err := migrate(ctx, db, first); err != nil {
		t.Fatal(err)
	}
	broken := fstest.MapFS{
		"0001_one.sql":   first["0001_one.sql"],
		"0002_two.sql":   {Data: []byte(`CREATE TABLE two (x INTEGER); INSERT INTO one VALUES (1);`)},
		"0003_three.sql": {Data: []byte(`CREATE TABLE three (x INTEGER); THIS IS NOT SQL;`)},
	}
	if err := migrate(ctx, db, broken); err == nil || !strings.Contains(err.Error(), "0003_three") {
		t.Fatalf("migrate with a broken file: error %v, want one naming 0003_three", err)
	}
	var tables []string
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if got := strings.Join(tables, ","); got != "one,schema_migrations" {
		t.Fatalf("tables after failed migration: %s, want one,schema_migrations", got)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM one`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows of one = %d, %v: the failed batch was partly applied", n, err)
	}
	var version int
	if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&version); err != nil || version != 1 {
		t.Fatalf("recorded version = %d, %v; want 1", version, err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := mustOpen(t, path)
	if _, err := s.write.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(t.Context(), path); err == nil {
		s.Close()
		t.Fatal("Open of a file from a newer program succeeded")
	} else if !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open error %v, want one saying the file is newer", err)
	}
}

func TestPragmas(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	for _, db := range []*sql.DB{s.write, s.read} {
		for pragma, want := range map[string]string{
			"journal_mode": "wal",
			"synchronous":  "1", // NORMAL
			"foreign_keys": "1",
			"busy_timeout": fmt.Sprint(busyTimeoutMillis),
		} {
			var got string
			if err := db.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
			}
		}
	}
	// The read pool cannot write, so a write can only go through the one
	// writer connection.
	if _, err := s.read.ExecContext(t.Context(), `DELETE FROM runtimes`); err == nil {
		t.Error("the read pool accepted a write")
	}
}

// TestTwoProcessesShareOneFile stands for the server and a CLI command: two
// stores on one file write at once, and the busy timeout lets both finish.
func TestTwoProcessesShareOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	a, b := mustOpen(t, path), mustOpen(t, path)
	k := ledger.Key{Backend: "dir", ID: "shared"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := a.Observe(t.Context(), []ledger.Observation{{Key: k, State: "idle", At: now}}); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	const n = 50
	for i, s := range []*Store{a, b} {
		wg.Go(func() {
			for j := range n {
				_, err := s.Update(t.Context(), k, func(r *ledger.RuntimeRecord) error {
					r.SizeBytes++
					return nil
				})
				if err != nil {
					t.Errorf("store %d update %d: %v", i, j, err)
					return
				}
				err = s.RecordActivity(t.Context(), []ledger.Activity{{Key: k, At: now.Add(time.Duration(i*n+j) * time.Second)}})
				if err != nil {
					t.Errorf("store %d activity %d: %v", i, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := b.Runtime(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	if got.SizeBytes != 2*n {
		t.Fatalf("SizeBytes = %d, want %d: an update was lost between the two stores", got.SizeBytes, 2*n)
	}
	last, err := a.LastActivity(t.Context(), k)
	if err != nil || !last.Equal(now.Add((2*n-1)*time.Second)) {
		t.Fatalf("LastActivity = %v, %v; want %v", last, err, now.Add((2*n-1)*time.Second))
	}
}

func TestOpenFailsOnUnusablePath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "not-a-folder")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), filepath.Join(file, "ledger.db"))
	if err == nil || !strings.HasPrefix(err.Error(), "open ledger: ") {
		t.Fatalf("Open under a file: error %v, want an \"open ledger: \" error", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Open(ctx, filepath.Join(dir, "ledger.db")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with a canceled context: error %v, want context.Canceled", err)
	}
}

// TestLedgerIsPrivate: the ledger records paths and labels of other
// people's work; a state folder and ledger we create are 0700 and 0600
// (the WAL and shared-memory files too), whatever the umask allows.
func TestLedgerIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "reclaimer")
	path := filepath.Join(dir, "ledger.db")
	s := mustOpen(t, path)
	k := ledger.Key{Backend: "dir", ID: "a"}
	if err := s.Observe(t.Context(), []ledger.Observation{{Key: k, State: "idle", At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want os.FileMode
	}{{filepath.Dir(dir), 0o700}, {dir, 0o700}, {path, 0o600}, {path + "-wal", 0o600}, {path + "-shm", 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.want {
			t.Errorf("%s: mode %o, want %o", c.path, got, c.want)
		}
	}
}
