package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// The WHERE keeps the newest time: a late or repeated report is a no-op.
const recordActivitySQL = `
INSERT INTO activity (` + keyColumns + `, at) VALUES (?, ?, ?, ?)
ON CONFLICT (` + keyColumns + `) DO UPDATE SET at = excluded.at
WHERE excluded.at > activity.at`

// RecordActivity implements ledger.Store.
func (s *Store) RecordActivity(ctx context.Context, batch []ledger.Activity) error {
	for _, a := range batch {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("record activity: %w", err)
		}
	}
	if len(batch) == 0 {
		return nil
	}
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, recordActivitySQL)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, a := range batch {
			if _, err := stmt.ExecContext(ctx, withKey(a.Key, a.At.UnixNano())...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record activity: %w", err)
	}
	return nil
}

// LastActivity implements ledger.Store.
func (s *Store) LastActivity(ctx context.Context, key ledger.Key) (time.Time, error) {
	var at int64
	err := s.read.QueryRowContext(ctx, `SELECT at FROM activity WHERE `+keyMatch, keyArgs(key)...).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		err = ledger.ErrNotFound
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("get activity of %s: %w", key, err)
	}
	return time.Unix(0, at).UTC(), nil
}

// ActivityTimes implements ledger.Store.
func (s *Store) ActivityTimes(ctx context.Context) (map[ledger.Key]time.Time, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+keyColumns+`, at FROM activity`)
	if err != nil {
		return nil, fmt.Errorf("list activity: %w", err)
	}
	defer rows.Close()
	out := make(map[ledger.Key]time.Time)
	for rows.Next() {
		var (
			k  ledger.Key
			at int64
		)
		if err := rows.Scan(append(keyDest(&k), &at)...); err != nil {
			return nil, fmt.Errorf("list activity: %w", err)
		}
		out[k] = time.Unix(0, at).UTC()
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list activity: %w", err)
	}
	return out, nil
}
