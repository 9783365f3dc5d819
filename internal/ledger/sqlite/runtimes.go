package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// The decided column is absent from the conflict branch on purpose: an
// observation never clobbers a pin, lease, override or schedule. An
// observation older than the row's last_seen changes nothing.
const observeSQL = `
INSERT INTO runtimes (` + keyColumns + `, state, path, home, workspaces, labels, size_bytes, first_seen, last_seen)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (` + keyColumns + `) DO UPDATE SET
	state      = CASE WHEN excluded.state = '' THEN runtimes.state ELSE excluded.state END,
	path       = CASE WHEN excluded.path = '' THEN runtimes.path ELSE excluded.path END,
	home       = excluded.home,
	workspaces = excluded.workspaces,
	labels     = excluded.labels,
	size_bytes = excluded.size_bytes,
	first_seen = COALESCE(runtimes.first_seen, excluded.first_seen),
	last_seen  = excluded.last_seen
WHERE runtimes.last_seen IS NULL OR excluded.last_seen >= runtimes.last_seen`

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
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, observeSQL)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, o := range obs {
			workspaces, err := jsonList(o.Workspaces)
			if err != nil {
				return err
			}
			labels, err := jsonMap(o.Labels)
			if err != nil {
				return err
			}
			at := nanos(o.At)
			if _, err := stmt.ExecContext(ctx, withKey(o.Key, o.State, o.Path, o.Home,
				workspaces, labels, o.SizeBytes, at, at)...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("observe runtimes: %w", err)
	}
	return nil
}

const runtimeColumns = keyColumns + `, state, path, home, workspaces, labels, size_bytes, first_seen, last_seen, decided`

// rowScanner is what *sql.Row and *sql.Rows have in common.
type rowScanner interface {
	Scan(dest ...any) error
}

// runtimeRow is one row of runtimeColumns as scanned. A listing reuses one
// for every row, its scan destinations built once, so that a row costs only
// the allocations of its own values: listing 100,000 runtimes is every pass.
type runtimeRow struct {
	key                         ledger.Key
	state, path, home           string
	workspaces, labels, decided sql.NullString
	sizeBytes                   int64
	firstSeen, lastSeen         sql.NullInt64
	dest                        []any
}

func newRuntimeRow() *runtimeRow {
	w := &runtimeRow{}
	w.dest = append(keyDest(&w.key), &w.state, &w.path, &w.home, &w.workspaces, &w.labels,
		&w.sizeBytes, &w.firstSeen, &w.lastSeen, &w.decided)
	return w
}

func (w *runtimeRow) scan(row rowScanner) (ledger.RuntimeRecord, error) {
	if err := row.Scan(w.dest...); err != nil {
		return ledger.RuntimeRecord{}, err
	}
	r := ledger.RuntimeRecord{
		Key:   w.key,
		State: w.state, Path: w.path, Home: w.home, SizeBytes: w.sizeBytes,
		FirstSeen: fromNanos(w.firstSeen), LastSeen: fromNanos(w.lastSeen),
	}
	var err error
	if r.Workspaces, err = fromJSONStrings(w.workspaces); err != nil {
		return r, fmt.Errorf("decode workspaces of %s: %w", r.Key, err)
	}
	if r.Labels, err = fromJSONMap(w.labels); err != nil {
		return r, fmt.Errorf("decode labels of %s: %w", r.Key, err)
	}
	if w.decided.Valid {
		var d decisions
		if err := json.Unmarshal([]byte(w.decided.String), &d); err != nil {
			return r, fmt.Errorf("decode decisions of %s: %w", r.Key, err)
		}
		d.apply(&r)
	}
	return r, nil
}

