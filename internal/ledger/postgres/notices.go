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
	err := s.db.QueryRow(ctx, `INSERT INTO notices (`+noticeColumns+`) VALUES (`+placeholders(1, len(args))+`)
		ON CONFLICT (`+keyColumns+`, kind, step, (COALESCE(due, -9223372036854775808)), at, (md5(message))) DO NOTHING
		RETURNING id`, args...).Scan(&id)
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
	query := `SELECT id, ` + noticeColumns + ` FROM notices`
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
	dest := append(append([]any{&n.ID}, keyDest(&n.Key)...), &n.Kind, &n.Step, &due, &at, &n.Message)
	if err := row.Scan(dest...); err != nil {
		return n, err
	}
	n.Due, n.At = fromNanos(due), utc(at)
	return n, nil
}
