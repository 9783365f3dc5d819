package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// ErrNotEmpty: Load was asked to fill a database that holds records.
var ErrNotEmpty = errors.New("the target ledger is not empty")

// loadTables are the tables Load fills, checked empty first.
var loadTables = []string{"runtimes", "activity", "holds", "archives", "notices", "journal"}

// Load writes every record of snap into this store, in one transaction,
// keeping the ids of holds, archives, notices and journal entries (a host
// renewing its hold by id goes on doing so). It refuses a database that
// holds any record (ErrNotEmpty), so a copy is never merged into a fleet's
// ledger by mistake, and a failed copy leaves it empty.
func (s *Store) Load(ctx context.Context, snap *ledger.Snapshot) error {
	if s.pool == nil {
		return fmt.Errorf("load: %w", errInView)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Nobody else writes while the copy runs (a replica started too
		// early waits for it, and then sees the whole copy).
		if _, err := tx.Exec(ctx, `LOCK TABLE `+joinTables()+` IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		for _, t := range loadTables {
			var any bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+t+`)`).Scan(&any); err != nil {
				return err
			}
			if any {
				return fmt.Errorf("%w: its table %s has rows", ErrNotEmpty, t)
			}
		}
		v := s.view(tx)
		for _, r := range snap.Runtimes {
			if err := r.Validate(); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO runtimes (`+keyColumns+`) VALUES ($1, $2, $3)`, keyArgs(r.Key)...); err != nil {
				return fmt.Errorf("runtime %s: %w", r.Key, err)
			}
			if _, err := putRuntime(ctx, tx, r); err != nil {
				return fmt.Errorf("runtime %s: %w", r.Key, err)
			}
		}
		for start := 0; start < len(snap.Activity); start += 5000 {
			if err := v.RecordActivity(ctx, snap.Activity[start:min(start+5000, len(snap.Activity))]); err != nil {
				return err
			}
		}
		for _, h := range snap.Holds {
			if _, err := tx.Exec(ctx, `INSERT INTO holds (id, `+keyColumns+`, holder, taken_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				append(append([]any{h.ID}, keyArgs(h.Key)...), h.Holder, h.TakenAt.UnixNano(), h.ExpiresAt.UnixNano())...); err != nil {
				return fmt.Errorf("hold %s: %w", h.ID, err)
			}
		}
		for _, a := range snap.Archives {
			if err := v.RecordArchive(ctx, a); err != nil {
				return err
			}
		}
		// Copied notices are not owed to any webhook: their deliveries
		// were the old ledger's, which a copy does not carry.
		for _, n := range snap.Notices {
			if _, err := tx.Exec(ctx, `INSERT INTO notices (id, `+keyColumns+`, kind, step, due, at, message, plan_id, archive_id, freed_bytes, outbox)
				OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, false)`,
				append(append([]any{n.ID}, keyArgs(n.Key)...), n.Kind, n.Step, nanos(n.Due), n.At.UnixNano(), n.Message, n.PlanID,
					n.ArchiveID, n.FreedBytes)...); err != nil {
				return fmt.Errorf("notice %d: %w", n.ID, err)
			}
		}
		for _, j := range snap.Journal {
			in := j.Intent
			var result, reason any = nil, ""
			var freed int64
			var at any
			if o := j.Outcome; o != nil {
				result, reason, freed, at = o.Result, o.Reason, o.FreedBytes, o.At.UnixNano()
			}
			if _, err := tx.Exec(ctx, `INSERT INTO journal (id, plan_id, `+keyColumns+`, step, paths, reason, at,
				result, outcome_reason, freed_bytes, outcome_at) OVERRIDING SYSTEM VALUE
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
				append(append([]any{j.ID, in.PlanID}, keyArgs(in.Key)...), in.Step, nilIfEmpty(in.Paths), in.Reason, in.At.UnixNano(),
					result, reason, freed, at)...); err != nil {
				return fmt.Errorf("journal entry %d: %w", j.ID, err)
			}
		}
		// The next notice and journal entry number on from the copied ones.
		for _, t := range []string{"notices", "journal"} {
			if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('`+t+`', 'id'), COALESCE(MAX(id), 0) + 1, false) FROM `+t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load ledger: %w", err)
	}
	return nil
}

func joinTables() string {
	out := ""
	for i, t := range loadTables {
		if i > 0 {
			out += ", "
		}
		out += t
	}
	return out
}
