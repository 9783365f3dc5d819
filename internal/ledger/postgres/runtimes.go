package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// observeSQL records a batch in one statement: one array per column,
// unnested. Lists and maps travel as JSON text (an array parameter cannot
// hold lists of different lengths). The decided columns are absent from
// the conflict branch on purpose: an observation never clobbers a pin,
// lease, override or schedule. An observation older than the row's
// last_seen changes nothing.
var observeSQL = `
INSERT INTO runtimes AS r (` + keyColumns + `, state, path, home, workspaces, labels, size_bytes, first_seen, last_seen)
SELECT ` + keyUnnestColumns + `, o.state, o.path, o.home,
	CASE WHEN o.workspaces IS NULL THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text(o.workspaces::jsonb)) END,
	o.labels::jsonb, o.size_bytes, o.first_seen, o.last_seen
FROM unnest(` + keyUnnest(1) + `, $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int8[], $10::int8[], $11::int8[])
	AS o(` + keyUnnestColumns + `, state, path, home, workspaces, labels, size_bytes, first_seen, last_seen)
ON CONFLICT (` + keyColumns + `) DO UPDATE SET
	state      = CASE WHEN excluded.state = '' THEN r.state ELSE excluded.state END,
	path       = CASE WHEN excluded.path = '' THEN r.path ELSE excluded.path END,
	home       = excluded.home,
	workspaces = excluded.workspaces,
	labels     = excluded.labels,
	size_bytes = excluded.size_bytes,
	first_seen = COALESCE(r.first_seen, excluded.first_seen),
	last_seen  = excluded.last_seen
WHERE r.last_seen IS NULL OR excluded.last_seen >= r.last_seen`

// Observe implements ledger.Store.
func (s *Store) Observe(ctx context.Context, obs []ledger.Observation) error {
	for _, o := range obs {
		if err := o.Validate(); err != nil {
			return fmt.Errorf("observe runtimes: %w", err)
		}
	}
	if len(obs) == 0 {
		return nil
	}
	batch := mergeObservations(obs)
	keys := newKeyArrays(len(batch))
	var (
		states, homes      = make([]string, len(batch)), make([]string, len(batch))
		paths              = make([]string, len(batch))
		workspaces, labels = make([]*string, len(batch)), make([]*string, len(batch))
		sizes, first, last = make([]int64, len(batch)), make([]int64, len(batch)), make([]int64, len(batch))
	)
	for i, m := range batch {
		o := m.Observation
		keys.add(o.Key)
		states[i], paths[i], homes[i], sizes[i] = o.State, o.Path, o.Home, o.SizeBytes
		first[i], last[i] = m.firstAt.UnixNano(), o.At.UnixNano()
		var err error
		if workspaces[i], err = jsonText(o.Workspaces, len(o.Workspaces)); err != nil {
			return fmt.Errorf("observe %s: %w", o.Key, err)
		}
		if labels[i], err = jsonText(o.Labels, len(o.Labels)); err != nil {
			return fmt.Errorf("observe %s: %w", o.Key, err)
		}
	}
	args := append(keys.args(), states, paths, homes, workspaces, labels, sizes, first, last)
	if _, err := s.db.Exec(ctx, observeSQL, args...); err != nil {
		return fmt.Errorf("observe runtimes: %w", err)
	}
	return nil
}

// merged is the one observation of a key that a batch sends.
type merged struct {
	ledger.Observation
	firstAt time.Time // At of the key's first observation in the batch
}

// mergeObservations gives each key of a batch one observation, ordered by
// key: the one statement cannot touch a row twice, and a common order
// keeps two concurrent batches from deadlocking. The result is what
// recording the batch one observation at a time, in order, would leave
// (the rule of the SQLite store): a later observation replaces an earlier
// one unless it is older, and one without a state keeps the state before.
func mergeObservations(obs []ledger.Observation) []merged {
	batch := make([]merged, 0, len(obs))
	index := make(map[ledger.Key]int, len(obs))
	for _, o := range obs {
		i, ok := index[o.Key]
		if !ok {
			index[o.Key] = len(batch)
			batch = append(batch, merged{Observation: o, firstAt: o.At})
			continue
		}
		cur := &batch[i]
		if o.At.Before(cur.At) {
			continue
		}
		if o.State == "" {
			o.State = cur.State
		}
		if o.Path == "" {
			o.Path = cur.Path
		}
		cur.Observation = o
	}
	sortKeys(batch, func(m merged) ledger.Key { return m.Key })
	return batch
}

