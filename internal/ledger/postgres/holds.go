package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
	_, err := s.db.Exec(ctx, `INSERT INTO holds (id, `+keyColumns+`, holder, taken_at, expires_at)
		VALUES (`+placeholders(1, keyArity+4)+`)`,
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
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if h, err = getHold(ctx, tx, r.ID, " FOR UPDATE"); err != nil {
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
		_, err = tx.Exec(ctx, `UPDATE holds SET expires_at = $1 WHERE id = $2`, h.ExpiresAt.UnixNano(), h.ID)
		return err
	})
	if err != nil {
		return ledger.Hold{}, fmt.Errorf("renew hold on %s: %w", r.Key, err)
	}
	return h, nil
}

const holdColumns = `id, ` + keyColumns + `, holder, taken_at, expires_at`

func getHold(ctx context.Context, q querier, id, lock string) (ledger.Hold, error) {
	h, err := scanHold(q.QueryRow(ctx, `SELECT `+holdColumns+` FROM holds WHERE id = $1`+lock, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return h, fmt.Errorf("hold %s: %w", id, ledger.ErrNotFound)
	}
	return h, err
}

func scanHold(row pgx.Row) (ledger.Hold, error) {
	var (
		h                  ledger.Hold
		takenAt, expiresAt int64
	)
	dest := append(append([]any{&h.ID}, keyDest(&h.Key)...), &h.Holder, &takenAt, &expiresAt)
	if err := row.Scan(dest...); err != nil {
		return h, err
	}
	h.TakenAt, h.ExpiresAt = utc(takenAt), utc(expiresAt)
	return h, nil
}

// ReleaseHold implements ledger.Store.
func (s *Store) ReleaseHold(ctx context.Context, key ledger.Key, id string) error {
	if err := key.Validate(); err != nil {
		return fmt.Errorf("release hold: %w", err)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		h, err := getHold(ctx, tx, id, " FOR UPDATE")
		if errors.Is(err, ledger.ErrNotFound) {
			return nil // already released or pruned: the caller's wish holds
		}
		if err != nil {
			return err
		}
		if h.Key != key {
			return fmt.Errorf("hold %s belongs to %s: %w", id, h.Key, ledger.ErrConflict)
		}
		_, err = tx.Exec(ctx, `DELETE FROM holds WHERE id = $1`, id)
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
	query := `SELECT ` + holdColumns + ` FROM holds WHERE expires_at > $1`
	args := []any{ledger.BoundNanos(f.Now)}
	if !f.Key.IsZero() {
		query += ` AND ` + keyEquals(2)
		args = append(args, keyArgs(f.Key)...)
	}
	query += ` ORDER BY ` + keyOrder + `, expires_at, id`
	out, err := collect(ctx, s.db, scanHold, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	return out, nil
}

// PruneHolds implements ledger.Store.
func (s *Store) PruneHolds(ctx context.Context, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, errors.New("prune holds: zero time")
	}
	tag, err := s.db.Exec(ctx, `DELETE FROM holds WHERE expires_at <= $1`, ledger.BoundNanos(before))
	if err != nil {
		return 0, fmt.Errorf("prune holds: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
