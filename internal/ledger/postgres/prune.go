package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// PruneJournal implements ledger.Store. Each batch is one transaction:
// the oldest finished entries, then the oldest notices with their delivery
// rows first (a delivery references its notice). Every replica of a fleet
// prunes: SKIP LOCKED lets two prunes at once take disjoint rows instead
// of waiting on (or deadlocking with) each other, and a notice whose
// delivery is being recorded right now is left for the next prune.
func (s *Store) PruneJournal(ctx context.Context, before time.Time) (ledger.JournalPruned, error) {
	var p ledger.JournalPruned
	if before.IsZero() {
		return p, errors.New("prune journal: zero time")
	}
	b := ledger.BoundNanos(before)
	for {
		var batch ledger.JournalPruned
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `DELETE FROM journal WHERE id IN (SELECT id FROM journal
				WHERE result IS NOT NULL AND outcome_at < $1 ORDER BY outcome_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)`,
				b, ledger.PruneBatch)
			if err != nil {
				return err
			}
			batch.Entries = int(tag.RowsAffected())
			rows, err := tx.Query(ctx, `SELECT id FROM notices WHERE at < $1 ORDER BY at, id LIMIT $2 FOR UPDATE SKIP LOCKED`,
				b, ledger.PruneBatch)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil || len(ids) == 0 {
				return err
			}
			if tag, err = tx.Exec(ctx, `DELETE FROM notice_deliveries WHERE notice_id = ANY($1)`, ids); err != nil {
				return err
			}
			batch.Deliveries = int(tag.RowsAffected())
			if tag, err = tx.Exec(ctx, `DELETE FROM notices WHERE id = ANY($1)`, ids); err != nil {
				return err
			}
			batch.Notices = int(tag.RowsAffected())
			return nil
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
