package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// RecordUsage implements ledger.Store.
func (s *Store) RecordUsage(ctx context.Context, samples []ledger.UsageSample) error {
	for _, u := range samples {
		if err := u.Validate(); err != nil {
			return fmt.Errorf("record usage: %w", err)
		}
	}
	if len(samples) == 0 {
		return nil
	}
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO usage_samples
			(host, path, at, used_bytes, avail_bytes, total_bytes, reclaimable) VALUES (?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, u := range samples {
			var rec sql.NullString
			if len(u.ReclaimableBytes) > 0 {
				if rec, err = marshalText(u.ReclaimableBytes); err != nil {
					return err
				}
			}
			if _, err := stmt.ExecContext(ctx, u.Host, u.Path, u.At.UnixNano(), u.UsedBytes, u.AvailBytes, u.TotalBytes, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	return nil
}

// ListUsage implements ledger.Store.
func (s *Store) ListUsage(ctx context.Context, f ledger.UsageFilter) ([]ledger.UsageSample, error) {
	var (
		where []string
		args  []any
	)
	if !f.AnyHost {
		where = append(where, "host = ?")
		args = append(args, f.Host)
	}
	if f.Path != "" {
		where = append(where, "path = ?")
		args = append(args, f.Path)
	}
	if !f.Since.IsZero() {
		where = append(where, "at >= ?")
		args = append(args, ledger.BoundNanos(f.Since))
	}
	query := `SELECT host, path, at, used_bytes, avail_bytes, total_bytes, reclaimable FROM usage_samples`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	// The newest first, so that a limit keeps the newest; turned round below.
	query += ` ORDER BY at DESC, host DESC, path DESC`
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	defer rows.Close()
	var out []ledger.UsageSample
	for rows.Next() {
		var (
			u   ledger.UsageSample
			at  int64
			rec sql.NullString
		)
		if err := rows.Scan(&u.Host, &u.Path, &at, &u.UsedBytes, &u.AvailBytes, &u.TotalBytes, &rec); err != nil {
			return nil, fmt.Errorf("list usage: %w", err)
		}
		u.At = fromNanos(sql.NullInt64{Int64: at, Valid: true})
		if rec.Valid {
			if err := fromJSONText(rec, &u.ReclaimableBytes); err != nil {
				return nil, fmt.Errorf("list usage: %w", err)
			}
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

// PruneUsage implements ledger.Store.
func (s *Store) PruneUsage(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM usage_samples WHERE at < ?`, ledger.BoundNanos(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune usage: %w", err)
	}
	return int(n), nil
}
