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
		res, err := tx.ExecContext(ctx, `INSERT INTO notices (`+keyColumns+`, kind, step, due, at, message, plan_id, archive_id, freed_bytes)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			withKey(n.Key, n.Kind, n.Step, nanos(n.Due), n.At.UnixNano(), n.Message, n.PlanID, n.ArchiveID, n.FreedBytes)...)
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
	query := `SELECT id, ` + keyColumns + `, kind, step, due, at, message, plan_id, archive_id, freed_bytes FROM notices`
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
		if err := rows.Scan(append(append([]any{&n.ID}, keyDest(&n.Key)...), &n.Kind, &n.Step, &due, &at, &n.Message, &n.PlanID,
			&n.ArchiveID, &n.FreedBytes)...); err != nil {
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

// PendingNotices implements ledger.Store.
func (s *Store) PendingNotices(ctx context.Context, f ledger.PendingFilter) ([]ledger.PendingNotice, error) {
	if f.Hook == "" {
		return nil, errors.New("list pending notices: empty webhook name")
	}
	if f.Sources != nil && len(f.Sources) == 0 {
		return nil, nil
	}
	where := []string{"n.outbox = 1", "d.delivered_at IS NULL", "d.gave_up_at IS NULL", "n.id > ?"}
	args := []any{f.Hook, f.After}
	if !f.Since.IsZero() {
		where = append(where, "n.at >= ?")
		args = append(args, ledger.BoundNanos(f.Since))
	}
	in := func(col string, vals []string) {
		where = append(where, col+" IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ")+")")
		for _, v := range vals {
			args = append(args, v)
		}
	}
	if len(f.Kinds) > 0 {
		in("n.kind", f.Kinds)
	}
	if f.Sources != nil {
		in("n.source", f.Sources)
	}
	query := `SELECT n.id, n.backend, n.source, n.runtime_id, n.kind, n.step, n.due, n.at, n.message, n.plan_id, n.archive_id,
		n.freed_bytes, COALESCE(d.attempts, 0)
		FROM notices n LEFT JOIN notice_deliveries d ON d.notice_id = n.id AND d.hook = ?
		WHERE ` + strings.Join(where, " AND ") + ` ORDER BY n.id`
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list pending notices: %w", err)
	}
	defer rows.Close()
	var out []ledger.PendingNotice
	for rows.Next() {
		var (
			p   ledger.PendingNotice
			due sql.NullInt64
			at  int64
		)
		if err := rows.Scan(append(append([]any{&p.ID}, keyDest(&p.Key)...), &p.Kind, &p.Step, &due, &at, &p.Message, &p.PlanID,
			&p.ArchiveID, &p.FreedBytes, &p.Attempts)...); err != nil {
			return nil, fmt.Errorf("list pending notices: %w", err)
		}
		p.Due = fromNanos(due)
		p.At = time.Unix(0, at).UTC()
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list pending notices: %w", err)
	}
	return out, nil
}

// RecordDelivery implements ledger.Store.
func (s *Store) RecordDelivery(ctx context.Context, d ledger.NoticeDelivery) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("record delivery: %w", err)
	}
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM notices WHERE id = ?`, d.NoticeID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("notice %d: %w", d.NoticeID, ledger.ErrNotFound)
		} else if err != nil {
			return err
		}
		// A delivery that ended (delivered, given up) stays as it ended:
		// a late report of an earlier round cannot make it owed again.
		_, err = tx.ExecContext(ctx, `INSERT INTO notice_deliveries
			(notice_id, hook, attempts, delivered_at, gave_up_at, last_error, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (notice_id, hook) DO UPDATE SET attempts = excluded.attempts, delivered_at = excluded.delivered_at,
				gave_up_at = excluded.gave_up_at, last_error = excluded.last_error, updated_at = excluded.updated_at
			WHERE notice_deliveries.delivered_at IS NULL AND notice_deliveries.gave_up_at IS NULL`,
			d.NoticeID, d.Hook, d.Attempts, nanos(d.Delivered), nanos(d.GaveUp), d.LastError, d.At.UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("record delivery of notice %d to %s: %w", d.NoticeID, d.Hook, err)
	}
	return nil
}