// decisions is the JSON form of a record's engine-owned fields (the decided
// column). Times and durations are nanoseconds; absent means zero or nil.
type decisions struct {
	Pinned            bool     `json:"pinned,omitempty"`
	PinReason         string   `json:"pin_reason,omitempty"`
	LeaseUntil        *int64   `json:"lease_until,omitempty"`
	RetentionOverride *int64   `json:"retention_override,omitempty"`
	ScheduledStep     string   `json:"scheduled_step,omitempty"`
	ScheduledDue      *int64   `json:"scheduled_due,omitempty"`
	ScheduledAt       *int64   `json:"scheduled_at,omitempty"`
	ArchiveID         string   `json:"archive_id,omitempty"`
	Conversations     []string `json:"conversations,omitempty"`
	RegisteredAt      *int64   `json:"registered_at,omitempty"`
	ReleasedAt        *int64   `json:"released_at,omitempty"`
	AgentServerURL    string   `json:"agent_server_url,omitempty"`
}

func decisionsOf(r ledger.RuntimeRecord) decisions {
	nanosPtr := func(t time.Time) *int64 {
		if t.IsZero() {
			return nil
		}
		n := t.UnixNano()
		return &n
	}
	d := decisions{
		Pinned: r.Pinned, PinReason: r.PinReason, LeaseUntil: nanosPtr(r.LeaseUntil),
		ScheduledStep: r.ScheduledStep, ScheduledDue: nanosPtr(r.ScheduledDue), ScheduledAt: nanosPtr(r.ScheduledAt),
		ArchiveID: r.ArchiveID, Conversations: r.Conversations,
		RegisteredAt: nanosPtr(r.RegisteredAt), ReleasedAt: nanosPtr(r.ReleasedAt),
		AgentServerURL: r.AgentServerURL,
	}
	if r.RetentionOverride != nil {
		n := int64(*r.RetentionOverride)
		d.RetentionOverride = &n
	}
	return d
}

func (d decisions) apply(r *ledger.RuntimeRecord) {
	fromPtr := func(n *int64) time.Time {
		if n == nil {
			return time.Time{}
		}
		return time.Unix(0, *n).UTC()
	}
	r.Pinned, r.PinReason = d.Pinned, d.PinReason
	r.LeaseUntil = fromPtr(d.LeaseUntil)
	if d.RetentionOverride != nil {
		o := time.Duration(*d.RetentionOverride)
		r.RetentionOverride = &o
	}
	r.ScheduledStep, r.ScheduledDue, r.ScheduledAt = d.ScheduledStep, fromPtr(d.ScheduledDue), fromPtr(d.ScheduledAt)
	r.ArchiveID = d.ArchiveID
	r.Conversations = d.Conversations
	r.RegisteredAt, r.ReleasedAt = fromPtr(d.RegisteredAt), fromPtr(d.ReleasedAt)
	r.AgentServerURL = d.AgentServerURL
}

// column encodes d, NULL when nothing is decided.
func (d decisions) column() (sql.NullString, error) {
	if len(d.Conversations) == 0 {
		d.Conversations = nil // an empty list is no decision
	}
	if reflect.ValueOf(d).IsZero() {
		return sql.NullString{}, nil
	}
	return marshalText(d)
}

// Runtime implements ledger.Store.
func (s *Store) Runtime(ctx context.Context, key ledger.Key) (ledger.RuntimeRecord, error) {
	r, err := getRuntime(ctx, s.read, key)
	if err != nil {
		return r, fmt.Errorf("get runtime %s: %w", key, err)
	}
	return r, nil
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getRuntime(ctx context.Context, q querier, key ledger.Key) (ledger.RuntimeRecord, error) {
	row := q.QueryRowContext(ctx, `SELECT `+runtimeColumns+` FROM runtimes WHERE `+keyMatch, keyArgs(key)...)
	r, err := newRuntimeRow().scan(row)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ledger.ErrNotFound
	}
	return r, err
}

