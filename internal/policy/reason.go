package policy

// Code names, in a stable snake_case word, why something was proposed,
// skipped, canceled or left alone. Decisions compare codes, never texts;
// the text (Reason.Text) is for people and carries the details. Codes are
// part of the JSON of plans and results (scripts may match them).
type Code string

// Why an action is proposed (the rule behind it).
const (
	RuleCaches    Code = "caches"       // caches of a stopped runtime
	RuleBudget    Code = "disk_budget"  // a filesystem over its high watermark
	RuleRetention Code = "retention"    // inactive longer than the retention
	RuleOrphan    Code = "orphan"       // no host owns it (registered_only), or its backend says nothing does
	RuleIdle      Code = "idle_suspend" // running, idle longer than idle_suspend
	// RuleIdleArchive: idle longer than idle_suspend on a backend that
	// cannot suspend and whose idling loses the files: archived, then
	// deleted, with notice.
	RuleIdleArchive Code = "idle_archive"
	RuleLifetime    Code = "lifetime_cap" // running longer than max_lifetime
	RuleRequest     Code = "request"      // asked for explicitly
	RuleReleased    Code = "released"     // the last conversation that owned it let go
)

// Protections: why no step may touch a runtime now.
const (
	Pinned       Code = "pinned"
	Leased       Code = "leased"
	Held         Code = "held"
	Busy         Code = "busy"
	Running      Code = "running"
	Starting     Code = "starting"
	StateUnknown Code = "state_unknown"
)

// Other reasons a step is not taken, or a notice is canceled.
const (
	TooRecent        Code = "too_recent"         // no longer over its retention
	ActiveAgain      Code = "active_again"       // activity since the notice
	Registered       Code = "registered"         // a host owns it again
	OrphanInstead    Code = "orphan_instead"     // an orphan now: deleted instead of archived
	UnderBudget      Code = "under_budget"       // the disk budget is met
	CannotRemove     Code = "cannot_remove"      // its backend cannot remove it
	UnsavedNoArchive Code = "unsaved_no_archive" // unsaved work and no way to archive it
	Unarchivable     Code = "unarchivable"       // holds what cannot be archived and restored exactly
	KeptFolder       Code = "kept"               // an ignored folder kept: not rebuildable
	CannotSuspend    Code = "cannot_suspend"     // its backend cannot suspend it
	CannotReclaim    Code = "cannot_reclaim"     // its backend cannot reclaim files
	NothingToReclaim Code = "nothing_to_reclaim" // no caches or dependencies selected
	NotFound         Code = "not_found"          // no such runtime in this pass
	AlreadyGone      Code = "already_gone"       // archived, deleted or missing
	AlreadyPlanned   Code = "already_planned"    // another step was planned for it
	UnknownStep      Code = "unknown_step"
)

// Protection tells whether c, as a reason, protects a runtime from every
// step (the lifetime cap aside).
func (c Code) Protection() bool {
	switch c {
	case Pinned, Leased, Held, Busy, Running, Starting, StateUnknown:
		return true
	}
	return false
}

// Reason is a typed reason: its code, and the words that explain it
// ("pinned: demo tomorrow", "leased until 2026-05-01T10:00:00Z").
type Reason struct {
	Code Code
	Text string
}

// IsZero tells whether there is no reason.
func (r Reason) IsZero() bool { return r.Code == "" }

func (r Reason) String() string { return r.Text }

func because(c Code, text string) Reason { return Reason{Code: c, Text: text} }
