package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// lockIdleTimeout is how long a session holding a runtime lock may sit
// idle in its transaction before PostgreSQL ends it, and the lock with it:
// the bound on how long a stopped or cut-off process keeps a runtime
// locked. Longer than any re-check made under a lock (git's own timeout
// is 60 s).
const lockIdleTimeout = 2 * time.Minute

// unlockTimeout bounds the commit that releases a lock: a caller whose
// context ended must still release it.
const unlockTimeout = 10 * time.Second

// Lock implements ledger.Locker with a transaction-scoped advisory lock
// on the key's hash (pg_try_advisory_xact_lock, or pg_advisory_xact_lock
// bounded by lock_timeout when asked to wait), held by one pooled
// connection until unlock commits the transaction. Every process on every
// host using this database is excluded. The lock and its transaction hold
// no row: a holder's own store calls run on other connections, and see
// what earlier holders committed before they let go.
func (s *Store) Lock(ctx context.Context, key ledger.Key, wait time.Duration) (func() error, error) {
	if s.pool == nil {
		return nil, fmt.Errorf("lock %s: %w", key, errInView)
	}
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	// A slot first: at most half the pool holds locks at once, so the
	// calls a holder makes (and everyone else's) always find a connection.
	select {
	case s.lockSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("lock %s: %w", key, ctx.Err())
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		<-s.lockSlots
		return nil, fmt.Errorf("lock %s: %w", key, err)
	}
	release := func() {
		conn.Release()
		<-s.lockSlots
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		release()
		return nil, fmt.Errorf("lock %s: %w", key, err)
	}
	fail := func(err error) (func() error, error) {
		rctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
		_ = tx.Rollback(rctx)
		cancel()
		release()
		return nil, err
	}
	idle := lockIdleTimeout
	if d, ok := ledger.LockIdle(ctx); ok {
		idle = min(idle, max(d, fenceIdleFloor))
	}
	set := fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", idle.Milliseconds())
	if wait > 0 {
		set += fmt.Sprintf("; SET LOCAL lock_timeout = %d", max(1, wait.Milliseconds()))
	}
	if _, err := tx.Exec(ctx, set); err != nil {
		return fail(fmt.Errorf("lock %s: %w", key, err))
	}
	if wait > 0 {
		_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockID(key))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: lock_timeout ran out
			return fail(fmt.Errorf("lock %s: waited %s: %w", key, wait, ledger.ErrLocked))
		}
		if err != nil {
			return fail(fmt.Errorf("lock %s: %w", key, err))
		}
	} else {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, lockID(key)).Scan(&got); err != nil {
			return fail(fmt.Errorf("lock %s: %w", key, err))
		}
		if !got {
			return fail(fmt.Errorf("lock %s: %w", key, ledger.ErrLocked))
		}
	}
	h := &heldLock{}
	h.end = func(closing bool) {
		uctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
		defer cancel()
		if closing {
			_ = tx.Rollback(uctx)
			h.err = fmt.Errorf("unlock %s: the store was closed while the lock was held", key)
		} else if err := tx.Commit(uctx); err != nil {
			h.err = fmt.Errorf("unlock %s: the lock's session ended while it was held (another holder may have run meanwhile): %w", key, err)
		}
		release()
	}
	s.held.Store(h, true)
	return func() error {
		h.once.Do(func() {
			s.held.Delete(h)
			h.end(false)
		})
		return h.err
	}, nil
}

// heldLock is a lock not yet released: Close releases what callers
// forgot, which would otherwise keep the pool from closing.
type heldLock struct {
	once sync.Once
	end  func(closing bool)
	err  error
}

// releaseHeld ends every lock still held, at Close.
func (s *Store) releaseHeld() {
	s.held.Range(func(k, _ any) bool {
		h := k.(*heldLock)
		h.once.Do(func() {
			s.held.Delete(h)
			h.end(true)
		})
		return true
	})
}
