package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// recordActivitySQL writes a whole batch in one statement (the daemon
// flushes one every 250 ms at most). The WHERE keeps the newest time: a
// late or repeated report is a no-op.
var recordActivitySQL = `
INSERT INTO activity AS a (` + keyColumns + `, at)
SELECT * FROM unnest(` + keyUnnest(1) + `, $4::int8[])
ON CONFLICT (` + keyColumns + `) DO UPDATE SET at = excluded.at
WHERE excluded.at > a.at`

// RecordActivity implements ledger.Store.
func (s *Store) RecordActivity(ctx context.Context, batch []ledger.Activity) error {
	for _, a := range batch {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("record activity: %w", err)
		}
	}
	if len(batch) == 0 {
		return nil
	}
	// One row per key (a statement cannot touch a row twice), the newest,
	// in key order (so that concurrent batches never deadlock).
	newest := make(map[ledger.Key]time.Time, len(batch))
	for _, a := range batch {
		if a.At.After(newest[a.Key]) {
			newest[a.Key] = a.At
		}
	}
	rows := make([]ledger.Activity, 0, len(newest))
	for k, at := range newest {
		rows = append(rows, ledger.Activity{Key: k, At: at})
	}
	sortKeys(rows, func(a ledger.Activity) ledger.Key { return a.Key })
	keys := newKeyArrays(len(rows))
	ats := make([]int64, len(rows))
	for i, a := range rows {
		keys.add(a.Key)
		ats[i] = a.At.UnixNano()
	}
	if _, err := s.db.Exec(ctx, recordActivitySQL, append(keys.args(), ats)...); err != nil {
		return fmt.Errorf("record activity: %w", err)
	}
	return nil
}

// LastActivity implements ledger.Store.
func (s *Store) LastActivity(ctx context.Context, key ledger.Key) (time.Time, error) {
	var at int64
	err := s.db.QueryRow(ctx, `SELECT at FROM activity WHERE `+keyEquals(1), keyArgs(key)...).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("get activity of %s: %w", key, notFound(err))
	}
	return utc(at), nil
}

// ActivityTimes implements ledger.Store.
func (s *Store) ActivityTimes(ctx context.Context) (map[ledger.Key]time.Time, error) {
	return s.activityTimes(ctx, nil)
}

// ActivityTimesOf is ActivityTimes for the runtimes of some backends only,
// like RuntimeStatesOf.
func (s *Store) ActivityTimesOf(ctx context.Context, backends []string) (map[ledger.Key]time.Time, error) {
	if len(backends) == 0 {
		return map[ledger.Key]time.Time{}, nil
	}
	return s.activityTimes(ctx, backends)
}

// ActivityTimesIn implements ledger.ScopedReader.
func (s *Store) ActivityTimesIn(ctx context.Context, sources []string) (map[ledger.Key]time.Time, error) {
	if len(sources) == 0 {
		return map[ledger.Key]time.Time{}, nil
	}
	return s.activityTimesWhere(ctx, ` WHERE source = ANY($1)`, sources)
}

func (s *Store) activityTimes(ctx context.Context, backends []string) (map[ledger.Key]time.Time, error) {
	if backends != nil {
		return s.activityTimesWhere(ctx, ` WHERE backend = ANY($1)`, backends)
	}
	return s.activityTimesWhere(ctx, "", nil)
}

func (s *Store) activityTimesWhere(ctx context.Context, where string, in []string) (map[ledger.Key]time.Time, error) {
	query, args := `SELECT `+keyColumns+`, at FROM activity`+where, []any(nil)
	if in != nil {
		args = []any{in}
	}
	rows, err := s.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list activity: %w", err)
	}
	defer rows.Close()
	out := make(map[ledger.Key]time.Time)
	var (
		k  ledger.Key
		at int64
	)
	dest := append(keyDest(&k), &at)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("list activity: %w", err)
		}
		out[k] = utc(at)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list activity: %w", err)
	}
	return out, nil
}
