package engine

import (
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// ChangeCode names what changed since a plan, so that its action is
// skipped.
type ChangeCode string

const (
	ChangeGone              ChangeCode = "gone"
	ChangeSource            ChangeCode = "source" // another source's runtime of the same backend and ID
	ChangePinned            ChangeCode = "pinned"
	ChangeLeased            ChangeCode = "leased"
	ChangeHeld              ChangeCode = "held"
	ChangeBusy              ChangeCode = "busy"
	ChangeLocked            ChangeCode = "locked" // the backend's own lock refused (a container started)
	ChangeState             ChangeCode = "state"
	ChangeActivity          ChangeCode = "activity"
	ChangeFiles             ChangeCode = "files" // fingerprint: paths, HEAD, the container
	ChangePath              ChangeCode = "path"
	ChangeNotScheduled      ChangeCode = "not_scheduled"
	ChangeRetentionExtended ChangeCode = "retention_extended"
	ChangeRegistered        ChangeCode = "registered"
)

// Change is why a planned action must not go on; zero when it may.
type Change struct {
	Code ChangeCode
	Text string // what changed, in words
}

// IsZero tells whether nothing changed that stops the action.
func (c Change) IsZero() bool { return c.Code == "" }

func changedBecause(code ChangeCode, text string) Change { return Change{Code: code, Text: text} }

// skip ends r as skipped because of c.
func (c Change) skip(r plan.Result) plan.Result {
	r.Outcome, r.Code, r.Reason = plan.Skip, plan.ChangedSincePlan, "changed since plan: "+c.Text
	return r
}

// recheck is the decision apply makes under a runtime's lock: given the
// action as planned and the runtime observed again (nil when it is gone),
// it says what changed, if anything, that forbids the action. It is pure
// (values in, a decision out), and apply never does more than the plan
// said: any change only takes the action away.
func recheck(a plan.Action, s *Seen, now time.Time) Change {
	if s == nil {
		return changedBecause(ChangeGone, "the runtime is gone")
	}
	rt := *s.Runtime
	if rt.Key != a.Key() {
		// Keys carry their source: a runtime of another source with the
		// same backend and ID is another runtime.
		return changedBecause(ChangeSource, "it is "+rt.Key.Unique()+", not "+a.Key().Unique())
	}
	rec := s.PolicyRecord()
	switch {
	case rec.Pinned || rt.Pinned != "":
		return changedBecause(ChangePinned, "pinned")
	case rec.LeaseUntil.After(now):
		return changedBecause(ChangeLeased, "leased until "+rec.LeaseUntil.UTC().Format(time.RFC3339))
	case s.HeldBy != "":
		return changedBecause(ChangeHeld, "held by "+s.HeldBy)
	case rt.Busy != "":
		return changedBecause(ChangeBusy, "busy: "+rt.Busy)
	case rt.State != a.Observed.State:
		return changedBecause(ChangeState, "now "+string(rt.State))
	case s.LastActive().After(a.Observed.LastActivity):
		return changedBecause(ChangeActivity, "new activity at "+s.LastActive().UTC().Format(time.RFC3339))
	case rt.Fingerprint != a.Observed.Fingerprint:
		return changedBecause(ChangeFiles, "its files or git state changed")
	case a.Step.Destructive() && len(a.Paths) > 0 && (len(a.Paths) != 1 || a.Paths[0] != rt.Path):
		return changedBecause(ChangePath, "its path changed")
	}
	if !a.Step.Destructive() {
		return Change{}
	}
	// The runtime must still be due: a notice canceled meanwhile, or a
	// retention extended, stops it.
	switch {
	case a.Step == backend.StepArchive && s.Record.ScheduledStep != string(backend.StepArchive):
		return changedBecause(ChangeNotScheduled, "no longer scheduled")
	case a.Step == backend.StepArchive && retentionExtended(s, now):
		return changedBecause(ChangeRetentionExtended, "retention extended")
	case a.Step == backend.StepDelete && a.Code == policy.RuleReleased && len(s.Record.Conversations) > 0:
		return changedBecause(ChangeRegistered, "a conversation owns it again")
	case a.Step == backend.StepDelete && a.Code == policy.RuleOrphan && s.orphanSince().IsZero():
		return changedBecause(ChangeRegistered, "registered by a host")
	case a.Step == backend.StepDelete && a.Code == policy.RuleOrphan && s.Record.ScheduledStep != string(backend.StepDelete):
		return changedBecause(ChangeNotScheduled, "no longer scheduled")
	}
	return Change{}
}

func retentionExtended(s *Seen, now time.Time) bool {
	c := policy.Candidate{Runtime: s.Runtime, Record: s.PolicyRecord(), Settings: s.Source.Settings}
	_, c.Can.Suspend = backend.As[backend.Suspender](s.Source.Backend)
	_, c.Can.IdleArchive = backend.As[backend.IdleLosesFiles](s.Source.Backend)
	ret, _ := policy.ArchiveAfter(&c)
	last := s.LastActive()
	return ret <= 0 || last.IsZero() || now.Sub(last) <= ret
}