// ListRuntimes implements ledger.Store.
func (s *Store) ListRuntimes(ctx context.Context, f ledger.RuntimeFilter) ([]ledger.RuntimeRecord, error) {
	var (
		where []string
		args  []any
	)
	if f.Backend != "" {
		where = append(where, "backend = ?")
		args = append(args, f.Backend)
	}
	if f.Source != "" {
		where = append(where, "source = ?")
		args = append(args, f.Source)
	}
	if f.State != "" {
		where = append(where, "state = ?")
		args = append(args, f.State)
	}
	if !f.After.IsZero() {
		where = append(where, "("+keyColumns+") > (?, ?, ?)")
		args = append(args, keyArgs(f.After)...)
	}
	if f.Decided {
		where = append(where, "decided IS NOT NULL")
	}
	filter := ``
	if len(where) > 0 {
		filter = ` WHERE ` + strings.Join(where, " AND ")
	}
	out, err := s.listRuntimes(ctx, filter, args, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list runtimes: %w", err)
	}
	return out, nil
}

func (s *Store) listRuntimes(ctx context.Context, filter string, args []any, limit int) ([]ledger.RuntimeRecord, error) {
	// Count first, in the same snapshot, to allocate the result once: a
	// pass lists every runtime, and growing a slice of 100,000 records
	// step by step cost a third of the time.
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to undo
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM runtimes`+filter, args...).Scan(&n); err != nil {
		return nil, err
	}
	query := `SELECT ` + runtimeColumns + ` FROM runtimes` + filter + ` ORDER BY ` + keyOrder
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit)
		n = min(n, limit)
	}
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]ledger.RuntimeRecord, 0, n)
	row := newRuntimeRow()
	for rows.Next() {
		r, err := row.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Update implements ledger.Store.
func (s *Store) Update(ctx context.Context, key ledger.Key, fn func(*ledger.RuntimeRecord) error) (ledger.RuntimeRecord, error) {
	var written ledger.RuntimeRecord
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		r, err := getRuntime(ctx, tx, key)
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
		if err := putRuntime(ctx, tx, r); err != nil {
			return err
		}
		// Read back, so the caller sees exactly what Runtime will return
		// (times in UTC, empty lists as nil).
		written, err = getRuntime(ctx, tx, key)
		return err
	})
	if err != nil {
		return ledger.RuntimeRecord{}, fmt.Errorf("update runtime %s: %w", key, err)
	}
	return written, nil
}

func putRuntime(ctx context.Context, tx *sql.Tx, r ledger.RuntimeRecord) error {
	workspaces, err := jsonList(r.Workspaces)
	if err != nil {
		return err
	}
	labels, err := jsonMap(r.Labels)
	if err != nil {
		return err
	}
	decided, err := decisionsOf(r).column()
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE runtimes SET
		state = ?, path = ?, home = ?, workspaces = ?, labels = ?, size_bytes = ?, first_seen = ?, last_seen = ?, decided = ?
		WHERE `+keyMatch,
		append([]any{r.State, r.Path, r.Home, workspaces, labels, r.SizeBytes, nanos(r.FirstSeen), nanos(r.LastSeen), decided},
			keyArgs(r.Key)...)...)
	return err
}

// RuntimeStates implements ledger.Store.
func (s *Store) RuntimeStates(ctx context.Context) (map[ledger.Key]string, error) {
	var n int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM runtimes`).Scan(&n); err != nil {
		return nil, fmt.Errorf("list runtime states: %w", err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+keyColumns+`, state FROM runtimes`)
	if err != nil {
		return nil, fmt.Errorf("list runtime states: %w", err)
	}
	defer rows.Close()
	out := make(map[ledger.Key]string, n)
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
	var backend, source, id, state sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&backend, &source, &id, &state); err != nil {
			return nil, fmt.Errorf("list runtime states: %w", err)
		}
		out[ledger.Key{Backend: intern(backend), Source: intern(source), ID: string(id)}] = intern(state)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runtime states: %w", err)
	}
	return out, nil
}
