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

// ActivityAccepted is how many activity reports of a batch were taken.
type ActivityAccepted struct {
	Accepted int `json:"accepted"`
}

// Health is the daemon's liveness.
type Health struct {
	OK      bool   `json:"ok"`
	Version string `json:"version,omitempty"`
}
