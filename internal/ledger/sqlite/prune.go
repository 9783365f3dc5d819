package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// PruneJournal implements ledger.Store. Each batch is one write
// transaction: the oldest finished entries, then the oldest notices with
// their delivery rows first (a delivery references its notice). The two
// notice statements pick the same rows: nothing else writes while the
// transaction holds SQLite's write lock.
func (s *Store) PruneJournal(ctx context.Context, before time.Time) (ledger.JournalPruned, error) {
	var p ledger.JournalPruned
	if before.IsZero() {
		return p, errors.New("prune journal: zero time")
	}
	b := ledger.BoundNanos(before)
	for {
		var batch ledger.JournalPruned
		err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
			var err error
			if batch.Entries, err = execCount(ctx, tx, `DELETE FROM journal WHERE id IN (SELECT id FROM journal
				WHERE result IS NOT NULL AND outcome_at < ? ORDER BY outcome_at, id LIMIT ?)`, b, ledger.PruneBatch); err != nil {
				return err
			}
			const oldest = `SELECT id FROM notices WHERE at < ? ORDER BY at, id LIMIT ?`
			if batch.Deliveries, err = execCount(ctx, tx, `DELETE FROM notice_deliveries WHERE notice_id IN (`+oldest+`)`,
				b, ledger.PruneBatch); err != nil {
				return err
			}
			batch.Notices, err = execCount(ctx, tx, `DELETE FROM notices WHERE id IN (`+oldest+`)`, b, ledger.PruneBatch)
			return err
		})
		if err != nil {
			return p, fmt.Errorf("prune journal: %w", err)
		}
		p.Entries += batch.Entries
		p.Notices += batch.Notices
		p.Deliveries += batch.Deliveries
		if batch.Entries < ledger.PruneBatch && batch.Notices < ledger.PruneBatch {
			return p, nil
		}
	}
}

// execCount runs a statement in tx and returns how many rows it changed.
func execCount(ctx context.Context, tx *sql.Tx, query string, args ...any) (int, error) {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
