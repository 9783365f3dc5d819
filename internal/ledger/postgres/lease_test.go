package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/leader/leadertest"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
)

// withClock opens a store whose database clock (reclaimer_clock, the one
// clock of leases and fences) is a row the test sets.
func withClock(t *testing.T, url string) (*Store, func(time.Time)) {
	t.Helper()
	s, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), `
		CREATE TABLE test_clock (ns bigint NOT NULL);
		INSERT INTO test_clock VALUES (0);
		CREATE OR REPLACE FUNCTION reclaimer_clock() RETURNS bigint LANGUAGE sql VOLATILE AS $$ SELECT ns FROM test_clock $$;
	`); err != nil {
		t.Fatal(err)
	}
	return s, func(now time.Time) {
		if _, err := conn.Exec(context.Background(), `UPDATE test_clock SET ns = $1`, now.UnixNano()); err != nil {
			t.Errorf("set the database clock: %v", err)
		}
	}
}

// holds tells whether a fenced write commits, by making one.
func holds(ctx context.Context, s *Store, f ledger.Fence) (bool, error) {
	err := s.Fenced(ctx, f, func(context.Context, ledger.Store) error { return nil })
	if errors.Is(err, ledger.ErrFenced) {
		return false, nil
	}
	return err == nil, err
}

func TestLessorConforms(t *testing.T) {
	leadertest.Run(t, func(t *testing.T) leadertest.Subject {
		s, set := withClock(t, pgtest.NewSchema(t))
		return leadertest.Subject{Lessor: s, SetClock: set,
			Holds: func(f ledger.Fence) (bool, error) { return holds(t.Context(), s, f) }}
	})
}

