package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

var _ ledger.Adopter = (*Store)(nil)

// adoptSQL moves a legacy key (source ”) to its source, table by table,
// in the order the statements are run. The runtime's record moves only
// when the key has none yet; activity keeps the newer time of the two; the
// rows of the other tables are many per runtime and simply change key. When
// the first statement moves nothing (no legacy record, or the key has a
// record of its own), the others are not run.
var adoptSQL = []string{
	`UPDATE runtimes SET source = ?3 WHERE backend = ?1 AND source = '' AND runtime_id = ?2
		AND NOT EXISTS (SELECT 1 FROM runtimes WHERE backend = ?1 AND source = ?3 AND runtime_id = ?2)`,
	`INSERT INTO activity (` + keyColumns + `, at)
		SELECT backend, ?3, runtime_id, at FROM activity WHERE backend = ?1 AND source = '' AND runtime_id = ?2
		ON CONFLICT (` + keyColumns + `) DO UPDATE SET at = max(activity.at, excluded.at)`,
	`DELETE FROM activity WHERE backend = ?1 AND source = '' AND runtime_id = ?2`,
	`UPDATE holds SET source = ?3 WHERE backend = ?1 AND source = '' AND runtime_id = ?2`,
	`UPDATE archives SET source = ?3 WHERE backend = ?1 AND source = '' AND runtime_id = ?2`,
	`UPDATE notices SET source = ?3 WHERE backend = ?1 AND source = '' AND runtime_id = ?2`,
	`UPDATE journal SET source = ?3 WHERE backend = ?1 AND source = '' AND runtime_id = ?2`,
}

// AdoptLegacy implements ledger.Adopter: the records a schema-1 file held
// are keyed with an empty source until a pass finds which source lists
// them.
func (s *Store) AdoptLegacy(ctx context.Context, keys []ledger.Key) (int, error) {
	for _, k := range keys {
		if err := k.Validate(); err != nil || k.Source == "" {
			return 0, fmt.Errorf("adopt legacy records: key %s has no source", k.Unique())
		}
	}
	moved := 0
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		moved = 0
		for _, k := range keys {
			for i, q := range adoptSQL {
				res, err := tx.ExecContext(ctx, q, k.Backend, k.ID, k.Source)
				if err != nil {
					return fmt.Errorf("adopt %s: %w", k.Unique(), err)
				}
				if i == 0 {
					if n, err := res.RowsAffected(); err != nil || n == 0 {
						break // no legacy record, or the key has its own: nothing moves
					}
					moved++
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("adopt legacy records: %w", err)
	}
	return moved, nil
}
