package views

import (
	"time"

	"github.com/reclaimer/reclaimer/internal/catalog"
	"github.com/reclaimer/reclaimer/internal/native"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// The plan and its parts, the result of applying it, a problem: the
// shapes of package plan, which the engine makes, are views as they are.
type (
	Plan    = plan.Plan
	Action  = plan.Action
	Skipped = plan.Skipped
	Notice  = plan.Notice
	Usage   = plan.Usage
	Applied = plan.Applied
	Result  = plan.Result
	Problem = plan.Problem
)

// An archive as listed and shown whole, and a prune of archives: the
// shapes of package catalog.
type (
	Archive      = catalog.Entry
	PrunePlan    = catalog.PrunePlan
	PruneApplied = catalog.PruneApplied
)

// NativeReport is `native plan` and `native sync`: package native's shape.
type NativeReport = native.Report

// Runtime is one runtime: what its backend last showed of it and what the
// ledger knows (its decisions, holds, schedule, archive).
type Runtime struct {
	ID      string `json:"id"`
	Backend string `json:"backend"`
	// Source is the stable name of the source that lists it ("" for a
	// record from before runtimes were keyed by source); SourceLabel the
	// source as its table was written.
	Source      string            `json:"source"`
	SourceLabel string            `json:"source_label,omitempty"`
	State       string            `json:"state"`
	Path        string            `json:"path,omitempty"`
	Home        string            `json:"home,omitempty"`
	Workspaces  []string          `json:"workspaces,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	// LastActivity is the newest activity known, and LastActivityFrom
	// where it comes from: "observed" (its files, its provider),
	// "reported" (touch, the API) or "" (none known).
	LastActivity     time.Time `json:"last_activity,omitzero"`
	LastActivityFrom string    `json:"last_activity_from,omitempty"`
	CreatedAt        time.Time `json:"created_at,omitzero"`
	FirstSeen        time.Time `json:"first_seen,omitzero"`
	// SizeBytes is what it holds on disk (its folder, or its home and
	// workspaces, and a writable layer); -1 when not measured.
	SizeBytes int64 `json:"size_bytes"`
	// Unsaved describes work a removal would lose without an archive; Busy
	// why it is in use right now.
	Unsaved string `json:"unsaved,omitempty"`
	Busy    string `json:"busy,omitempty"`
	// Merged says why commits on no remote are not unsaved ("merged into
	// main"); Orphan why its backend knows nothing owns it (the orphan
	// sweep removes it).
	Merged string `json:"merged,omitempty"`
	Orphan string `json:"orphan,omitempty"`
	// Protection is the protection in force, if any: what keeps every step
	// away (pinned, leased, held, busy, running, ...).
	Protection *Reason   `json:"protection,omitempty"`
	Pinned     bool      `json:"pinned"`
	PinReason  string    `json:"pin_reason,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// HeldBy and HeldUntil name the hold in force that lasts longest.
	HeldBy    string    `json:"held_by,omitempty"`
	HeldUntil time.Time `json:"held_until,omitzero"`
	// Retention is its retention in words ("14d", "off"); RetentionSet
	// tells that it is its own (reclaimer retention), not its source's.
	Retention    string `json:"retention"`
	RetentionSet bool   `json:"retention_set"`
	// ScheduledStep is the destructive step announced for it, due at
	// ScheduledDue, announced at ScheduledAt.
	ScheduledStep   string    `json:"scheduled_step,omitempty"`
	ScheduledDue    time.Time `json:"scheduled_due,omitzero"`
	ScheduledAt     time.Time `json:"scheduled_at,omitzero"`
	ArchiveID       string    `json:"archive_id,omitempty"`
	ArchiveLocation string    `json:"archive_location,omitempty"`
	// Conversations are the owners hosts registered.
	Conversations []string `json:"conversations,omitempty"`
	// CanResume is false once archived or deleted.
	CanResume bool `json:"can_resume"`
	// IdleSuspend is what idle reclaiming does to it, in words: the
	// idle_suspend in force ("20m", "off"); "archive then delete after
	// 30m" where its backend cannot suspend and idling loses the files;
	// "not offered: ..." where its backend cannot suspend at all.
	IdleSuspend string `json:"idle_suspend,omitempty"`
}

// Reason is a typed reason: its code and its words.
type Reason struct {
	Code   policy.Code `json:"code"`
	Reason string      `json:"reason"`
}

// RuntimeList is one page of runtimes, in key order.
type RuntimeList struct {
	Runtimes []Runtime `json:"runtimes"`
	// NextCursor continues the listing; empty on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
	// Problems are what the observation behind the page could not look at.
	Problems []Problem `json:"problems"`
}

// Filesystem is one managed filesystem: its usage, its watermarks, and
// what the dry run could free on it now.
type Filesystem struct {
	Path       string  `json:"path"`
	TotalBytes int64   `json:"total_bytes"`
	UsedBytes  int64   `json:"used_bytes"`
	AvailBytes int64   `json:"avail_bytes"`
	Fraction   float64 `json:"fraction"`
	// High and Low are the disk budget's watermarks (0: no budget).
	High float64 `json:"high"`
	Low  float64 `json:"low"`
	// Runtimes is how many runtimes keep their files there.
	Runtimes int `json:"runtimes"`
	// ReclaimableBytesByStep is what the dry run's actions would free
	// there, by step.
	ReclaimableBytesByStep map[string]int64 `json:"reclaimable_bytes_by_step"`
	ReclaimableBytes       int64            `json:"reclaimable_bytes"`
	// Forecast is when it would be full at the rate of the last hours'
	// usage samples; nil without two samples in that window.
	Forecast *Forecast `json:"forecast,omitempty"`
}

// Forecast is when a filesystem would be full at its recent rate.
type Forecast struct {
	// Growing: its free space shrank over the window. FullAt and
	// FullInHours are set only then.
	Growing bool `json:"growing"`
	// RateBytesPerHour is how fast its free space shrinks (negative: it
	// grows), fitted over the samples of the window.
	RateBytesPerHour float64   `json:"rate_bytes_per_hour"`
	FullAt           time.Time `json:"full_at,omitzero"`
	FullInHours      float64   `json:"full_in_hours,omitempty"`
	// Window is the time the samples used span ("6h"), Samples how many.
	Window  string `json:"window"`
	Samples int    `json:"samples"`
	// Text says it in words: "full in about 14 hours at the last 6 hours'
	// rate", or "not growing".
	Text string `json:"text"`
}

// UsageHistory is the usage of the managed filesystems over time: the
// samples each pass of the daemon records, and each one's forecast.
type UsageHistory struct {
	Since       time.Time     `json:"since"`
	Filesystems []UsageSeries `json:"filesystems"`
}

// UsageSeries is one filesystem's usage samples, oldest first.
type UsageSeries struct {
	Path string `json:"path"`
	// High and Low are its watermarks in the configuration in force (0:
	// no budget, or not a filesystem the last pass measured).
	High    float64      `json:"high"`
	Low     float64      `json:"low"`
	Samples []UsagePoint `json:"samples"`
	// Forecast is nil without two samples in its window.
	Forecast *Forecast `json:"forecast,omitempty"`
}

// UsagePoint is one usage sample.
type UsagePoint struct {
	At         time.Time `json:"at"`
	UsedBytes  int64     `json:"used_bytes"`
	AvailBytes int64     `json:"avail_bytes"`
	TotalBytes int64     `json:"total_bytes"`
	// ReclaimableBytesByStep is what the pass's plan would free there.
	ReclaimableBytesByStep map[string]int64 `json:"reclaimable_bytes_by_step,omitempty"`
}

// SourceStatus is what the last observation learned of one source.
type SourceStatus struct {
	Name    string `json:"name"`
	Label   string `json:"label"`
	Backend string `json:"backend"`
	// Listed: the source could be read (problems say why not).
	Listed   bool `json:"listed"`
	Runtimes int  `json:"runtimes"`
}

// Status is the state of the host: filesystems, sources, runtimes by
// state and backend, what is reclaimable now, what is scheduled, the last
// and next pass, and the problems.
type Status struct {
	// ObservedAt is when what it shows was observed.
	ObservedAt             time.Time        `json:"observed_at"`
	Filesystems            []Filesystem     `json:"filesystems"`
	Sources                []SourceStatus   `json:"sources"`
	RuntimesByState        map[string]int   `json:"runtimes_by_state"`
	RuntimesByBackend      map[string]int   `json:"runtimes_by_backend"`
	ReclaimableBytesByStep map[string]int64 `json:"reclaimable_bytes_by_step"`
	ReclaimableBytes       int64            `json:"reclaimable_bytes"`
	Scheduled              []Notice         `json:"scheduled"`
	// LastPass and NextPassAt are the daemon's (none without one).
	LastPass   *PassSummary `json:"last_pass,omitempty"`
	NextPassAt time.Time    `json:"next_pass_at,omitzero"`
	// LastAction is the journal's newest entry.
	LastAction *JournalEntry `json:"last_action,omitempty"`
	Problems   []Problem     `json:"problems"`
	// Fleet is set when the ledger is PostgreSQL, shared by replicas.
	Fleet *Fleet `json:"fleet,omitempty"`
}

// Fleet is the replicas sharing a PostgreSQL ledger, and who leads the
// remote sources.
type Fleet struct {
	// Replica is the name of the replica that answered.
	Replica string `json:"replica"`
	// Leading: the replica that answered leads now.
	Leading bool `json:"leading"`
	// Leader is the leading replica's name; empty when nobody holds the
	// lease (an election is due).
	Leader string `json:"leader,omitempty"`
	// LeaderSince is when its lease was taken, Generation the lease's
	// fencing token, LeaseExpiresAt when it runs out unless renewed (all
	// by the database's clock).
	LeaderSince    time.Time `json:"leader_since,omitzero"`
	Generation     int64     `json:"generation,omitempty"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	// LeaderAPI is where the leader's API listens, as it configured it.
	LeaderAPI string    `json:"leader_api,omitempty"`
	Replicas  []Replica `json:"replicas"`
}

// Replica is one replica of a fleet as it last reported itself.
type Replica struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// API is where its API listens, as configured.
	API           string    `json:"api,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// Alive: its last heartbeat is younger than two leases.
	Alive  bool `json:"alive"`
	Leader bool `json:"leader"`
}

// PassSummary is one pass that applied.
type PassSummary struct {
	PlanID     string    `json:"plan_id"`
	Trigger    string    `json:"trigger"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Actions    int       `json:"actions"`
	FreedBytes int64     `json:"freed_bytes"`
	Failed     int       `json:"failed"`
	Problems   int       `json:"problems"`
	Error      string    `json:"error,omitempty"`
}

// Pass is a pass asked for: its plan and, unless a dry run, what applying
// it did.
type Pass struct {
	Plan    *Plan    `json:"plan"`
	Applied *Applied `json:"applied,omitempty"`
}

// JournalEntry is one journaled action.
type JournalEntry struct {
	ID      int64    `json:"id"`
	PlanID  string   `json:"plan_id,omitempty"`
	Source  string   `json:"source"`
	Backend string   `json:"backend"`
	Runtime string   `json:"runtime"`
	Step    string   `json:"step"`
	Paths   []string `json:"paths,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	// At is when it was journaled (before the action).
	At time.Time `json:"at"`
	// Outcome is nil while the action is unfinished.
	Outcome *JournalOutcome `json:"outcome,omitempty"`
}

// JournalOutcome is how a journaled action ended.
type JournalOutcome struct {
	Result     string    `json:"result"`
	Reason     string    `json:"reason,omitempty"`
	FreedBytes int64     `json:"freed_bytes"`
	At         time.Time `json:"at"`
}

// Journal is one page of the journal, newest first.
type Journal struct {
	Entries []JournalEntry `json:"entries"`
	// NextBefore continues the listing (the before of the next page); 0
	// on the last page.
	NextBefore int64 `json:"next_before,omitempty"`
}

// Marked is one runtime after a pin, unpin, lease, retention or touch.
type Marked struct {
	Runtime Runtime `json:"runtime"`
	// Message says what changed, in words: "pinned: never touched until
	// unpinned", "leased until 2026-05-01T10:00:00Z (capped by max_lifetime)".
	Message string `json:"message"`
	// Capped tells that a lease was shortened to the lifetime cap.
	Capped bool `json:"capped,omitempty"`
}

// Lease is a lease as recorded.
type Lease struct {
	LeaseUntil time.Time `json:"lease_until"`
	Capped     bool      `json:"capped"`
}

// Hold is a hold taken or renewed.
type Hold struct {
	HoldID    string    `json:"hold_id"`
	Holder    string    `json:"holder"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Release is what a conversation letting go of a runtime did.
type Release struct {
	ID            string   `json:"id"`
	Backend       string   `json:"backend"`
	Source        string   `json:"source"`
	Conversations []string `json:"conversations"` // the owners left
	Removed       bool     `json:"removed"`
	Result        *Result  `json:"result,omitempty"`
}

// Restored is what a restore did.
type Restored struct {
	ID        string `json:"id"`
	Backend   string `json:"backend"`
	Source    string `json:"source"`
	ArchiveID string `json:"archive_id"`
	// Path is where it was restored.
	Path string `json:"path"`
	// Elsewhere: restored into another folder (--to): a new runtime as
	// far as its source can tell; the archived record stays.
	Elsewhere bool `json:"elsewhere"`
	// Command, when set, is what brings it back where its backend does
	// not restore by itself (Modal: the command that starts a sandbox from
	// the archived image); nothing was restored, Path is empty and the
	// record stays archived.
	Command string `json:"command,omitempty"`
}

// Prune is archives prune: its plan, and unless a dry run what applying
// it did.
type Prune struct {
	Plan    *PrunePlan    `json:"plan"`
	Applied *PruneApplied `json:"applied,omitempty"`
}

// ActivityAccepted is how many activity reports of a batch were taken,
// and which named runtimes it did not know.
type ActivityAccepted struct {
	Accepted int `json:"accepted"`
	// Unknown are reports of runtimes no pass has seen: recorded all the
	// same (a host may report before the first pass sees its runtime),
	// and named so that a wrong ID does not pass unnoticed.
	Unknown []ActivityRef `json:"unknown,omitempty"`
	// Ignored are reports of runtimes archived or deleted: nothing to keep
	// alive, not recorded.
	Ignored []ActivityRef `json:"ignored,omitempty"`
}

// ActivityRef names the runtime of one activity report.
type ActivityRef struct {
	Backend string `json:"backend"`
	Source  string `json:"source"`
	ID      string `json:"id"`
	// State is the ledger's state of an ignored runtime.
	State string `json:"state,omitempty"`
}

// Health is the daemon's liveness.
type Health struct {
	OK      bool   `json:"ok"`
	Version string `json:"version,omitempty"`
}

// LedgerCopy is what `reclaimer ledger copy` copied from a SQLite ledger
// into PostgreSQL, and how it was checked.
type LedgerCopy struct {
	From string `json:"from"`
	// To is the target's URL, its password hidden.
	To      string `json:"to"`
	Replica string `json:"replica"`
	// Renamed are the local sources whose runtimes now carry the
	// replica's name: old source name → new.
	Renamed map[string]string `json:"renamed"`
	// Counts are the records copied, by kind; read back from the target
	// they were the same.
	Counts map[string]int `json:"counts"`
	// Digest is the SHA-256 of every record, on both sides.
	Digest string `json:"digest"`
	// Foreign are sources the records name that this configuration does
	// not have: copied as they are.
	Foreign []string `json:"foreign,omitempty"`
}

// Explain is why one runtime is where it is: what the pass observed of
// it, every policy in force and what it concluded, in the order the
// policies run, what the next pass would do with it, and when its next
// step would be due if nothing changed. It comes from a dry run: the same
// observation and the same policy code as a pass.
type Explain struct {
	Runtime Runtime `json:"runtime"`
	// ObservedAt is when the dry run behind it observed the world.
	ObservedAt  time.Time   `json:"observed_at"`
	Observation Observation `json:"observation"`
	// Protection is what keeps every step away from it now, if anything.
	Protection *Reason `json:"protection,omitempty"`
	// Policies are the verdicts of the policies in force, in order;
	// PoliciesOff the policies not in force for it (off in its settings,
	// or not applicable, as the disk budget of a remote sandbox).
	Policies    []Verdict     `json:"policies"`
	PoliciesOff []policy.Code `json:"policies_off"`
	NextPass    NextPass      `json:"next_pass"`
	// NextStep is the step that comes first if nothing changes; nil when
	// none would come on its own (pinned, held, busy, no policy on).
	NextStep *NextStep `json:"next_step,omitempty"`
	// Problems are what the dry run could not look at.
	Problems []Problem `json:"problems"`
	// Note says that this is a preview, not a promise.
	Note string `json:"note"`
}

// Observation is what the policies were given of one runtime.
type Observation struct {
	// Listed: its source listed it in this pass (else the ledger's record
	// is all there is, and no policy looked at it).
	Listed bool   `json:"listed"`
	State  string `json:"state"`
	// LastActivity is the newest of ObservedActivity (its files, its
	// provider) and ReportedActivity (touch, the API); LastActivityFrom
	// says which ("observed", "reported", or "" when none is known).
	LastActivity     time.Time `json:"last_activity,omitzero"`
	LastActivityFrom string    `json:"last_activity_from,omitempty"`
	ObservedActivity time.Time `json:"observed_activity,omitzero"`
	ReportedActivity time.Time `json:"reported_activity,omitzero"`
	CreatedAt        time.Time `json:"created_at,omitzero"`
	// SizeBytes is its size on disk (-1 unknown); BytesByStep what each
	// step would free of it now (a step its backend cannot take is
	// absent).
	SizeBytes   int64            `json:"size_bytes"`
	BytesByStep map[string]int64 `json:"bytes_by_step"`
	// Unsaved is the work a removal would lose without an archive; Busy
	// the process using it.
	Unsaved string `json:"unsaved,omitempty"`
	Busy    string `json:"busy,omitempty"`
	// Filesystem is the managed filesystem its files are on ("" remote).
	Filesystem string `json:"filesystem,omitempty"`
	// Capabilities are the roles of its backend the policies may use:
	// "suspend", "delete", "export", "files".
	Capabilities []string `json:"capabilities"`
}

// Verdict is what one policy concluded about one runtime.
type Verdict struct {
	// Policy is the rule (caches, lifetime_cap, idle_suspend, orphan,
	// retention, request, disk_budget) and Step the step it proposes.
	Policy policy.Code `json:"policy"`
	Step   string      `json:"step"`
	// Outcome: acts (the next pass takes the step), announces (the next
	// pass announces it, due at Due), due (announced, due at Due), cancels
	// (the next pass withdraws the notice) or not.
	Outcome policy.Outcome `json:"outcome"`
	// Code and Reason say why: the rule's reason when it acts, else what
	// stops it (pinned, leased, held, busy, running, under_budget,
	// too_recent, cannot_*, ...).
	Code   policy.Code `json:"code"`
	Reason string      `json:"reason"`
	// Due is when the step is taken if nothing changes; absent when it
	// would not come on its own.
	Due time.Time `json:"due,omitzero"`
}

// NextPass is what the next pass would do with one runtime.
type NextPass struct {
	// At is when the daemon's next pass is due (absent without a daemon).
	At time.Time `json:"at,omitzero"`
	// Summary says it in words: "archive it (retention)", "nothing".
	Summary   string    `json:"summary"`
	Actions   []Action  `json:"actions"`
	Skipped   []Skipped `json:"skipped"`
	Scheduled []Notice  `json:"scheduled"`
	Canceled  []Notice  `json:"canceled"`
}

// NextStep is the step due first if nothing changes.
type NextStep struct {
	Step   string      `json:"step"`
	Policy policy.Code `json:"policy"`
	Due    time.Time   `json:"due"`
	Reason string      `json:"reason"`
}