// TestFencedWrites: writes under a fence commit while the lease holds its
// generation and are refused, whole, after a takeover; an error from fn
// leaves nothing.
func TestFencedWrites(t *testing.T) {
	s, set := withClock(t, pgtest.NewSchema(t))
	ctx := t.Context()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	set(now)
	a, won, err := s.Elect(ctx, "remote", "a#1", 15*time.Second)
	if err != nil || !won {
		t.Fatalf("Elect: %v, %v", won, err)
	}
	k := ledger.Key{Backend: "e2b", ID: "sbx-1"}
	if err := s.Observe(ctx, []ledger.Observation{{Key: k, State: "running", At: now}}); err != nil {
		t.Fatal(err)
	}
	var entry int64
	err = s.Fenced(ctx, a.Fence(), func(ctx context.Context, st ledger.Store) error {
		var err error
		if entry, err = st.AppendIntent(ctx, ledger.Intent{Key: k, Step: "suspend", At: now}); err != nil {
			return err
		}
		_, err = st.Update(ctx, k, func(r *ledger.RuntimeRecord) error { r.State = "suspended"; return nil })
		return err
	})
	if err != nil {
		t.Fatalf("fenced write under the lease: %v", err)
	}
	if r, _ := s.Runtime(ctx, k); r.State != "suspended" {
		t.Fatalf("state %q after the fenced write, want suspended", r.State)
	}
	if es, _ := s.Unfinished(ctx); len(es) != 1 || es[0].ID != entry {
		t.Fatalf("unfinished %+v, want the fenced intent %d", es, entry)
	}

	boom := errors.New("boom")
	err = s.Fenced(ctx, a.Fence(), func(ctx context.Context, st ledger.Store) error {
		if _, err := st.AppendIntent(ctx, ledger.Intent{Key: k, Step: "delete", At: now}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Fenced returning fn's error: %v", err)
	}
	if es, _ := s.Unfinished(ctx); len(es) != 1 {
		t.Fatalf("an intent of a failed fenced write stayed: %+v", es)
	}

	// What a fenced function's store cannot do.
	err = s.Fenced(ctx, a.Fence(), func(ctx context.Context, st ledger.Store) error {
		var errs []error
		if _, err := st.(ledger.Locker).Lock(ctx, k, 0); err == nil {
			errs = append(errs, errors.New("Lock inside a fenced write succeeded"))
		}
		if err := st.(ledger.Fencer).Fenced(ctx, a.Fence(), func(context.Context, ledger.Store) error { return nil }); err == nil {
			errs = append(errs, errors.New("a nested Fenced succeeded"))
		}
		if err := st.Close(); err == nil {
			errs = append(errs, errors.New("Close inside a fenced write succeeded"))
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatal(err)
	}

	// The lease runs out and b takes over: a's writes are refused.
	set(a.ExpiresAt)
	b, won, err := s.Elect(ctx, "remote", "b#1", 15*time.Second)
	if err != nil || !won || b.Generation <= a.Generation {
		t.Fatalf("takeover: %v %v, %v", b, won, err)
	}
	called := false
	err = s.Fenced(ctx, a.Fence(), func(context.Context, ledger.Store) error { called = true; return nil })
	if !errors.Is(err, ledger.ErrFenced) || called {
		t.Fatalf("a stale generation's write: %v (fn called: %v), want ErrFenced and fn not called", err, called)
	}
	if _, err := s.Renew(ctx, a, 15*time.Second); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("renewing the stale lease: %v, want ErrFenced", err)
	}
}

// TestFencedWriteHoldsOffTakeover: a takeover waits while a fenced write
// of the old generation is under way, so the old leader's writes all come
// before the new leader exists.
func TestFencedWriteHoldsOffTakeover(t *testing.T) {
	url := pgtest.NewSchema(t)
	s, set := withClock(t, url)
	ctx := t.Context()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	set(now)
	a, _, err := s.Elect(ctx, "remote", "a#1", 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	fenced := make(chan error, 1)
	go func() {
		fenced <- s.Fenced(ctx, a.Fence(), func(ctx context.Context, st ledger.Store) error {
			close(inside)
			<-release
			_, err := st.AppendIntent(ctx, ledger.Intent{Key: ledger.Key{Backend: "e2b", ID: "x"}, Step: "delete", At: now})
			return err
		})
	}()
	<-inside
	set(a.ExpiresAt.Add(time.Second)) // expired while the write is under way
	elected := make(chan bool, 1)
	go func() {
		_, won, err := s.Elect(ctx, "remote", "b#1", 15*time.Second)
		if err != nil {
			t.Errorf("Elect: %v", err)
		}
		elected <- won
	}()
	// The takeover must be waiting for the fenced transaction's row lock:
	// the server says so.
	waitFor(t, func() bool {
		var waiting int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM leader_leases%'`).Scan(&waiting)
		return err == nil && waiting > 0
	})
	select {
	case <-elected:
		t.Fatal("the takeover went through while a fenced write of the old generation was under way")
	default:
	}
	close(release)
	if err := <-fenced; err != nil {
		t.Fatalf("the fenced write begun under the lease: %v", err)
	}
	if !<-elected {
		t.Fatal("the takeover did not happen once the fenced write was done")
	}
}

// TestStalledFencedWriteCannotHoldTheLease: a fenced write left idle (its
// process stopped) is ended by PostgreSQL when the lease runs out, so it
// delays a takeover by no more than that; it commits nothing.
func TestStalledFencedWriteCannotHoldTheLease(t *testing.T) {
	s, err := Open(t.Context(), pgtest.NewSchema(t)) // the real clock
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	const ttl = 500 * time.Millisecond
	a, won, err := s.Elect(ctx, "remote", "a#1", ttl)
	if err != nil || !won {
		t.Fatalf("Elect: %v %v", won, err)
	}
	takenOver := make(chan struct{})
	fenced := make(chan error, 1)
	k := ledger.Key{Backend: "e2b", ID: "x"}
	go func() {
		fenced <- s.Fenced(ctx, a.Fence(), func(ctx context.Context, st ledger.Store) error {
			<-takenOver // stalled, idle in its transaction
			_, err := st.AppendIntent(ctx, ledger.Intent{Key: k, Step: "delete", At: time.Now()})
			return err
		})
	}()
	began := time.Now()
	var b leader.Lease
	waitFor(t, func() bool {
		l, won, err := s.Elect(ctx, "remote", "b#1", time.Minute)
		b = l
		return err == nil && won
	})
	if took := time.Since(began); took > 20*ttl {
		t.Errorf("the takeover took %v with a %v lease", took, ttl)
	}
	close(takenOver)
	if err := <-fenced; err == nil {
		t.Fatal("the stalled fenced write committed after the takeover")
	}
	if es, _ := s.ListJournal(ctx, ledger.JournalFilter{Key: k}); len(es) != 0 {
		t.Fatalf("the stalled write left %+v", es)
	}
	if b.Generation <= a.Generation {
		t.Fatalf("generation %d after %d", b.Generation, a.Generation)
	}
}

// waitFor polls a condition of another party (the server) until it holds,
// for up to 30 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
