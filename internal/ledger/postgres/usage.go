package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// recordUsageSQL writes a pass's samples in one statement; a sample of the
// same host, path and time replaces the first.
const recordUsageSQL = `
INSERT INTO usage_samples AS u (host, path, at, used_bytes, avail_bytes, total_bytes, reclaimable)
SELECT h, p, a, us, av, t, NULLIF(r, '')::jsonb
FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::int8[], $7::text[]) AS x(h, p, a, us, av, t, r)
ON CONFLICT (host, path, at) DO UPDATE SET used_bytes = excluded.used_bytes, avail_bytes = excluded.avail_bytes,
	total_bytes = excluded.total_bytes, reclaimable = excluded.reclaimable`

// RecordUsage implements ledger.Store.
func (s *Store) RecordUsage(ctx context.Context, samples []ledger.UsageSample) error {
	for _, u := range samples {
		if err := u.Validate(); err != nil {
			return fmt.Errorf("record usage: %w", err)
		}
	}
	// One row per host, path and time (a statement cannot touch a row
	// twice): the last given wins, as it would one statement at a time.
	type id struct {
		host, path string
		at         int64
	}
	last := map[id]int{}
	for i, u := range samples {
		last[id{u.Host, u.Path, u.At.UnixNano()}] = i
	}
	if len(last) == 0 {
		return nil
	}
	var hosts, paths, recs []string
	var ats, used, avail, total []int64
	for i, u := range samples {
		if last[id{u.Host, u.Path, u.At.UnixNano()}] != i {
			continue
		}
		rec := ""
		if len(u.ReclaimableBytes) > 0 {
			b, err := json.Marshal(u.ReclaimableBytes)
			if err != nil {
				return fmt.Errorf("record usage: %w", err)
			}
			rec = string(b)
		}
		hosts, paths, recs = append(hosts, u.Host), append(paths, u.Path), append(recs, rec)
		ats, used, avail, total = append(ats, u.At.UnixNano()), append(used, u.UsedBytes), append(avail, u.AvailBytes), append(total, u.TotalBytes)
	}
	if _, err := s.db.Exec(ctx, recordUsageSQL, hosts, paths, ats, used, avail, total, recs); err != nil {
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
		args = append(args, f.Host)
		where = append(where, fmt.Sprintf("host = $%d", len(args)))
	}
	if f.Path != "" {
		args = append(args, f.Path)
		where = append(where, fmt.Sprintf("path = $%d", len(args)))
	}
	if !f.Since.IsZero() {
		args = append(args, ledger.BoundNanos(f.Since))
		where = append(where, fmt.Sprintf("at >= $%d", len(args)))
	}
	query := `SELECT host, path, at, used_bytes, avail_bytes, total_bytes, reclaimable::text FROM usage_samples`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	// The newest first, so that a limit keeps the newest; turned round below.
	query += ` ORDER BY at DESC, host DESC, path DESC`
	if f.Limit > 0 {
		args = append(args, f.Limit)
		query += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	out, err := collect(ctx, s.db, scanUsage, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

func scanUsage(row pgx.Row) (ledger.UsageSample, error) {
	var (
		u   ledger.UsageSample
		at  int64
		rec pgtype.Text
	)
	if err := row.Scan(&u.Host, &u.Path, &at, &u.UsedBytes, &u.AvailBytes, &u.TotalBytes, &rec); err != nil {
		return u, err
	}
	u.At = utc(at)
	if rec.Valid {
		if err := json.Unmarshal([]byte(rec.String), &u.ReclaimableBytes); err != nil {
			return u, err
		}
	}
	return u, nil
}

// PruneUsage implements ledger.Store.
func (s *Store) PruneUsage(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM usage_samples WHERE at < $1`, ledger.BoundNanos(before))
	if err != nil {
		return 0, fmt.Errorf("prune usage: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
