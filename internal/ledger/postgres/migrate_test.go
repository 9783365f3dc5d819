package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
	"github.com/reclaimer/reclaimer/internal/ledger/schema"
)

func applied(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), `SELECT version, name FROM schema_migrations ORDER BY version`)
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
	return out
}

func wantMigrations(t *testing.T) string {
	t.Helper()
	ms, err := schema.Load(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range ms {
		want = append(want, fmt.Sprintf("%d %s", m.Version, m.Name))
	}
	if len(want) == 0 || want[0] != "1 0001_init" {
		t.Fatalf("embedded migrations = %v, want 0001_init first", want)
	}
	return strings.Join(want, ",")
}

// TestReopenKeepsDataAndMigratesOnce: a second start applies nothing and
// finds what the first wrote.
func TestReopenKeepsDataAndMigratesOnce(t *testing.T) {
	url := pgtest.NewSchema(t)
	want := wantMigrations(t)
	k := ledger.Key{Backend: "worktree", ID: "repo/a"}
	for i := range 3 {
		s, err := Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(applied(t, s), ","); got != want {
			t.Fatalf("open %d: applied %s, want %s", i, got, want)
		}
		if i == 0 {
			if err := s.Observe(t.Context(), []ledger.Observation{{Key: k, State: "idle", At: t0()}}); err != nil {
				t.Fatal(err)
			}
		} else if r, err := s.Runtime(t.Context(), k); err != nil || r.State != "idle" {
			t.Fatalf("open %d: %+v, %v", i, r, err)
		}
		s.Close()
	}
}

// TestReplicasStartingTogetherMigrateOnce: stores opening one empty
// database at once (replicas starting together) queue on the advisory
// lock; each migration is applied once and every one opens.
func TestReplicasStartingTogetherMigrateOnce(t *testing.T) {
	url := pgtest.NewSchema(t)
	want := wantMigrations(t)
	var wg sync.WaitGroup
	stores := make([]*Store, 5)
	for i := range stores {
		wg.Go(func() {
			s, err := Open(t.Context(), url)
			if err != nil {
				t.Errorf("Open %d: %v", i, err)
				return
			}
			stores[i] = s
		})
	}
	wg.Wait()
	for _, s := range stores {
		if s == nil {
			continue
		}
		if got := strings.Join(applied(t, s), ","); got != want {
			t.Errorf("applied %s, want %s once each", got, want)
		}
		s.Close()
	}
}

// TestMigrationFailureLeavesSchemaAsItWas: DDL is transactional; a broken
// file rolls the whole upgrade back.
func TestMigrationFailureLeavesSchemaAsItWas(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), pgtest.NewSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := t.Context()
	first := fstest.MapFS{"0001_one.sql": {Data: []byte(`CREATE TABLE one (x integer);`)}}
	if err := migrate(ctx, pool, first); err != nil {
		t.Fatal(err)
	}
	broken := fstest.MapFS{
		"0001_one.sql":   first["0001_one.sql"],
		"0002_two.sql":   {Data: []byte(`CREATE TABLE two (x integer); INSERT INTO one VALUES (1);`)},
		"0003_three.sql": {Data: []byte(`CREATE TABLE three (x integer); THIS IS NOT SQL;`)},
	}
	if err := migrate(ctx, pool, broken); err == nil || !strings.Contains(err.Error(), "0003_three") {
		t.Fatalf("migrate with a broken file: %v, want an error naming 0003_three", err)
	}
	var tables string
	if err := pool.QueryRow(ctx, `SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables
		WHERE schemaname = current_schema()`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != "one,schema_migrations" {
		t.Fatalf("tables after a failed migration: %s, want one,schema_migrations", tables)
	}
	var n, version int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM one), (SELECT max(version) FROM schema_migrations)`).Scan(&n, &version); err != nil {
		t.Fatal(err)
	}
	if n != 0 || version != 1 {
		t.Fatalf("rows of one = %d, version %d: the failed upgrade was partly applied", n, version)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	url := pgtest.NewSchema(t)
	s, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(t.Context(), url); err == nil {
		s.Close()
		t.Fatal("Open of a database from a newer program succeeded")
	} else if !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open: %v, want an error saying the database is newer", err)
	}
}

// TestOpenErrors: a bad URL or an unreachable server is a clear error
// that never shows the password.
func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30e9)
	defer cancel()
	for _, u := range []string{
		"postgres://user:s3cret-pw@/db?sslmode=bogus",
		"postgres://user:s3cret-pw@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"not a url at all s3cret-pw",
	} {
		_, err := Open(ctx, u)
		if err == nil || !strings.HasPrefix(err.Error(), "open ledger: ") {
			t.Fatalf("Open(%q): %v, want an \"open ledger: \" error", u, err)
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Fatalf("Open(%q) error shows the password: %v", u, err)
		}
	}
	canceled, cancel2 := context.WithCancel(t.Context())
	cancel2()
	if _, err := Open(canceled, pgtest.NewSchema(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with a canceled context: %v, want context.Canceled", err)
	}
}

// TestPoolIsBounded: the pool has DefaultMaxConns unless the URL says.
func TestPoolIsBounded(t *testing.T) {
	raw := pgtest.NewSchema(t)
	s := openURL(t, raw)
	if got := s.MaxConns(); got != DefaultMaxConns {
		t.Fatalf("MaxConns = %d, want %d", got, DefaultMaxConns)
	}
	u, _ := url.Parse(raw)
	q := u.Query()
	q.Set("pool_max_conns", "3")
	u.RawQuery = q.Encode()
	if got := openURL(t, u.String()).MaxConns(); got != 3 {
		t.Fatalf("MaxConns with pool_max_conns=3: %d", got)
	}
	var app string
	if err := s.pool.QueryRow(t.Context(), `SELECT current_setting('application_name')`).Scan(&app); err != nil || app != "reclaimer" {
		t.Fatalf("application_name = %q, %v", app, err)
	}
}

// TestOrderIsBytewiseWhateverTheCollation: in a database whose default
// collation sorts "B" after "a" (ICU, English), keys still list bytewise.
func TestOrderIsBytewiseWhateverTheCollation(t *testing.T) {
	admin, err := pgx.Connect(t.Context(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	name := "icu_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	_, err = admin.Exec(t.Context(), `CREATE DATABASE `+name+` TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'`)
	if err != nil {
		t.Skipf("no ICU collation on this server: %v", err)
	}
	s := openURL(t, pgtest.Shared(t).URL(name))
	var sorted string
	if err := s.pool.QueryRow(t.Context(), `SELECT string_agg(x, ',' ORDER BY x) FROM unnest(ARRAY['a','B','b']) x`).Scan(&sorted); err != nil || sorted == "B,a,b" {
		t.Fatalf("the database sorts %q (%v): not the collation this test needs", sorted, err)
	}
	var obs []ledger.Observation
	for _, id := range []string{"b", "B", "a", "b0", "B0"} {
		obs = append(obs, ledger.Observation{Key: ledger.Key{Backend: "dir", ID: id}, State: "idle", At: t0()})
	}
	if err := s.Observe(t.Context(), obs); err != nil {
		t.Fatal(err)
	}
	rs, err := s.ListRuntimes(t.Context(), ledger.RuntimeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.Key.ID)
	}
	if got := strings.Join(ids, ","); got != "B,B0,a,b,b0" {
		t.Fatalf("listed %s, want bytewise B,B0,a,b,b0", got)
	}
	page, err := s.ListRuntimes(t.Context(), ledger.RuntimeFilter{After: ledger.Key{Backend: "dir", ID: "B0"}, Limit: 1})
	if err != nil || len(page) != 1 || page[0].Key.ID != "a" {
		t.Fatalf("the page after B0: %+v, %v; want a", page, err)
	}
}

