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

// AppendIntent implements ledger.Store.
func (s *Store) AppendIntent(ctx context.Context, in ledger.Intent) (int64, error) {
	if err := in.Validate(); err != nil {
		return 0, fmt.Errorf("append intent: %w", err)
	}
	paths, err := jsonList(in.Paths)
	if err != nil {
		return 0, fmt.Errorf("append intent for %s: %w", in.Key, err)
	}
	res, err := s.write.ExecContext(ctx, `INSERT INTO journal (plan_id, `+keyColumns+`, step, paths, reason, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		append(append([]any{in.PlanID}, keyArgs(in.Key)...), in.Step, paths, in.Reason, in.At.UnixNano())...)
	if err != nil {
		return 0, fmt.Errorf("append intent for %s: %w", in.Key, err)
	}
	id, err := res.LastInsertId()
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
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		var (
			result, reason sql.NullString
			freed          int64
		)
		err := tx.QueryRowContext(ctx, `SELECT result, outcome_reason, freed_bytes FROM journal WHERE id = ?`, id).
			Scan(&result, &reason, &freed)
		if errors.Is(err, sql.ErrNoRows) {
			return ledger.ErrNotFound
		}
		if err != nil {
			return err
		}
		if result.Valid { // already finished
			// A retry may carry a later time; the first one stays.
			same := result.String == out.Result && reason.String == out.Reason && freed == out.FreedBytes
			if same {
				return nil
			}
			// The first outcome is what happened; a second opinion (a
			// recovery that did not know the action finished) must not
			// rewrite history.
			return fmt.Errorf("already finished as %s: %w", result.String, ledger.ErrConflict)
		}
		_, err = tx.ExecContext(ctx, `UPDATE journal SET result = ?, outcome_reason = ?, freed_bytes = ?, outcome_at = ? WHERE id = ?`,
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

func scanJournalEntry(row rowScanner) (ledger.JournalEntry, error) {
	var (
		e         ledger.JournalEntry
		paths     sql.NullString
		at        int64
		result    sql.NullString
		reason    string
		freed     int64
		outcomeAt sql.NullInt64
	)
	in := &e.Intent
	if err := row.Scan(append(append([]any{&e.ID, &in.PlanID}, keyDest(&in.Key)...), &in.Step, &paths, &in.Reason, &at,
		&result, &reason, &freed, &outcomeAt)...); err != nil {
		return e, err
	}
	var err error
	if in.Paths, err = fromJSONStrings(paths); err != nil {
		return e, fmt.Errorf("decode paths of entry %d: %w", e.ID, err)
	}
	in.At = time.Unix(0, at).UTC()
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
		where = append(where, "plan_id = ?")
		args = append(args, f.PlanID)
	}
	if !f.Key.IsZero() {
		where = append(where, keyMatch)
		args = append(args, keyArgs(f.Key)...)
	}
	if f.Before > 0 {
		where = append(where, "id < ?")
		args = append(args, f.Before)
	}
	query := `SELECT ` + journalColumns + ` FROM journal`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY id DESC`
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
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
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ledger.JournalEntry
	for rows.Next() {
		e, err := scanJournalEntry(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
