package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// AppendIntent implements ledger.Store.
func (s *Store) AppendIntent(ctx context.Context, in ledger.Intent) (int64, error) {
	if err := in.Validate(); err != nil {
		return 0, fmt.Errorf("append intent: %w", err)
	}
	args := append(append([]any{in.PlanID}, keyArgs(in.Key)...), in.Step, nilIfEmpty(in.Paths), in.Reason, in.At.UnixNano())
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO journal (plan_id, `+keyColumns+`, step, paths, reason, at)
		VALUES (`+placeholders(1, len(args))+`) RETURNING id`, args...).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("append intent for %s: %w", in.Key, err)
	}
	return id, nil
}

// RecordOutcome implements ledger.Store.
func (s *Store) RecordOutcome(ctx context.Context, id int64, out ledger.Outcome) error {
	if err := out.Validate(); err != nil {
		return fmt.Errorf("record outcome of entry %d: %w", id, err)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var (
			result pgtype.Text
			reason string
			freed  int64
		)
		err := tx.QueryRow(ctx, `SELECT result, outcome_reason, freed_bytes FROM journal WHERE id = $1 FOR UPDATE`, id).
			Scan(&result, &reason, &freed)
		if err != nil {
			return notFound(err)
		}
		if result.Valid { // already finished
			// A retry may carry a later time; the first one stays.
			if result.String == out.Result && reason == out.Reason && freed == out.FreedBytes {
				return nil
			}
			// The first outcome is what happened; a second opinion (a
			// recovery that did not know the action finished) must not
			// rewrite history.
			return fmt.Errorf("already finished as %s: %w", result.String, ledger.ErrConflict)
		}
		_, err = tx.Exec(ctx, `UPDATE journal SET result = $1, outcome_reason = $2, freed_bytes = $3, outcome_at = $4 WHERE id = $5`,
			out.Result, out.Reason, out.FreedBytes, out.At.UnixNano(), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("record outcome of entry %d: %w", id, err)
	}
	return nil
}

const journalColumns = `id, plan_id, ` + keyColumns + `, step, paths, reason, at,
	result, outcome_reason, freed_bytes, outcome_at`

func scanJournalEntry(row pgx.Row) (ledger.JournalEntry, error) {
	var (
		e         ledger.JournalEntry
		at        int64
		result    pgtype.Text
		reason    string
		freed     int64
		outcomeAt pgtype.Int8
	)
	in := &e.Intent
	dest := append(append([]any{&e.ID, &in.PlanID}, keyDest(&in.Key)...), &in.Step, &in.Paths, &in.Reason, &at,
		&result, &reason, &freed, &outcomeAt)
	if err := row.Scan(dest...); err != nil {
		return e, err
	}
	in.At = utc(at)
	if result.Valid {
		e.Outcome = &ledger.Outcome{Result: result.String, Reason: reason, FreedBytes: freed, At: fromNanos(outcomeAt)}
	}
	return e, nil
}

// ListJournal implements ledger.Store.
func (s *Store) ListJournal(ctx context.Context, f ledger.JournalFilter) ([]ledger.JournalEntry, error) {
	var (
		where []string
		args  []any
	)
	if f.PlanID != "" {
		args = append(args, f.PlanID)
		where = append(where, fmt.Sprintf("plan_id = $%d", len(args)))
	}
	if !f.Key.IsZero() {
		where = append(where, keyEquals(len(args)+1))
		args = append(args, keyArgs(f.Key)...)
	}
	if f.Before > 0 {
		args = append(args, f.Before)
		where = append(where, fmt.Sprintf("id < $%d", len(args)))
	}
	query := `SELECT ` + journalColumns + ` FROM journal`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY id DESC`
	if f.Limit > 0 {
		args = append(args, f.Limit)
		query += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	entries, err := s.queryJournal(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list journal: %w", err)
	}
	return entries, nil
}

// Unfinished implements ledger.Store.
func (s *Store) Unfinished(ctx context.Context) ([]ledger.JournalEntry, error) {
	entries, err := s.queryJournal(ctx, `SELECT `+journalColumns+` FROM journal WHERE result IS NULL ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list unfinished journal entries: %w", err)
	}
	return entries, nil
}

func (s *Store) queryJournal(ctx context.Context, query string, args ...any) ([]ledger.JournalEntry, error) {
	return collect(ctx, s.db, scanJournalEntry, query, args...)
}
