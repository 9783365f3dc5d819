package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// Sentinel error categories; see the package documentation. They are the
// backend package's own: one ErrNotFound and one ErrConflict everywhere.
var (
	ErrNotFound = backend.ErrNotFound
	ErrConflict = backend.ErrConflict
	// ErrTimeRange is wrapped by a write whose time lies outside MinTime
	// and MaxTime: bad input, not a failure of the store.
	ErrTimeRange = errors.New("outside the times a ledger keeps")
)

// Stores keep times as nanoseconds since 1970 in 64 bits, so a recorded
// time must lie between MinTime and MaxTime (years 1677 to 2262). Writes
// refuse a time outside rather than let it wrap: a lease "forever" that
// wrapped would read as long expired, and the runtime would be reclaimed.
var (
	MinTime = time.Unix(0, math.MinInt64).UTC()
	MaxTime = time.Unix(0, math.MaxInt64).UTC()
)

// BoundNanos encodes a time that a store only compares with (a filter, a
// prune bound) as nanoseconds since 1970, clamped to what 64 bits hold.
// Every stored time lies within MinTime..MaxTime, so the comparison stays
// right where plain UnixNano would wrap.
func BoundNanos(t time.Time) int64 {
	switch {
	case t.Before(MinTime):
		return math.MinInt64
	case t.After(MaxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// checkTime rejects a non-zero time outside MinTime..MaxTime.
func checkTime(what string, t time.Time) error {
	if !t.IsZero() && (t.Before(MinTime) || t.After(MaxTime)) {
		return fmt.Errorf("%s %s is %w (%s to %s)",
			what, t.Format(time.RFC3339), ErrTimeRange, MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	}
	return nil
}

// Key identifies a runtime: its source, backend and ID. It is backend.Key
// itself (one key type), named here for the stores' convenience. Every
// store keeps its encoding of a key in one place (its key columns) and
// orders records by Key.Compare.
type Key = backend.Key

// RuntimeRecord is what the ledger knows about one runtime.
type RuntimeRecord struct {
	Key Key

	// Observed by passes; written by Store.Observe.

	// State is the last observed or marked state: running, stopped, idle,
	// scheduled, archived, missing, ...
	State string
	// Path is the runtime's own folder, when it has one: kept so that a
	// runtime is found by its former path once archived.
	Path       string
	Home       string
	Workspaces []string
	Labels     map[string]string
	SizeBytes  int64
	FirstSeen  time.Time // At of the first observation recorded
	LastSeen   time.Time // At of the newest observation recorded

	// Decided by the engine and users; written only by Store.Update.

	Pinned    bool
	PinReason string
	// LeaseUntil: not touched before this time. Zero means no lease.
	LeaseUntil time.Time
	// RetentionOverride replaces the configured retention; nil means default.
	RetentionOverride *time.Duration
	// ScheduledStep is the destructive step announced for this runtime, due
	// at ScheduledDue, announced at ScheduledAt (notice-period bookkeeping).
	// Empty means nothing is scheduled.
	ScheduledStep string
	ScheduledDue  time.Time
	ScheduledAt   time.Time
	// ArchiveID is the newest verified archive of this runtime, if any.
	ArchiveID string
	// Conversations are the owners a host registered (POST /v1/runtimes):
	// a shared runtime is removed only when the last one lets go.
	Conversations []string
	// RegisteredAt is when a host first registered the runtime; zero for
	// a runtime only ever found by a source's selector.
	RegisteredAt time.Time
	// ReleasedAt is when the last owning conversation let go; zero while
	// one holds it. With RegisteredAt it tells since when a runtime of a
	// registered_only source has been an orphan.
	ReleasedAt time.Time
	// AgentServerURL is the runtime's OpenHands agent-server, as a host
	// registered it (POST /v1/runtimes agent_server_url): its idle clock
	// gives the runtime's last activity while it runs. Empty: none known.
	AgentServerURL string
}

// Validate rejects a record with an invalid key or a time a store cannot
// keep. Store.Update checks what its function wrote with it.
func (r RuntimeRecord) Validate() error {
	if err := r.Key.Validate(); err != nil {
		return err
	}
	return errors.Join(
		checkTime("first seen", r.FirstSeen), checkTime("last seen", r.LastSeen),
		checkTime("lease", r.LeaseUntil),
		checkTime("scheduled due", r.ScheduledDue), checkTime("scheduled at", r.ScheduledAt),
		checkTime("registered at", r.RegisteredAt), checkTime("released at", r.ReleasedAt))
}

// Observation is what one pass saw of one runtime.
type Observation struct {
	Key Key
	// State replaces the recorded state; empty keeps it.
	State      string
	Path       string
	Home       string
	Workspaces []string
	Labels     map[string]string
	SizeBytes  int64
	// At is when it was observed. An observation older than the recorded
	// LastSeen is ignored, so a late writer cannot roll a runtime back.
	At time.Time
}

// FirstRecord is the record Observe creates from o for a runtime it had
// no record of: a pass that just recorded new runtimes knows their records
// without reading them back (one query each was most of a first pass).
func (o Observation) FirstRecord() RuntimeRecord {
	at := o.At.UTC()
	return RuntimeRecord{Key: o.Key, State: o.State, Path: o.Path, Home: o.Home, Workspaces: o.Workspaces, Labels: o.Labels,
		SizeBytes: o.SizeBytes, FirstSeen: at, LastSeen: at}
}

// Validate rejects an observation with an invalid key or a zero time.
func (o Observation) Validate() error {
	if err := o.Key.Validate(); err != nil {
		return err
	}
	if o.At.IsZero() {
		return fmt.Errorf("observation of %s: zero time", o.Key)
	}
	return checkTime("observation time", o.At)
}

// RuntimeFilter selects and pages runtimes. Results are ordered by
// Key.Compare.
type RuntimeFilter struct {
	Backend string // empty: every backend
	Source  string // empty: every source
	State   string // empty: every state
	// After is the pagination cursor: only keys strictly after it are
	// returned. Pass the last key of the previous page; zero starts at the top.
	After Key
	Limit int // <= 0: no limit
	// Decided, when set, lists only runtimes with an engine-owned field
	// set (pin, lease, retention override, schedule, archive id): what a
	// pass must read in full; every other runtime is a key and a state
	// (RuntimeStates).
	Decided bool
}

// Activity reports that a runtime was in use at a time.
type Activity struct {
	Key Key
	At  time.Time
}

// Validate rejects an activity with an invalid key or a zero time.
func (a Activity) Validate() error {
	if err := a.Key.Validate(); err != nil {
		return err
	}
	if a.At.IsZero() {
		return fmt.Errorf("activity of %s: zero time", a.Key)
	}
	return checkTime("activity time", a.At)
}

// Hold keeps a runtime still until it expires or is released. Each TakeHold
// makes a new hold, so two operations of one holder never share one.
type Hold struct {
	ID        string // random, unique across runtimes
	Key       Key
	Holder    string
	TakenAt   time.Time
	ExpiresAt time.Time
}

// ActiveAt reports whether the hold is in force at now. A hold is no longer
// active at the instant it expires.
func (h Hold) ActiveAt(now time.Time) bool { return now.Before(h.ExpiresAt) }

// HoldRequest asks for a new hold of TTL from Now.
type HoldRequest struct {
	Key    Key
	Holder string
	TTL    time.Duration
	Now    time.Time
}

// Validate rejects a request without a key, holder, positive TTL or time.
func (r HoldRequest) Validate() error {
	if err := r.Key.Validate(); err != nil {
		return err
	}
	if r.Holder == "" {
		return fmt.Errorf("hold of %s: empty holder", r.Key)
	}
	return validateTTL(r.Key, r.TTL, r.Now)
}

// HoldRenewal extends hold ID of runtime Key to Now+TTL.
type HoldRenewal struct {
	Key Key
	ID  string
	TTL time.Duration
	Now time.Time
}

// Validate rejects a renewal without a key, id, positive TTL or time.
func (r HoldRenewal) Validate() error {
	if err := r.Key.Validate(); err != nil {
		return err
	}
	if r.ID == "" {
		return fmt.Errorf("hold of %s: empty hold id", r.Key)
	}
	return validateTTL(r.Key, r.TTL, r.Now)
}

func validateTTL(k Key, ttl time.Duration, now time.Time) error {
	if ttl <= 0 {
		return fmt.Errorf("hold of %s: ttl %s is not positive", k, ttl)
	}
	if now.IsZero() {
		return fmt.Errorf("hold of %s: zero time", k)
	}
	return errors.Join(checkTime("hold time", now), checkTime("hold expiry", now.Add(ttl)))
}

// HoldFilter selects the holds active at Now.
type HoldFilter struct {
	Key Key // zero: every runtime
	Now time.Time
}

// Archive records a verified export of a runtime.
type Archive struct {
	ID        string
	Key       Key
	CreatedAt time.Time
	Location  string   // where it was written: a folder, a URL
	Formats   []string // e.g. "git-bundle", "tar.zst"
	Bytes     int64
	Objects   []ArchiveObject
	// Manifest is the archive's own description, any JSON value. It is
	// stored as JSON, so formatting and key order may not survive.
	Manifest json.RawMessage
}

// ArchiveObject is one file of an archive and its checksum.
type ArchiveObject struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Validate rejects an archive without an id, key or time, or with a
// manifest that is not JSON.
func (a Archive) Validate() error {
	if a.ID == "" {
		return fmt.Errorf("archive of %s: empty id", a.Key)
	}
	if err := a.Key.Validate(); err != nil {
		return err
	}
	if a.CreatedAt.IsZero() {
		return fmt.Errorf("archive %s: zero time", a.ID)
	}
	if len(a.Manifest) > 0 && !json.Valid(a.Manifest) {
		return fmt.Errorf("archive %s: manifest is not valid JSON", a.ID)
	}
	return checkTime("archive time", a.CreatedAt)
}

// Notice records an announcement about a runtime: a destructive step
// scheduled, canceled, done (reclaimed, archived) or failed.
type Notice struct {
	ID      int64 // assigned by the store
	Key     Key
	Kind    string // e.g. "scheduled", "canceled", "reclaimed", "archived", "failed"
	Step    string
	Due     time.Time // zero when the kind has no due time
	At      time.Time
	Message string
	// PlanID is the plan that announced it ("" when none did: a pin
	// canceling a schedule). Not part of what makes two notices the same,
	// nor are ArchiveID and FreedBytes.
	PlanID string
	// ArchiveID and FreedBytes are what a step done archived and freed.
	ArchiveID  string
	FreedBytes int64
}

// Validate rejects a notice without a key, kind or time.
func (n Notice) Validate() error {
	if err := n.Key.Validate(); err != nil {
		return err
	}
	if n.Kind == "" {
		return fmt.Errorf("notice of %s: empty kind", n.Key)
	}
	if n.At.IsZero() {
		return fmt.Errorf("notice of %s: zero time", n.Key)
	}
	if n.FreedBytes < 0 {
		return fmt.Errorf("notice of %s: negative bytes freed", n.Key)
	}
	return errors.Join(checkTime("notice time", n.At), checkTime("notice due", n.Due))
}

// NoticeFilter selects notices, oldest first.
type NoticeFilter struct {
	Key   Key       // zero: every runtime
	Since time.Time // only notices with At at or after Since
	Limit int       // <= 0: no limit
}

// The outbox of webhook deliveries. A notice recorded is owed to every
// webhook ([[notify]]) that wants its kind until its delivery to that
// webhook is recorded as delivered or given up (RecordDelivery): a daemon
// that stops, or dies, between recording a notice and delivering it
// delivers it after its next start, or another replica of a fleet does.
// A webhook is named by a stable name (the caller's: notify.HookName),
// not by its URL, which may hold a credential.

// NoticeDelivery is the state of one notice's delivery to one webhook.
type NoticeDelivery struct {
	NoticeID int64
	Hook     string
	// Attempts is how many POSTs were made in all, over every start.
	Attempts int
	// Delivered is when the webhook took it; GaveUp when its attempts ran
	// out. Either ends the delivery: once one is recorded, a later record
	// of the same delivery changes nothing. Both zero: still owed.
	Delivered, GaveUp time.Time
	// LastError is the last attempt's failure (it quotes no credential).
	LastError string
	At        time.Time // when this state was recorded
}

// Validate rejects a delivery without a notice, webhook or time, with
// negative attempts, or both delivered and given up.
func (d NoticeDelivery) Validate() error {
	switch {
	case d.NoticeID <= 0:
		return errors.New("notice delivery: no notice id")
	case d.Hook == "":
		return fmt.Errorf("delivery of notice %d: empty webhook name", d.NoticeID)
	case d.Attempts < 0:
		return fmt.Errorf("delivery of notice %d: negative attempts", d.NoticeID)
	case !d.Delivered.IsZero() && !d.GaveUp.IsZero():
		return fmt.Errorf("delivery of notice %d: both delivered and given up", d.NoticeID)
	case d.At.IsZero():
		return fmt.Errorf("delivery of notice %d: zero time", d.NoticeID)
	}
	return errors.Join(checkTime("delivery time", d.At), checkTime("delivered time", d.Delivered), checkTime("given up time", d.GaveUp))
}

// PendingFilter selects the notices still owed to one webhook, in the
// order they were recorded (by ID).
type PendingFilter struct {
	Hook string // required
	// Kinds are the kinds the webhook wants; empty: every kind.
	Kinds []string
	// Sources narrows to the runtimes of these sources (a replica's own
	// and, while it leads, the shared ones); nil: every source, empty
	// but not nil: none.
	Sources []string
	Since   time.Time // only notices with At at or after Since (the horizon)
	After   int64     // only notices with a higher ID: the cursor
	Limit   int       // <= 0: no limit
}

// PendingNotice is a notice owed to a webhook, with the POSTs made so far
// (a start cut short the round that made them).
type PendingNotice struct {
	Notice
	Attempts int
}

// UsageSample is one managed filesystem's usage as a pass found it: the
// series behind a usage chart and its forecast.
type UsageSample struct {
	// Host is the host that measured it ("" on one host): in a fleet
	// sharing the ledger, each host samples its own filesystems.
	Host string
	// Path names the filesystem (the managed root it was measured at).
	Path string
	At   time.Time
	// UsedBytes, AvailBytes and TotalBytes are as df shows them: used,
	// free to unprivileged users, capacity.
	UsedBytes, AvailBytes, TotalBytes int64
	// ReclaimableBytes is what the pass's plan would free there, by step.
	ReclaimableBytes map[string]int64
}

// Validate rejects a sample without a path or time, or with negative sizes.
func (u UsageSample) Validate() error {
	switch {
	case u.Path == "":
		return errors.New("usage sample: empty path")
	case u.At.IsZero():
		return fmt.Errorf("usage sample of %s: zero time", u.Path)
	case u.UsedBytes < 0 || u.AvailBytes < 0 || u.TotalBytes < 0:
		return fmt.Errorf("usage sample of %s: negative size", u.Path)
	}
	for step, n := range u.ReclaimableBytes {
		if step == "" || n < 0 {
			return fmt.Errorf("usage sample of %s: reclaimable %q %d", u.Path, step, n)
		}
	}
	return checkTime("usage sample time", u.At)
}

// UsageFilter selects usage samples, oldest first.
type UsageFilter struct {
	Host    string    // only this host's ("" matches only samples of no host); ignored with AnyHost
	AnyHost bool      // every host's
	Path    string    // "": every filesystem
	Since   time.Time // only samples at or after Since
	Limit   int       // <= 0: no limit (the newest Limit when set)
}

// Intent is journaled before an action starts (DESIGN §4).
type Intent struct {
	PlanID string // empty for actions outside a plan (delete on request, recovery)
	Key    Key
	Step   string
	Paths  []string
	Reason string
	At     time.Time
}

// Validate rejects an intent without a key, step or time.
func (i Intent) Validate() error {
	if err := i.Key.Validate(); err != nil {
		return err
	}
	if i.Step == "" {
		return fmt.Errorf("intent for %s: empty step", i.Key)
	}
	if i.At.IsZero() {
		return fmt.Errorf("intent for %s: zero time", i.Key)
	}
	return checkTime("intent time", i.At)
}

// Results of a journaled action.
const (
	ResultDone    = "done"
	ResultSkipped = "skipped"
	ResultFailed  = "failed"
)

// Outcome is journaled after an action ends.
type Outcome struct {
	Result     string // ResultDone, ResultSkipped or ResultFailed
	Reason     string
	FreedBytes int64
	At         time.Time
}

// Validate rejects an outcome with an unknown result or a zero time.
func (o Outcome) Validate() error {
	switch o.Result {
	case ResultDone, ResultSkipped, ResultFailed:
	default:
		return fmt.Errorf("outcome: unknown result %q", o.Result)
	}
	if o.At.IsZero() {
		return errors.New("outcome: zero time")
	}
	return checkTime("outcome time", o.At)
}

// JournalEntry is one journaled action.
type JournalEntry struct {
	ID      int64 // assigned by the store, rising in append order
	Intent  Intent
	Outcome *Outcome // nil while unfinished
}

// JournalFilter selects journal entries, newest (highest ID) first.
type JournalFilter struct {
	PlanID string // empty: every plan
	Key    Key    // zero: every runtime
	// Before is the pagination cursor: only entries with a lower ID are
	// returned. Pass the last ID of the previous page; zero starts at the top.
	Before int64
	Limit  int // <= 0: no limit
}

// PruneBatch bounds how many journal entries, and how many notices, one
// transaction of Store.PruneJournal deletes.
const PruneBatch = 500

// JournalPruned is what Store.PruneJournal deleted.
type JournalPruned struct {
	Entries    int // finished journal entries
	Notices    int
	Deliveries int // the delivery rows of those notices, per notice and webhook
}

// Total is every row deleted.
func (p JournalPruned) Total() int { return p.Entries + p.Notices + p.Deliveries }

// Store is the ledger. See the package documentation for the contract that
// every method follows (concurrency, time, idempotency, errors).
type Store interface {
	// Observe records what a pass saw, in one transaction. It creates
	// unknown runtimes and updates only the observed fields of known ones.
	Observe(ctx context.Context, obs []Observation) error
	// Runtime returns one runtime, or ErrNotFound.
	Runtime(ctx context.Context, key Key) (RuntimeRecord, error)
	// ListRuntimes returns runtimes matching f, ordered by Key.Compare.
	ListRuntimes(ctx context.Context, f RuntimeFilter) ([]RuntimeRecord, error)
	// RuntimeStates returns the state of every runtime: the cheap read a
	// pass over many runtimes starts with.
	RuntimeStates(ctx context.Context) (map[Key]string, error)
	// Update reads a runtime, lets fn change it, and writes it back in one
	// transaction; it returns the record as written. fn must not change the
	// key, and what it writes must pass RuntimeRecord.Validate. If fn
	// returns an error nothing is written and the error is returned
	// wrapped. A runtime never observed is ErrNotFound.
	Update(ctx context.Context, key Key, fn func(*RuntimeRecord) error) (RuntimeRecord, error)

	// RecordActivity records a batch in one transaction, keeping the newest
	// time per runtime: an older report never moves activity back. Activity
	// may be reported for a runtime no pass has observed yet.
	RecordActivity(ctx context.Context, batch []Activity) error
	// LastActivity returns the newest activity of a runtime, or ErrNotFound.
	LastActivity(ctx context.Context, key Key) (time.Time, error)
	// ActivityTimes returns the newest activity of every runtime.
	ActivityTimes(ctx context.Context) (map[Key]time.Time, error)

	// TakeHold creates a hold expiring at req.Now+req.TTL.
	TakeHold(ctx context.Context, req HoldRequest) (Hold, error)
	// RenewHold moves a hold's expiry to r.Now+r.TTL. It returns ErrNotFound
	// if the hold is gone or expired at r.Now, ErrConflict if the id belongs
	// to another runtime.
	RenewHold(ctx context.Context, r HoldRenewal) (Hold, error)
	// ReleaseHold removes a hold. Releasing a hold that is gone is not an
	// error; releasing one that belongs to another runtime is ErrConflict.
	ReleaseHold(ctx context.Context, key Key, id string) error
	// ListHolds returns the holds active at f.Now, ordered by key, then
	// expiry.
	ListHolds(ctx context.Context, f HoldFilter) ([]Hold, error)
	// PruneHolds deletes holds that expired at or before before, and
	// returns how many.
	PruneHolds(ctx context.Context, before time.Time) (int, error)

	// RecordArchive records an archive. Recording the same archive again is
	// harmless; a different archive under the same ID is ErrConflict.
	RecordArchive(ctx context.Context, a Archive) error
	// Archive returns one archive by ID, or ErrNotFound.
	Archive(ctx context.Context, id string) (Archive, error)
	// ListArchives returns a runtime's archives (every runtime's for the zero
	// key), newest first.
	ListArchives(ctx context.Context, key Key) ([]Archive, error)
	// DeleteArchive removes an archive's record, once its objects are gone
	// (reclaimer archives prune). Deleting an unknown or already deleted
	// archive is harmless, so a prune retried after a crash converges.
	DeleteArchive(ctx context.Context, id string) error

	// RecordNotice records a notice and returns its ID. Recording an
	// identical notice (same key, kind, step, due, at and message) again
	// returns the first one's ID and adds nothing.
	RecordNotice(ctx context.Context, n Notice) (int64, error)
	// ListNotices returns notices matching f, oldest first.
	ListNotices(ctx context.Context, f NoticeFilter) ([]Notice, error)
	// PendingNotices returns the notices recorded since this outbox
	// exists that are still owed to f.Hook (no delivery of them to it
	// recorded as delivered or given up), matching f, by ID.
	PendingNotices(ctx context.Context, f PendingFilter) ([]PendingNotice, error)
	// RecordDelivery records the state of a notice's delivery to a
	// webhook, replacing the last unless that one ended it (delivered or
	// given up: then it is kept, and recording again is harmless). An
	// unknown notice is ErrNotFound.
	RecordDelivery(ctx context.Context, d NoticeDelivery) error

	// RecordUsage records a pass's usage samples in one transaction. A
	// sample of the same host, path and time again replaces the first.
	RecordUsage(ctx context.Context, samples []UsageSample) error
	// ListUsage returns the samples matching f, oldest first (with a
	// Limit, the newest Limit of them, still oldest first).
	ListUsage(ctx context.Context, f UsageFilter) ([]UsageSample, error)
	// PruneUsage deletes samples taken before before, and returns how
	// many.
	PruneUsage(ctx context.Context, before time.Time) (int, error)

	// AppendIntent journals that an action is about to start and returns
	// the entry's ID. Each call is a new entry.
	AppendIntent(ctx context.Context, in Intent) (int64, error)
	// RecordOutcome finishes a journal entry. Recording the same outcome
	// again (same result, reason and bytes; the first time stays) is
	// harmless; a different one is ErrConflict; an unknown ID is
	// ErrNotFound.
	RecordOutcome(ctx context.Context, id int64, out Outcome) error
	// ListJournal returns entries matching f, newest first.
	ListJournal(ctx context.Context, f JournalFilter) ([]JournalEntry, error)
	// Unfinished returns the entries with no outcome, oldest first: what a
	// crash left half done, for start-up recovery to finish or roll back.
	Unfinished(ctx context.Context) ([]JournalEntry, error)
	// PruneJournal deletes the journal entries whose outcome was recorded
	// before before, and the notices recorded before before together with
	// their delivery rows (the outbox's), and returns how many of each. An
	// entry without an outcome is kept whatever its age: start-up recovery
	// needs it. Runtimes, archives and everything else are not touched.
	// It works in transactions of at most PruneBatch entries and
	// PruneBatch notices each, so a large backlog never holds the write
	// lock long; a prune cut short (an error, a cancel) leaves whole
	// batches done and the rest for the next one. The outbox is the
	// caller's to keep: a before no later than now minus the notice
	// horizon deletes no notice still owed (an older one is never sent).
	PruneJournal(ctx context.Context, before time.Time) (JournalPruned, error)

	// Close releases the store. Calling it again returns nil.
	Close() error
}

// Adopter is implemented by a store that may hold records written before
// keys carried their source (an SQLite file of schema 1, migrated): their
// Key.Source is empty. A fresh store of a later schema never has such
// records and need not implement it.
type Adopter interface {
	// AdoptLegacy gives each legacy record {Backend, "", ID} to the key of
	// keys with that backend and ID (Source set): the runtime's record,
	// activity, holds, archives, notices and journal entries move to it in
	// one transaction. A key whose record exists already keeps it and
	// adopts nothing; a key without a legacy record is ignored. It returns
	// how many records moved. The caller passes only keys it knows to be
	// the one claimant of their legacy record.
	AdoptLegacy(ctx context.Context, keys []Key) (int, error)
}