func openURL(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestOutboxMigrationOwesOnlyNewNotices: a notice recorded before the
// outbox (version 6) was sent, or lost, by the program of its day: the
// upgrade does not make it owed; one recorded after is.
func TestOutboxMigrationOwesOnlyNewNotices(t *testing.T) {
	url := pgtest.NewSchema(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	before := fstest.MapFS{}
	for _, name := range []string{"0001_init.sql", "0002_source.sql", "0003_replicas.sql", "0004_usage_samples.sql", "0005_agent_server.sql"} {
		data, err := fs.ReadFile(migrationFiles, name)
		if err != nil {
			t.Fatal(err)
		}
		before[name] = &fstest.MapFile{Data: data}
	}
	if err := migrate(t.Context(), pool, before); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `INSERT INTO notices (backend, source, runtime_id, kind, step, at)
		VALUES ('dir', 'dirs:/runs', 'run-1', 'scheduled', 'archive', $1)`, t0().UnixNano()); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ps, err := s.PendingNotices(t.Context(), ledger.PendingFilter{Hook: "h"}); err != nil || len(ps) != 0 {
		t.Fatalf("owed after the upgrade: %+v, %v", ps, err)
	}
	id, err := s.RecordNotice(t.Context(), ledger.Notice{Key: ledger.Key{Source: "dirs:/runs", Backend: "dir", ID: "run-1"},
		Kind: "scheduled", Step: "delete", At: t0()})
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := s.PendingNotices(t.Context(), ledger.PendingFilter{Hook: "h"}); err != nil || len(ps) != 1 || ps[0].ID != id {
		t.Fatalf("owed after a new notice: %+v, %v", ps, err)
	}
}

// TestLoadedNoticesAreNotOwed: a copy carries notices but not their
// deliveries (the old ledger's): what it loads is not sent again.
func TestLoadedNoticesAreNotOwed(t *testing.T) {
	s, err := Open(t.Context(), pgtest.NewSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := ledger.Key{Source: "dirs:/runs", Backend: "dir", ID: "run-1"}
	snap := &ledger.Snapshot{Notices: []ledger.Notice{{ID: 7, Key: k, Kind: "scheduled", Step: "archive", At: t0()}}}
	if err := s.Load(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	if ps, err := s.PendingNotices(t.Context(), ledger.PendingFilter{Hook: "h"}); err != nil || len(ps) != 0 {
		t.Fatalf("owed after a copy: %+v, %v", ps, err)
	}
}