// jsonText encodes a list or map as JSON text; an empty one is NULL, so
// nil and empty read back the same (as nil).
func jsonText(v any, n int) (*string, error) {
	if n == 0 {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

const runtimeColumns = keyColumns + `, state, path, home, workspaces, labels, size_bytes, first_seen, last_seen,
	pinned, pin_reason, lease_until, retention_override, scheduled_step, scheduled_due, scheduled_at,
	archive_id, conversations, registered_at, released_at, agent_server_url`

// runtimeRow is one row of runtimeColumns as scanned. A listing reuses one
// for every row, its scan destinations built once: listing 100,000
// runtimes is every `ls`.
type runtimeRow struct {
	rec                                                 ledger.RuntimeRecord
	labels                                              []byte
	firstSeen, lastSeen, leaseUntil, retention          pgtype.Int8
	scheduledDue, scheduledAt, registeredAt, releasedAt pgtype.Int8
	dest                                                []any
}

func newRuntimeRow() *runtimeRow {
	w := &runtimeRow{}
	r := &w.rec
	w.dest = append(keyDest(&r.Key), &r.State, &r.Path, &r.Home, &r.Workspaces, &w.labels, &r.SizeBytes,
		&w.firstSeen, &w.lastSeen, &r.Pinned, &r.PinReason, &w.leaseUntil, &w.retention,
		&r.ScheduledStep, &w.scheduledDue, &w.scheduledAt, &r.ArchiveID, &r.Conversations,
		&w.registeredAt, &w.releasedAt, &r.AgentServerURL)
	return w
}

func (w *runtimeRow) scan(row pgx.Row) (ledger.RuntimeRecord, error) {
	w.rec = ledger.RuntimeRecord{}
	w.labels = w.labels[:0]
	if err := row.Scan(w.dest...); err != nil {
		return ledger.RuntimeRecord{}, err
	}
	r := w.rec
	if len(w.labels) > 0 {
		if err := json.Unmarshal(w.labels, &r.Labels); err != nil {
			return r, fmt.Errorf("decode labels of %s: %w", r.Key, err)
		}
	}
	r.FirstSeen, r.LastSeen = fromNanos(w.firstSeen), fromNanos(w.lastSeen)
	r.LeaseUntil = fromNanos(w.leaseUntil)
	if w.retention.Valid {
		d := time.Duration(w.retention.Int64)
		r.RetentionOverride = &d
	}
	r.ScheduledDue, r.ScheduledAt = fromNanos(w.scheduledDue), fromNanos(w.scheduledAt)
	r.RegisteredAt, r.ReleasedAt = fromNanos(w.registeredAt), fromNanos(w.releasedAt)
	return r, nil
}

// Runtime implements ledger.Store.
func (s *Store) Runtime(ctx context.Context, key ledger.Key) (ledger.RuntimeRecord, error) {
	r, err := getRuntime(ctx, s.db, key, "")
	if err != nil {
		return r, fmt.Errorf("get runtime %s: %w", key, err)
	}
	return r, nil
}

func getRuntime(ctx context.Context, q querier, key ledger.Key, lock string) (ledger.RuntimeRecord, error) {
	row := q.QueryRow(ctx, `SELECT `+runtimeColumns+` FROM runtimes WHERE `+keyEquals(1)+lock, keyArgs(key)...)
	r, err := newRuntimeRow().scan(row)
	return r, notFound(err)
}

// ListRuntimes implements ledger.Store.
func (s *Store) ListRuntimes(ctx context.Context, f ledger.RuntimeFilter) ([]ledger.RuntimeRecord, error) {
	var (
		where []string
		args  []any
	)
	if f.Backend != "" {
		args = append(args, f.Backend)
		where = append(where, fmt.Sprintf("backend = $%d", len(args)))
	}
	if f.Source != "" {
		args = append(args, f.Source)
		where = append(where, fmt.Sprintf("source = $%d", len(args)))
	}
	if f.State != "" {
		args = append(args, f.State)
		where = append(where, fmt.Sprintf("state = $%d", len(args)))
	}
	if !f.After.IsZero() {
		where = append(where, keyAfter(len(args)+1))
		args = append(args, keyArgs(f.After)...)
	}
	if f.Decided {
		where = append(where, "decided")
	}
	query := `SELECT ` + runtimeColumns + ` FROM runtimes`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY ` + keyOrder
	if f.Limit > 0 {
		args = append(args, f.Limit)
		query += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	out, err := collect(ctx, s.db, newRuntimeRow().scan, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list runtimes: %w", err)
	}
	return out, nil
}

// Update implements ledger.Store.
func (s *Store) Update(ctx context.Context, key ledger.Key, fn func(*ledger.RuntimeRecord) error) (ledger.RuntimeRecord, error) {
	var written ledger.RuntimeRecord
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// FOR UPDATE: a second Update of the key, on any replica, waits
		// here and then reads what this one wrote.
		r, err := getRuntime(ctx, tx, key, " FOR UPDATE")
		if err != nil {
			return err
		}
		if err := fn(&r); err != nil {
			return err
		}
		if r.Key != key {
			return fmt.Errorf("key changed to %s", r.Key)
		}
		if err := r.Validate(); err != nil {
			return err
		}
		written, err = putRuntime(ctx, tx, r)
		return err
	})
	if err != nil {
		return ledger.RuntimeRecord{}, fmt.Errorf("update runtime %s: %w", key, err)
	}
	return written, nil
}

// putRuntime writes every field of r and returns the row as stored (times
// in UTC, empty lists as nil): exactly what Runtime will read.
func putRuntime(ctx context.Context, tx pgx.Tx, r ledger.RuntimeRecord) (ledger.RuntimeRecord, error) {
	labels, err := jsonText(r.Labels, len(r.Labels))
	if err != nil {
		return r, err
	}
	var retention any
	if r.RetentionOverride != nil {
		retention = int64(*r.RetentionOverride)
	}
	args := append(keyArgs(r.Key), r.State, r.Path, r.Home, nilIfEmpty(r.Workspaces), labels, r.SizeBytes,
		nanos(r.FirstSeen), nanos(r.LastSeen), r.Pinned, r.PinReason, nanos(r.LeaseUntil), retention,
		r.ScheduledStep, nanos(r.ScheduledDue), nanos(r.ScheduledAt), r.ArchiveID, nilIfEmpty(r.Conversations),
		nanos(r.RegisteredAt), nanos(r.ReleasedAt), r.AgentServerURL)
	n := keyArity
	row := tx.QueryRow(ctx, fmt.Sprintf(`UPDATE runtimes SET
		state = $%d, path = $%d, home = $%d, workspaces = $%d, labels = $%d::jsonb, size_bytes = $%d,
		first_seen = $%d, last_seen = $%d, pinned = $%d, pin_reason = $%d, lease_until = $%d, retention_override = $%d,
		scheduled_step = $%d, scheduled_due = $%d, scheduled_at = $%d, archive_id = $%d, conversations = $%d,
		registered_at = $%d, released_at = $%d, agent_server_url = $%d
		WHERE `+keyEquals(1)+` RETURNING `+runtimeColumns,
		n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, n+9, n+10, n+11, n+12, n+13, n+14, n+15, n+16, n+17, n+18, n+19, n+20), args...)
	return newRuntimeRow().scan(row)
}

// nilIfEmpty stores an empty list as NULL, so it reads back as nil.
func nilIfEmpty(v []string) []string {
	if len(v) == 0 {
		return nil
	}
	return v
}

// RuntimeStates implements ledger.Store.
func (s *Store) RuntimeStates(ctx context.Context) (map[ledger.Key]string, error) {
	return s.runtimeStates(ctx, nil)
}

// RuntimeStatesOf is RuntimeStates for the runtimes of some backends only:
// in a fleet the ledger holds every host's runtimes, and a replica's pass
// needs its own (keys carry their source now, and ListRuntimes filters by
// it; scoping this read by source is the fleet wiring's to do, see
// docs/fleet.md).
func (s *Store) RuntimeStatesOf(ctx context.Context, backends []string) (map[ledger.Key]string, error) {
	if len(backends) == 0 {
		return map[ledger.Key]string{}, nil
	}
	return s.runtimeStates(ctx, backends)
}

// RuntimeStatesIn implements ledger.ScopedReader.
func (s *Store) RuntimeStatesIn(ctx context.Context, sources []string) (map[ledger.Key]string, error) {
	if len(sources) == 0 {
		return map[ledger.Key]string{}, nil
	}
	return s.runtimeStatesWhere(ctx, ` WHERE source = ANY($1)`, sources)
}

func (s *Store) runtimeStates(ctx context.Context, backends []string) (map[ledger.Key]string, error) {
	if backends != nil {
		return s.runtimeStatesWhere(ctx, ` WHERE backend = ANY($1)`, backends)
	}
	return s.runtimeStatesWhere(ctx, "", nil)
}

func (s *Store) runtimeStatesWhere(ctx context.Context, where string, in []string) (map[ledger.Key]string, error) {
	query, args := `SELECT `+keyColumns+`, state FROM runtimes`+where, []any(nil)
	if in != nil {
		args = []any{in}
	}
	rows, err := s.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list runtime states: %w", err)
	}
	defer rows.Close()
	out := make(map[ledger.Key]string)
	// Backends and states are a handful of strings repeated on every row:
	// share one copy of each (this read is per pass, over every runtime).
	shared := map[string]string{}
	intern := func(b []byte) string {
		if s, ok := shared[string(b)]; ok {
			return s
		}
		s := string(b)
		shared[s] = s
		return s
	}
	for rows.Next() {
		// Raw values: a text column's binary form is its bytes, and
		// scanning through the generic path allocates per column.
		v := rows.RawValues()
		out[keyFromRaw(v, intern)] = intern(v[keyArity])
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runtime states: %w", err)
	}
	return out, nil
}
