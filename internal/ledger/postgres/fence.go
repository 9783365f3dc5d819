package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// fenceSQL checks, at the start of a fenced transaction, that the lease
// still holds the generation by the database's clock, and locks the row
// FOR KEY SHARE: a takeover (which deletes the row) waits until the
// transaction ends, while the holder's own renewals (which change only
// expires_at) go on. It also bounds how long the transaction may sit idle
// to what is left of the lease (at least fenceIdleFloor, so that a write
// begun just before the expiry is not cut between two statements): a
// leader stopped in the middle (SIGSTOP, a partition) is cut off by
// PostgreSQL when its lease runs out, and cannot delay a takeover by more
// than that.
const fenceSQL = `
SELECT set_config('idle_in_transaction_session_timeout',
	GREATEST($3::bigint, (expires_at - reclaimer_clock()) / 1000000)::text, true)
FROM leader_leases
WHERE name = $1 AND generation = $2 AND expires_at > reclaimer_clock()
FOR KEY SHARE`

// fenceIdleFloor is the least idle time a fenced transaction is allowed.
const fenceIdleFloor = time.Second

// Fenced implements ledger.Fencer.
func (s *Store) Fenced(ctx context.Context, f ledger.Fence, fn func(ctx context.Context, st ledger.Store) error) error {
	if s.pool == nil {
		return fmt.Errorf("fenced write: %w", errInView)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var set string
		if err := tx.QueryRow(ctx, fenceSQL, f.Lease, f.Generation, fenceIdleFloor.Milliseconds()).Scan(&set); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ledger.ErrFenced
			}
			return err
		}
		return fn(ctx, s.view(tx))
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "25P03" { // idle_in_transaction_session_timeout
		err = fmt.Errorf("the lease ran out while the transaction was open (%s): %w", pgErr.Message, ledger.ErrFenced)
	}
	if err != nil {
		return fmt.Errorf("write under lease %s generation %d: %w", f.Lease, f.Generation, err)
	}
	return nil
}
