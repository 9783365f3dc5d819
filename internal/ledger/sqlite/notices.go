package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// RecordNotice implements ledger.Store.
func (s *Store) RecordNotice(ctx context.Context, n ledger.Notice) (int64, error) {
	if err := n.Validate(); err != nil {
		return 0, fmt.Errorf("record notice: %w", err)
	}
	var id int64
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		// An identical notice is the same announcement recorded twice (a
		// pass retried after a crash): return the first. "IS" compares
		// NULL due times as equal, which "=" would not.
		err := tx.QueryRowContext(ctx, `SELECT id FROM notices
			WHERE `+keyMatch+` AND kind = ? AND step = ? AND due IS ? AND at = ? AND message = ?
			ORDER BY id LIMIT 1`,
			withKey(n.Key, n.Kind, n.Step, nanos(n.Due), n.At.UnixNano(), n.Message)...).Scan(&id)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO notices (`+keyColumns+`, kind, step, due, at, message)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			withKey(n.Key, n.Kind, n.Step, nanos(n.Due), n.At.UnixNano(), n.Message)...)
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record notice for %s: %w", n.Key, err)
	}
	return id, nil
}

// ListNotices implements ledger.Store.
func (s *Store) ListNotices(ctx context.Context, f ledger.NoticeFilter) ([]ledger.Notice, error) {
	var (
		where []string
		args  []any
	)
	if !f.Key.IsZero() {
		where = append(where, keyMatch)
		args = append(args, keyArgs(f.Key)...)
	}
	if !f.Since.IsZero() {
		where = append(where, "at >= ?")
		args = append(args, ledger.BoundNanos(f.Since))
	}
	query := `SELECT id, ` + keyColumns + `, kind, step, due, at, message FROM notices`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY at, id`
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list notices: %w", err)
	}
	defer rows.Close()
	var out []ledger.Notice
	for rows.Next() {
		var (
			n   ledger.Notice
			due sql.NullInt64
			at  int64
		)
		if err := rows.Scan(append(append([]any{&n.ID}, keyDest(&n.Key)...), &n.Kind, &n.Step, &due, &at, &n.Message)...); err != nil {
			return nil, fmt.Errorf("list notices: %w", err)
		}
		n.Due = fromNanos(due)
		n.At = time.Unix(0, at).UTC()
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list notices: %w", err)
	}
	return out, nil
}
