package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// TakeHold implements ledger.Store.
func (s *Store) TakeHold(ctx context.Context, req ledger.HoldRequest) (ledger.Hold, error) {
	if err := req.Validate(); err != nil {
		return ledger.Hold{}, fmt.Errorf("take hold: %w", err)
	}
	h := ledger.Hold{
		// 128 random bits: ids are handed to other hosts, which must not be
		// able to guess a hold they did not take.
		ID:        "h_" + rand.Text(),
		Key:       req.Key,
		Holder:    req.Holder,
		TakenAt:   req.Now.UTC(),
		ExpiresAt: req.Now.Add(req.TTL).UTC(),
	}
	_, err := s.write.ExecContext(ctx, `INSERT INTO holds (id, `+keyColumns+`, holder, taken_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		append(append([]any{h.ID}, keyArgs(h.Key)...), h.Holder, h.TakenAt.UnixNano(), h.ExpiresAt.UnixNano())...)
	if err != nil {
		return ledger.Hold{}, fmt.Errorf("take hold on %s: %w", req.Key, err)
	}
	return h, nil
}

// RenewHold implements ledger.Store.
func (s *Store) RenewHold(ctx context.Context, r ledger.HoldRenewal) (ledger.Hold, error) {
	if err := r.Validate(); err != nil {
		return ledger.Hold{}, fmt.Errorf("renew hold: %w", err)
	}
	var h ledger.Hold
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		var err error
		h, err = getHold(ctx, tx, r.ID)
		if err != nil {
			return err
		}
		if h.Key != r.Key {
			return fmt.Errorf("hold %s belongs to %s: %w", r.ID, h.Key, ledger.ErrConflict)
		}
		if !h.ActiveAt(r.Now) {
			// Expired is gone: another pass may already have acted on the
			// runtime, so reviving the hold would promise what it cannot.
			return fmt.Errorf("hold %s expired at %s: %w", r.ID, h.ExpiresAt.Format(time.RFC3339Nano), ledger.ErrNotFound)
		}
		h.ExpiresAt = r.Now.Add(r.TTL).UTC()
		_, err = tx.ExecContext(ctx, `UPDATE holds SET expires_at = ? WHERE id = ?`, h.ExpiresAt.UnixNano(), h.ID)
		return err
	})
	if err != nil {
		return ledger.Hold{}, fmt.Errorf("renew hold on %s: %w", r.Key, err)
	}
	return h, nil
}

func getHold(ctx context.Context, q querier, id string) (ledger.Hold, error) {
	h, err := scanHold(q.QueryRowContext(ctx, `SELECT `+holdColumns+` FROM holds WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return h, fmt.Errorf("hold %s: %w", id, ledger.ErrNotFound)
	}
	return h, err
}

const holdColumns = `id, ` + keyColumns + `, holder, taken_at, expires_at`

func scanHold(row rowScanner) (ledger.Hold, error) {
	var (
		h                  ledger.Hold
		takenAt, expiresAt int64
	)
	if err := row.Scan(append(append([]any{&h.ID}, keyDest(&h.Key)...), &h.Holder, &takenAt, &expiresAt)...); err != nil {
		return h, err
	}
	h.TakenAt = time.Unix(0, takenAt).UTC()
	h.ExpiresAt = time.Unix(0, expiresAt).UTC()
	return h, nil
}

// ReleaseHold implements ledger.Store.
func (s *Store) ReleaseHold(ctx context.Context, key ledger.Key, id string) error {
	if err := key.Validate(); err != nil {
		return fmt.Errorf("release hold: %w", err)
	}
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		h, err := getHold(ctx, tx, id)
		if errors.Is(err, ledger.ErrNotFound) {
			return nil // already released or pruned: the caller's wish holds
		}
		if err != nil {
			return err
		}
		if h.Key != key {
			return fmt.Errorf("hold %s belongs to %s: %w", id, h.Key, ledger.ErrConflict)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM holds WHERE id = ?`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("release hold on %s: %w", key, err)
	}
	return nil
}

// ListHolds implements ledger.Store.
func (s *Store) ListHolds(ctx context.Context, f ledger.HoldFilter) ([]ledger.Hold, error) {
	if f.Now.IsZero() {
		return nil, errors.New("list holds: zero time")
	}
	query := `SELECT ` + holdColumns + ` FROM holds WHERE expires_at > ?`
	args := []any{ledger.BoundNanos(f.Now)}
	if !f.Key.IsZero() {
		query += ` AND ` + keyMatch
		args = append(args, keyArgs(f.Key)...)
	}
	query += ` ORDER BY ` + keyOrder + `, expires_at, id`
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	defer rows.Close()
	var out []ledger.Hold
	for rows.Next() {
		h, err := scanHold(rows)
		if err != nil {
			return nil, fmt.Errorf("list holds: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	return out, nil
}

// PruneHolds implements ledger.Store.
func (s *Store) PruneHolds(ctx context.Context, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, errors.New("prune holds: zero time")
	}
	res, err := s.write.ExecContext(ctx, `DELETE FROM holds WHERE expires_at <= ?`, ledger.BoundNanos(before))
	if err != nil {
		return 0, fmt.Errorf("prune holds: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune holds: %w", err)
	}
	return int(n), nil
}
