package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// noticeColumns are what identifies a notice: an identical one recorded
// again is the same notice (the unique index notices_identical).
const noticeColumns = keyColumns + `, kind, step, due, at, message`

// RecordNotice implements ledger.Store.
func (s *Store) RecordNotice(ctx context.Context, n ledger.Notice) (int64, error) {
	if err := n.Validate(); err != nil {
		return 0, fmt.Errorf("record notice: %w", err)
	}
	args := append(keyArgs(n.Key), n.Kind, n.Step, nanos(n.Due), n.At.UnixNano(), n.Message)
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO notices (`+noticeColumns+`, plan_id, archive_id, freed_bytes) VALUES (`+placeholders(1, len(args)+3)+`)
		ON CONFLICT (`+keyColumns+`, kind, step, (COALESCE(due, -9223372036854775808)), at, (md5(message))) DO NOTHING
		RETURNING id`, append(args, n.PlanID, n.ArchiveID, n.FreedBytes)...).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		// Recorded before (a retried pass, on this replica or another):
		// the first one's id. A statement of its own, so that it sees a
		// row another transaction committed while the insert waited.
		p := keyArity
		err = s.db.QueryRow(ctx, `SELECT id FROM notices WHERE `+keyEquals(1)+fmt.Sprintf(
			` AND kind = $%d AND step = $%d AND due IS NOT DISTINCT FROM $%d::bigint AND at = $%d AND message = $%d`,
			p+1, p+2, p+3, p+4, p+5), args...).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			err = errors.New("another notice has the same digest") // an md5 collision of messages
		}
	}
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
		where = append(where, keyEquals(len(args)+1))
		args = append(args, keyArgs(f.Key)...)
	}
	if !f.Since.IsZero() {
		args = append(args, ledger.BoundNanos(f.Since))
		where = append(where, fmt.Sprintf("at >= $%d", len(args)))
	}
	query := `SELECT id, ` + noticeColumns + `, plan_id, archive_id, freed_bytes FROM notices`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY at, id`
	if f.Limit > 0 {
		args = append(args, f.Limit)
		query += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	out, err := collect(ctx, s.db, scanNotice, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list notices: %w", err)
	}
	return out, nil
}

func scanNotice(row pgx.Row) (ledger.Notice, error) {
	var (
		n   ledger.Notice
		due pgtype.Int8
		at  int64
	)
	dest := append(append([]any{&n.ID}, keyDest(&n.Key)...), &n.Kind, &n.Step, &due, &at, &n.Message, &n.PlanID, &n.ArchiveID, &n.FreedBytes)
	if err := row.Scan(dest...); err != nil {
		return n, err
	}
	n.Due, n.At = fromNanos(due), utc(at)
	return n, nil
}

// PendingNotices implements ledger.Store.
func (s *Store) PendingNotices(ctx context.Context, f ledger.PendingFilter) ([]ledger.PendingNotice, error) {
	if f.Hook == "" {
		return nil, errors.New("list pending notices: empty webhook name")
	}
	if f.Sources != nil && len(f.Sources) == 0 {
		return nil, nil
	}
	args := []any{f.Hook, f.After}
	where := []string{"n.outbox", "d.delivered_at IS NULL", "d.gave_up_at IS NULL", "n.id > $2"}
	if !f.Since.IsZero() {
		args = append(args, ledger.BoundNanos(f.Since))
		where = append(where, fmt.Sprintf("n.at >= $%d", len(args)))
	}
	if len(f.Kinds) > 0 {
		args = append(args, f.Kinds)
		where = append(where, fmt.Sprintf("n.kind = ANY($%d)", len(args)))
	}
	if f.Sources != nil {
		args = append(args, f.Sources)
		where = append(where, fmt.Sprintf("n.source = ANY($%d)", len(args)))
	}
	query := `SELECT n.id, n.backend, n.source, n.runtime_id, n.kind, n.step, n.due, n.at, n.message, n.plan_id, n.archive_id,
		n.freed_bytes, COALESCE(d.attempts, 0)
		FROM notices n LEFT JOIN notice_deliveries d ON d.notice_id = n.id AND d.hook = $1
		WHERE ` + strings.Join(where, " AND ") + ` ORDER BY n.id`
	if f.Limit > 0 {
		args = append(args, f.Limit)
		query += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	out, err := collect(ctx, s.db, func(row pgx.Row) (ledger.PendingNotice, error) {
		var (
			p   ledger.PendingNotice
			due pgtype.Int8
			at  int64
		)
		err := row.Scan(append(append([]any{&p.ID}, keyDest(&p.Key)...), &p.Kind, &p.Step, &due, &at, &p.Message, &p.PlanID,
			&p.ArchiveID, &p.FreedBytes, &p.Attempts)...)
		p.Due, p.At = fromNanos(due), utc(at)
		return p, err
	}, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list pending notices: %w", err)
	}
	return out, nil
}

// RecordDelivery implements ledger.Store.
func (s *Store) RecordDelivery(ctx context.Context, d ledger.NoticeDelivery) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("record delivery: %w", err)
	}
	// A delivery that ended (delivered, given up) stays as it ended: a
	// late report of an earlier round, or of another replica, cannot make
	// it owed again. One statement: it sees what another replica's
	// transaction committed while it waited.
	tag, err := s.db.Exec(ctx, `INSERT INTO notice_deliveries
		(notice_id, hook, attempts, delivered_at, gave_up_at, last_error, updated_at)
		SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM notices WHERE id = $1)
		ON CONFLICT (notice_id, hook) DO UPDATE SET attempts = excluded.attempts, delivered_at = excluded.delivered_at,
			gave_up_at = excluded.gave_up_at, last_error = excluded.last_error, updated_at = excluded.updated_at
		WHERE notice_deliveries.delivered_at IS NULL AND notice_deliveries.gave_up_at IS NULL`,
		d.NoticeID, d.Hook, d.Attempts, nanos(d.Delivered), nanos(d.GaveUp), d.LastError, d.At.UnixNano())
	if err == nil && tag.RowsAffected() == 0 {
		var one int
		if err = s.db.QueryRow(ctx, `SELECT 1 FROM notices WHERE id = $1`, d.NoticeID).Scan(&one); errors.Is(err, pgx.ErrNoRows) {
			err = fmt.Errorf("notice %d: %w", d.NoticeID, ledger.ErrNotFound)
		}
	}
	if err != nil {
		return fmt.Errorf("record delivery of notice %d to %s: %w", d.NoticeID, d.Hook, err)
	}
	return nil
}
