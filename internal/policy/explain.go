package policy

import (
	"fmt"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// Outcome is what one rule concluded about one runtime.
type Outcome string

const (
	// Acts: the next pass takes the step.
	Acts Outcome = "acts"
	// Announces: the next pass announces the step, due at Verdict.Due.
	Announces Outcome = "announces"
	// Due: announced already; the step is due at Verdict.Due.
	Due Outcome = "due"
	// Cancels: the next pass withdraws the notice in force.
	Cancels Outcome = "cancels"
	// Not: no step; the reason says why, and Verdict.Due, when set, is
	// when the rule would act if nothing changed.
	Not Outcome = "not"
)

// Verdict is what one rule concluded about one runtime in one pass.
type Verdict struct {
	// Rule is the rule (RuleCaches, RuleRetention, ...).
	Rule    Code
	Step    backend.Step
	Outcome Outcome
	// Reason is the rule's reason when it acts, announces or waits, the
	// reason it does not (a protection, too_recent, under_budget, a
	// missing capability, ...) otherwise, and why a notice is withdrawn.
	Reason Reason
	// Due is when the step is taken if nothing changes (the pass time for
	// Acts); zero when it would not come on its own (pinned, held, busy).
	Due time.Time
}

// Explanation is every verdict of the rules in force for one runtime in
// one pass, and what that pass decides for it. It comes from the very
// branches Decide takes (Decide records them when asked), so it cannot
// disagree with the plan.
type Explanation struct {
	Key backend.Key
	// Found: the runtime is among the candidates of the pass.
	Found bool
	// Protection is what keeps every step away from it, if anything.
	Protection Reason
	// Gone says why no rule looks at it (archived, deleted, missing).
	Gone Reason
	// Verdicts are the rules in force, in the order Decide runs them.
	Verdicts []Verdict
	// Off are the rules not in force for it (switched off in its settings,
	// or not applicable: the disk budget of a runtime on no managed
	// filesystem).
	Off []Code
	// What the pass decides for it.
	Actions  []Action
	Skipped  []Skip
	Schedule []Notice
	Cancel   []Notice
	// Next is the verdict whose step comes first if nothing changes (nil
	// when none would come on its own).
	Next *Verdict
}

// Rules are the rules in the order Decide runs them.
var Rules = []Code{RuleCaches, RuleLifetime, RuleIdle, RuleOrphan, RuleRetention, RuleRequest, RuleBudget}

// NotRunning and NoActivity are reasons a rule gives in an explanation.
const (
	NotRunning Code = "not_running" // suspend: it is not running
	NoActivity Code = "no_activity" // no activity known: the rule cannot tell how long it has been idle
)

// Explain decides in as Decide does and reports, for the runtime k, every
// rule's verdict and what the pass decides for it.
func Explain(in Input, k backend.Key) Explanation {
	tr := &tracer{key: k}
	out := decide(in, tr)
	ex := Explanation{Key: k, Verdicts: tr.verdicts}
	for i := range in.Candidates {
		c := &in.Candidates[i]
		if c.Runtime.Key != k {
			continue
		}
		ex.Found = true
		if !c.Runtime.State.Present() {
			ex.Gone = because(AlreadyGone, "already "+string(c.Runtime.State))
		} else {
			ex.Protection = protection(c, in.Now)
		}
		ex.Off = offRules(in, c, tr.verdicts)
	}
	for _, a := range out.Actions {
		if a.Key == k {
			ex.Actions = append(ex.Actions, a)
		}
	}
	for _, s := range out.Skipped {
		if s.Key == k {
			ex.Skipped = append(ex.Skipped, s)
		}
	}
	for _, n := range out.Schedule {
		if n.Key == k {
			ex.Schedule = append(ex.Schedule, n)
		}
	}
	for _, n := range out.Cancel {
		if n.Key == k {
			ex.Cancel = append(ex.Cancel, n)
		}
	}
	for i := range ex.Verdicts {
		v := &ex.Verdicts[i]
		if v.Due.IsZero() || v.Outcome == Cancels {
			continue
		}
		if ex.Next == nil || v.Due.Before(ex.Next.Due) || (v.Due.Equal(ex.Next.Due) && v.Step.Destructive() && !ex.Next.Step.Destructive()) {
			ex.Next = v
		}
	}
	if ex.Next != nil {
		n := *ex.Next
		ex.Next = &n
	}
	return ex
}

// offRules are the rules of Rules that gave no verdict for c.
func offRules(in Input, c *Candidate, vs []Verdict) []Code {
	var off []Code
	for _, r := range Rules {
		found := false
		for _, v := range vs {
			if v.Rule == r {
				found = true
				break
			}
		}
		if !found && (r != RuleRequest || hasRequest(in, c.Runtime.Key)) {
			off = append(off, r)
		}
	}
	return off
}

func hasRequest(in Input, k backend.Key) bool {
	for _, r := range in.Requests {
		if r.Key == k {
			return true
		}
	}
	return false
}

// tracer collects the verdicts of one runtime while Decide runs; a nil
// tracer (Decide's) records nothing and costs a comparison.
type tracer struct {
	key      backend.Key
	verdicts []Verdict
}

// on tells whether the verdicts about k are wanted: callers building an
// expensive reason test it first.
func (t *tracer) on(k backend.Key) bool { return t != nil && t.key == k }

func (t *tracer) add(k backend.Key, rule Code, step backend.Step, o Outcome, r Reason, due time.Time) {
	if t.on(k) {
		t.verdicts = append(t.verdicts, Verdict{Rule: rule, Step: step, Outcome: o, Reason: r, Due: due})
	}
}

// blocked is the verdict of a rule that would act but for why: a lease
// ends, so the step is due when the lease and the rule's own time are
// both past; pins, holds and busy runtimes have no end anyone knows.
func (t *tracer) blocked(k backend.Key, rule Code, step backend.Step, why Reason, c *Candidate, ruleDue time.Time) {
	if !t.on(k) {
		return
	}
	var due time.Time
	if why.Code == Leased && !ruleDue.IsZero() {
		due = ruleDue
		if c.Record.LeaseUntil.After(due) {
			due = c.Record.LeaseUntil
		}
	}
	t.add(k, rule, step, Not, why, due)
}

// tooRecent is the reason a time rule has not come: "too recent by 3d
// (inactive 11d, retention 14d)".
func tooRecent(by time.Duration, what string, since time.Duration, setting string, limit time.Duration) Reason {
	return because(TooRecent, fmt.Sprintf("too recent by %s (%s %s, %s %s)", human(by), what, human(since), setting, human(limit)))
}
