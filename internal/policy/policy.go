package policy

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// Settings is the resolved policy of one runtime's source. Zero durations
// and fractions mean off.
type Settings struct {
	CacheDirs []string
	// Rebuildable and Keep are the dependencies step's rule: folder names
	// that are rebuildable whatever they hold, and name patterns that keep
	// any other ignored folder (config: the rebuildable and keep keys);
	// nil means the built-in lists.
	Rebuildable, Keep []string
	DiskHigh          float64
	DiskLow           float64
	Retention         time.Duration
	Grace             time.Duration
	IdleSuspend       time.Duration
	MaxLifetime       time.Duration
	// RegisteredOnly: a runtime no host registered (or whose last owning
	// conversation let go) is an orphan, deleted Grace after it became one.
	RegisteredOnly bool
}

// NeedsActivity tells whether the policies of s read a runtime's activity
// (or, the lifetime cap, when it started, which a container's light
// listing does not tell): only then does a pass observe every runtime of
// the source fully. A policy that reads activity adds itself here.
func (s Settings) NeedsActivity() bool {
	return s.Retention > 0 || s.IdleSuspend > 0 || s.DiskHigh > 0 || s.MaxLifetime > 0
}

// CapLease is the lease rule, the same for every edge: a lease keeps a
// runtime until until, but never past its lifetime cap (max_lifetime from
// born: its creation, or its first sighting when the backend does not
// tell). It returns the lease to record and whether it was shortened; ok
// is false when the runtime is past its cap already, and no lease can
// keep it.
func CapLease(s Settings, born, until, now time.Time) (lease time.Time, capped, ok bool) {
	if s.MaxLifetime <= 0 || born.IsZero() {
		return until, false, true
	}
	limit := born.Add(s.MaxLifetime)
	if !until.After(limit) {
		return until, false, true
	}
	if !limit.After(now) {
		return time.Time{}, false, false
	}
	return limit, true, true
}

// Record is what the ledger knows of a runtime.
type Record struct {
	Pinned     bool
	PinReason  string
	LeaseUntil time.Time
	// HeldBy names an active hold's holder; empty when none.
	HeldBy string
	// Retention overrides Settings.Retention when set (0: never).
	Retention *time.Duration
	// Activity is the newest activity reported to reclaimer.
	Activity time.Time
	// The notice in force, if any.
	Scheduled    backend.Step
	ScheduledAt  time.Time
	ScheduledDue time.Time
	// Owners is how many conversations a host registered as using it.
	Owners int
	// OrphanSince is when it last had no owner: when first seen if never
	// registered, when released otherwise; zero while owned.
	OrphanSince time.Time
}

// Capabilities are the roles a runtime's backend has.
type Capabilities struct {
	Suspend, Delete, Export, Files bool
	// IdleArchive: the backend cannot suspend and its provider idles a
	// runtime by discarding its files (backend.IdleLosesFiles): idle
	// reclaiming archives and then deletes, with notice, even a running
	// runtime (what it holds would otherwise be lost when it sleeps).
	IdleArchive bool
}

// Candidate is one runtime with everything the policies need.
type Candidate struct {
	Runtime  *backend.Runtime // read only: points into the caller's observation
	Record   Record
	Settings Settings
	Can      Capabilities
	// Filesystem identifies the managed filesystem holding the runtime's
	// files ("" for a remote runtime).
	Filesystem string
	// Caches and Dependencies are what the backend selected, with sizes.
	Caches       []backend.File
	Dependencies []backend.File
	// SizeBytes is the whole runtime's size, when known (-1 unknown).
	SizeBytes int64
}

// LastActive is the newest of recorded and observed activity.
func (c *Candidate) LastActive() time.Time {
	if c.Record.Activity.After(c.Runtime.LastActivity) {
		return c.Record.Activity
	}
	return c.Runtime.LastActivity
}

// Filesystem is a managed filesystem's usage and watermarks.
type Filesystem struct {
	ID         string  `json:"-"`
	Path       string  `json:"path"`
	UsedBytes  uint64  `json:"used_bytes"`
	AvailBytes uint64  `json:"avail_bytes"`
	Fraction   float64 `json:"fraction"`
	High       float64 `json:"high"`
	Low        float64 `json:"low"`
}

// Request asks for a step on one runtime now (delete on request).
type Request struct {
	Key  backend.Key
	Step backend.Step
	// Rule and Why say what asked for it when that was not a person (the
	// last conversation let go: RuleReleased); empty, RuleRequest.
	Rule Code
	Why  string
}

// Input is everything one pass observed.
type Input struct {
	Now         time.Time
	Candidates  []Candidate
	Filesystems []Filesystem
	Requests    []Request
	// Steps, when set, limits the pass to these steps.
	Steps []backend.Step
	// Only, when set, limits the pass to these runtimes.
	Only []backend.Key
}

// Action is one proposed step.
type Action struct {
	Key    backend.Key
	Step   backend.Step
	Paths  []string
	Bytes  int64
	Reason string
	// Filesystem the freed bytes return to, for the disk budget.
	Filesystem string
	// Code is the rule that proposed it (RuleCaches, RuleRetention, ...).
	Code Code
}

// Skip is a runtime a policy wanted to act on but may not.
type Skip struct {
	Key    backend.Key
	Step   backend.Step
	Reason string
	Code   Code
}

// Notice schedules (or cancels) a destructive step. Code is the rule of a
// schedule, or why a notice is canceled.
type Notice struct {
	Key    backend.Key
	Step   backend.Step
	Due    time.Time
	Reason string
	Code   Code
}

func skip(k backend.Key, step backend.Step, r Reason) Skip {
	return Skip{Key: k, Step: step, Reason: r.Text, Code: r.Code}
}

func notice(k backend.Key, step backend.Step, due time.Time, r Reason) Notice {
	return Notice{Key: k, Step: step, Due: due, Reason: r.Text, Code: r.Code}
}

// Output is the decision of one pass.
type Output struct {
	Actions  []Action
	Skipped  []Skip
	Schedule []Notice
	Cancel   []Notice
	Messages []string
}

// Decide runs every policy over in.
func Decide(in Input) Output { return decide(in, nil) }

// decide runs every policy over in; tr, when set, records the verdicts of
// every rule about one runtime at the branch that decides it (Explain).
func decide(in Input, tr *tracer) Output {
	var out Output
	cands := filter(in)
	acted := map[backend.Key]bool{} // destructive action or suspend already proposed
	freed := map[string]uint64{}    // bytes each filesystem gets back this pass

	for i := range cands {
		c := &cands[i]
		if !c.Runtime.State.Present() {
			continue
		}
		why := protection(c, in.Now)
		k := c.Runtime.Key

		// Caches.
		if wants(in, backend.StepCaches) && c.Can.Files && len(c.Caches) > 0 {
			if !why.IsZero() {
				out.Skipped = append(out.Skipped, skip(k, backend.StepCaches, why))
				tr.blocked(k, RuleCaches, backend.StepCaches, why, c, in.Now)
			} else {
				r := because(RuleCaches, "caches of a stopped runtime")
				a := filesAction(c, backend.StepCaches, c.Caches, r)
				out.Actions = append(out.Actions, a)
				freed[c.Filesystem] += uint64(a.Bytes)
				tr.add(k, RuleCaches, backend.StepCaches, Acts, r, in.Now)
			}
		} else if tr.on(k) && wants(in, backend.StepCaches) && len(c.Settings.CacheDirs) > 0 {
			switch {
			case !c.Can.Files:
				tr.add(k, RuleCaches, backend.StepCaches, Not, because(CannotReclaim, "its backend cannot reclaim files"), time.Time{})
			case !why.IsZero():
				tr.blocked(k, RuleCaches, backend.StepCaches, why, c, in.Now)
			default:
				tr.add(k, RuleCaches, backend.StepCaches, Not, because(NothingToReclaim, "no cache folders or core dumps to reclaim"), time.Time{})
			}
		}

		// Idle suspend and lifetime cap.
		suspendRule := Code("")
		if wants(in, backend.StepSuspend) && c.Can.Suspend && c.Runtime.State.Active() {
			if reason := suspendReason(c, in.Now); !reason.IsZero() {
				suspendRule = reason.Code
				if c.Record.Pinned || c.Runtime.Pinned != "" {
					out.Skipped = append(out.Skipped, skip(k, backend.StepSuspend, pinReason(c)))
					tr.add(k, reason.Code, backend.StepSuspend, Not, pinReason(c), time.Time{})
				} else if reason.Code == RuleIdle && !why.IsZero() && why.Code != Running && why.Code != Starting {
					// Idleness is no reason to stop what is leased, held or
					// busy; the lifetime cap, a hard cap, is.
					out.Skipped = append(out.Skipped, skip(k, backend.StepSuspend, why))
					tr.blocked(k, reason.Code, backend.StepSuspend, why, c, in.Now)
				} else {
					out.Actions = append(out.Actions, Action{Key: k, Step: backend.StepSuspend, Reason: reason.Text, Code: reason.Code})
					acted[k] = true
					tr.add(k, reason.Code, backend.StepSuspend, Acts, reason, in.Now)
				}
			}
		}
		if tr.on(k) && wants(in, backend.StepSuspend) {
			traceSuspend(tr, c, in.Now, why, suspendRule)
		}

		// Orphan sweep, then retention with notice: an orphan is deleted
		// (archived first when it holds unsaved work), so retention has
		// nothing to add.
		if wants(in, backend.StepDelete) && !acted[k] && orphan(&out, c, in.Now, why, acted, tr) {
			if tr.on(k) && wants(in, backend.StepArchive) && (effectiveRetention(c) > 0 || c.Record.Scheduled == backend.StepArchive) {
				tr.add(k, RuleRetention, backend.StepArchive, Not, because(OrphanInstead, "an orphan: the orphan sweep decides instead"), time.Time{})
			}
			continue
		}
		if tr.on(k) && wants(in, backend.StepDelete) && acted[k] && sweepsOrphans(c) {
			tr.add(k, RuleOrphan, backend.StepDelete, Not, because(AlreadyPlanned, "another step was already planned for it in this pass"), time.Time{})
		}
		if wants(in, backend.StepArchive) && !acted[k] {
			retention(&out, c, in.Now, why, acted, tr)
		} else if tr.on(k) && wants(in, backend.StepArchive) && (effectiveRetention(c) > 0 || c.Record.Scheduled == backend.StepArchive) {
			tr.add(k, RuleRetention, backend.StepArchive, Not, because(AlreadyPlanned, "another step was already planned for it in this pass"), time.Time{})
		}
	}

	// Explicit requests.
	for _, r := range in.Requests {
		if !wants(in, r.Step) || (len(in.Only) > 0 && !slices.Contains(in.Only, r.Key)) {
			continue // outside this pass
		}
		if why := request(&out, cands, r, in.Now, acted, tr); !why.IsZero() {
			out.Skipped = append(out.Skipped, skip(r.Key, r.Step, why))
			tr.add(r.Key, RuleRequest, r.Step, Not, why, time.Time{})
		}
	}

	if wants(in, backend.StepDependencies) {
		budget(&out, in, cands, freed, acted, tr)
	}
	reportProtected(&out, in, cands, acted)
	return out
}

// reportProtected lists, once, each present runtime that protection keeps
// from every step and that no policy already reported, so a plan tells why
// a busy, pinned, leased or held runtime was left alone.
func reportProtected(out *Output, in Input, cands []Candidate, acted map[backend.Key]bool) {
	reported := map[backend.Key]bool{}
	for _, s := range out.Skipped {
		reported[s.Key] = true
	}
	for _, a := range out.Actions {
		reported[a.Key] = true
	}
	for i := range cands {
		c := &cands[i]
		k := c.Runtime.Key
		if reported[k] || acted[k] || !c.Runtime.State.Present() {
			continue
		}
		if why := protection(c, in.Now); !why.IsZero() && why.Code != Running && why.Code != Starting {
			out.Skipped = append(out.Skipped, skip(k, "", why))
		}
	}
}

// request turns one explicit request into an action, or says why not.
func request(out *Output, cands []Candidate, r Request, now time.Time, acted map[backend.Key]bool, tr *tracer) Reason {
	if !r.Step.Valid() {
		return because(UnknownStep, fmt.Sprintf("unknown step %q", r.Step))
	}
	c := find(cands, r.Key)
	switch {
	case c == nil:
		return because(NotFound, "not found")
	case !c.Runtime.State.Present():
		return because(AlreadyGone, "already "+string(c.Runtime.State))
	case acted[r.Key]:
		return because(AlreadyPlanned, "another step was already planned for it in this pass")
	}
	if why := protection(c, now); !why.IsZero() {
		return why
	}
	requested := because(RuleRequest, "requested")
	if r.Rule != "" {
		requested = because(r.Rule, r.Why)
	}
	a := Action{Key: r.Key, Step: r.Step, Reason: requested.Text, Code: requested.Code, Filesystem: c.Filesystem}
	switch r.Step {
	case backend.StepArchive, backend.StepDelete:
		if why := cannotRemove(c); !why.IsZero() {
			return why
		}
		a.Paths, a.Bytes = runtimePaths(c), max(c.SizeBytes, 0)
		acted[r.Key] = true
	case backend.StepSuspend:
		if !c.Can.Suspend {
			return because(CannotSuspend, "its backend cannot suspend it")
		}
		acted[r.Key] = true
	case backend.StepCaches, backend.StepDependencies:
		files := c.Caches
		if r.Step == backend.StepDependencies {
			files = backend.Shed(c.Dependencies)
			reportKept(out, c)
		}
		switch {
		case !c.Can.Files:
			return because(CannotReclaim, "its backend cannot reclaim files")
		case len(files) == 0:
			return because(NothingToReclaim, "nothing to reclaim")
		}
		for _, x := range out.Actions {
			if x.Key == r.Key && x.Step == r.Step {
				// The policy already proposed it.
				tr.add(r.Key, RuleRequest, r.Step, Not, because(AlreadyPlanned, "the "+string(x.Code)+" rule proposes it already"), time.Time{})
				return Reason{}
			}
		}
		a = filesAction(c, r.Step, files, requested)
	}
	out.Actions = append(out.Actions, a)
	tr.add(r.Key, RuleRequest, r.Step, Acts, requested, now)
	return Reason{}
}

// filter returns the candidates of the pass in key order. Decide only
// reads them; it copies the input only when it must drop or reorder some,
// since the engine passes a host's candidates sorted, and a copy of
// 100,000 of them is most of a large pass's garbage.
func filter(in Input) []Candidate {
	byKey := func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(a.Runtime.Backend, b.Runtime.Backend), cmp.Compare(a.Runtime.ID, b.Runtime.ID))
	}
	if len(in.Only) == 0 && slices.IsSortedFunc(in.Candidates, byKey) {
		return in.Candidates
	}
	cands := slices.Clone(in.Candidates)
	if len(in.Only) > 0 {
		cands = slices.DeleteFunc(cands, func(c Candidate) bool { return !slices.Contains(in.Only, c.Runtime.Key) })
	}
	slices.SortStableFunc(cands, byKey)
	return cands
}

func wants(in Input, s backend.Step) bool {
	return len(in.Steps) == 0 || slices.Contains(in.Steps, s)
}

func find(cands []Candidate, k backend.Key) *Candidate {
	for i := range cands {
		if cands[i].Runtime.Key == k {
			return &cands[i]
		}
	}
	return nil
}

func pinReason(c *Candidate) Reason {
	if c.Record.Pinned {
		if c.Record.PinReason != "" {
			return because(Pinned, "pinned: "+c.Record.PinReason)
		}
		return because(Pinned, "pinned")
	}
	return because(Pinned, "pinned: "+c.Runtime.Pinned)
}

// Protection says why no step may touch c now; zero when it may. The
// lifetime cap aside, every policy leaves a protected runtime alone, and
// apply re-checks the same protections under the runtime's lock.
func Protection(c *Candidate, now time.Time) Reason { return protection(c, now) }

func protection(c *Candidate, now time.Time) Reason {
	switch {
	case c.Record.Pinned || c.Runtime.Pinned != "":
		return pinReason(c)
	case c.Record.LeaseUntil.After(now):
		return because(Leased, "leased until "+c.Record.LeaseUntil.UTC().Format(time.RFC3339))
	case c.Record.HeldBy != "":
		return because(Held, "held by "+c.Record.HeldBy)
	case c.Runtime.Busy != "":
		return because(Busy, "busy: "+c.Runtime.Busy)
	case c.Runtime.State == backend.StateRunning:
		return because(Running, "running")
	case c.Runtime.State == backend.StateStarting:
		return because(Starting, "starting")
	case c.Runtime.State == backend.StateUnknown || c.Runtime.State == "":
		// It may be running behind a failed inspection.
		return because(StateUnknown, "state unknown")
	}
	return Reason{}
}

func suspendReason(c *Candidate, now time.Time) Reason {
	s := c.Settings
	if overLifetime(c, now) {
		return because(RuleLifetime, fmt.Sprintf("running %s, over the lifetime cap of %s", human(now.Sub(c.Runtime.CreatedAt)), human(s.MaxLifetime)))
	}
	if overIdle(c, now) {
		last := c.LastActive()
		return because(RuleIdle, fmt.Sprintf("idle %s, over idle_suspend %s", human(now.Sub(last)), human(s.IdleSuspend)))
	}
	return Reason{}
}

// overLifetime: the lifetime cap suspends c.
func overLifetime(c *Candidate, now time.Time) bool {
	s := c.Settings
	return s.MaxLifetime > 0 && !c.Runtime.CreatedAt.IsZero() && now.Sub(c.Runtime.CreatedAt) > s.MaxLifetime
}

// overIdle: idle suspend suspends c.
func overIdle(c *Candidate, now time.Time) bool {
	last := c.LastActive()
	return c.Settings.IdleSuspend > 0 && !last.IsZero() && now.Sub(last) > c.Settings.IdleSuspend
}

// traceSuspend gives the verdicts of the lifetime cap and idle suspend
// that the suspend branch of decide did not (decided is the rule it
// acted or skipped on, if any).
func traceSuspend(tr *tracer, c *Candidate, now time.Time, why Reason, decided Code) {
	k := c.Runtime.Key
	s := c.Settings
	type rule struct {
		code    Code
		inForce bool
		over    bool
	}
	for _, r := range []rule{{RuleLifetime, s.MaxLifetime > 0, overLifetime(c, now)}, {RuleIdle, s.IdleSuspend > 0, overIdle(c, now)}} {
		if !r.inForce || r.code == decided {
			continue
		}
		switch {
		case !c.Can.Suspend:
			tr.add(k, r.code, backend.StepSuspend, Not, because(CannotSuspend, "its backend cannot suspend it"), time.Time{})
		case !c.Runtime.State.Active():
			tr.add(k, r.code, backend.StepSuspend, Not, because(NotRunning, "not running: "+string(c.Runtime.State)), time.Time{})
		case r.over:
			// Both are over: the lifetime cap, checked first, decides.
			tr.add(k, r.code, backend.StepSuspend, Not, because(AlreadyPlanned, "the lifetime cap decides first"), time.Time{})
		case r.code == RuleLifetime && c.Runtime.CreatedAt.IsZero():
			tr.add(k, r.code, backend.StepSuspend, Not, because(NoActivity, "its start is not known"), time.Time{})
		case r.code == RuleLifetime && why.Code == Pinned:
			tr.add(k, r.code, backend.StepSuspend, Not, why, time.Time{})
		case r.code == RuleLifetime:
			age, due := now.Sub(c.Runtime.CreatedAt), c.Runtime.CreatedAt.Add(s.MaxLifetime)
			tr.add(k, r.code, backend.StepSuspend, Not, tooRecent(due.Sub(now), "running", age, "max_lifetime", s.MaxLifetime), due)
		case c.LastActive().IsZero():
			tr.add(k, r.code, backend.StepSuspend, Not, because(NoActivity, "no activity known"), time.Time{})
		default:
			last := c.LastActive()
			due := last.Add(s.IdleSuspend)
			reason := tooRecent(due.Sub(now), "idle", now.Sub(last), "idle_suspend", s.IdleSuspend)
			if !why.IsZero() && why.Code != Running && why.Code != Starting {
				// Leased, held, busy or pinned: idleness will not stop it.
				tr.blocked(k, r.code, backend.StepSuspend, why, c, due)
			} else {
				tr.add(k, r.code, backend.StepSuspend, Not, reason, due)
			}
		}
	}
}

func effectiveRetention(c *Candidate) time.Duration {
	if c.Record.Retention != nil {
		return *c.Record.Retention
	}
	return c.Settings.Retention
}

// IdleArchives tells whether idle reclaiming archives then deletes c
// instead of suspending it (Capabilities.IdleArchive, with idle_suspend
// set).
func IdleArchives(c *Candidate) bool {
	return c.Can.IdleArchive && !c.Can.Suspend && c.Settings.IdleSuspend > 0
}

// ArchiveAfter is how long c must be inactive before it is archived, and
// the rule that says so: its retention, or idle_suspend where idling loses
// the files (IdleArchives), whichever is shorter; 0 when neither applies.
func ArchiveAfter(c *Candidate) (time.Duration, Code) {
	ret := effectiveRetention(c)
	if IdleArchives(c) && (ret <= 0 || c.Settings.IdleSuspend < ret) {
		return c.Settings.IdleSuspend, RuleIdleArchive
	}
	return ret, RuleRetention
}

// retention announces, cancels or carries out the archive of an inactive
// runtime (and, where idling loses the files, of an idle one: ArchiveAfter).
func retention(out *Output, c *Candidate, now time.Time, why Reason, acted map[backend.Key]bool, tr *tracer) {
	k := c.Runtime.Key
	ret, rule := ArchiveAfter(c)
	last := c.LastActive()
	scheduled := c.Record.Scheduled == backend.StepArchive
	inactive := ret > 0 && !last.IsZero() && now.Sub(last) > ret
	if rule == RuleIdleArchive && why.Code == Running {
		// Running is the point: what it holds goes when it sleeps.
		why = Reason{}
	}
	cancel := func(r Reason) {
		out.Cancel = append(out.Cancel, notice(k, backend.StepArchive, c.Record.ScheduledDue, r))
		tr.add(k, rule, backend.StepArchive, Cancels, r, time.Time{})
	}

	if scheduled {
		switch {
		case !why.IsZero() && why.Code != Busy:
			// A pin, lease, hold or a start cancels the notice.
			cancel(why)
			return
		case last.After(c.Record.ScheduledAt):
			cancel(because(ActiveAgain, "active again since the notice"))
			return
		case !inactive:
			cancel(because(TooRecent, "no longer over its retention"))
			return
		}
	}
	if !inactive {
		if tr.on(k) && ret > 0 {
			if last.IsZero() {
				tr.add(k, rule, backend.StepArchive, Not, because(NoActivity, "no activity known"), time.Time{})
			} else {
				// Announced once over the retention, archived a grace later.
				at := last.Add(ret)
				tr.add(k, rule, backend.StepArchive, Not, tooRecent(at.Sub(now), "inactive", now.Sub(last), string(rule), ret), at.Add(c.Settings.Grace))
			}
		}
		return
	}
	reason := because(RuleRetention, fmt.Sprintf("inactive %s, over the retention of %s", human(now.Sub(last)), human(ret)))
	if rule == RuleIdleArchive {
		reason = because(RuleIdleArchive, fmt.Sprintf("idle %s, over idle_suspend %s; its backend cannot suspend and idling loses its files: archived, then deleted",
			human(now.Sub(last)), human(ret)))
	}
	if !why.IsZero() {
		out.Skipped = append(out.Skipped, skip(k, backend.StepArchive, why))
		tr.blocked(k, rule, backend.StepArchive, why, c, now.Add(c.Settings.Grace))
		return
	}
	if why := cannotRemove(c); !why.IsZero() {
		out.Skipped = append(out.Skipped, skip(k, backend.StepArchive, why))
		tr.add(k, rule, backend.StepArchive, Not, why, time.Time{})
		return
	}
	if !scheduled {
		out.Schedule = append(out.Schedule, notice(k, backend.StepArchive, now.Add(c.Settings.Grace), reason))
		tr.add(k, rule, backend.StepArchive, Announces, reason, now.Add(c.Settings.Grace))
		return
	}
	if now.Before(c.Record.ScheduledDue) || now.Sub(c.Record.ScheduledAt) < c.Settings.Grace {
		// Announced, not yet due.
		due := c.Record.ScheduledDue
		if g := c.Record.ScheduledAt.Add(c.Settings.Grace); g.After(due) {
			due = g
		}
		tr.add(k, rule, backend.StepArchive, Due, reason, due)
		return
	}
	out.Actions = append(out.Actions, Action{Key: k, Step: backend.StepArchive, Paths: runtimePaths(c),
		Bytes: max(c.SizeBytes, 0), Reason: reason.Text + "; announced " + c.Record.ScheduledAt.UTC().Format(time.RFC3339),
		Filesystem: c.Filesystem, Code: reason.Code})
	acted[k] = true
	tr.add(k, rule, backend.StepArchive, Acts, reason, now)
}

// IsOrphan tells whether c is an orphan: of a registered_only source, or
// one its backend reports as owned by nothing (Runtime.Orphan); a host's
// registration makes either owned.
func IsOrphan(c *Candidate) bool {
	return sweepsOrphans(c) && c.Record.Owners == 0 && !c.Record.OrphanSince.IsZero()
}

// sweepsOrphans tells whether c can be an orphan at all.
func sweepsOrphans(c *Candidate) bool { return c.Settings.RegisteredOnly || c.Runtime.Orphan != "" }

// orphan announces, cancels or carries out the deletion of an orphan, and
// reports whether it decided about c (retention then leaves c alone).
func orphan(out *Output, c *Candidate, now time.Time, why Reason, acted map[backend.Key]bool, tr *tracer) bool {
	if !sweepsOrphans(c) {
		return false
	}
	k := c.Runtime.Key
	scheduled := c.Record.Scheduled == backend.StepDelete
	if !IsOrphan(c) {
		r := because(Registered, "registered by a host")
		if scheduled {
			out.Cancel = append(out.Cancel, notice(k, backend.StepDelete, c.Record.ScheduledDue, r))
			tr.add(k, RuleOrphan, backend.StepDelete, Cancels, r, time.Time{})
		} else if tr.on(k) {
			if c.Record.Owners > 0 {
				r.Text = fmt.Sprintf("owned: %d conversation(s) registered", c.Record.Owners)
			} else {
				r.Text = "not seen unowned yet"
			}
			tr.add(k, RuleOrphan, backend.StepDelete, Not, r, time.Time{})
		}
		return false
	}
	reason := because(RuleOrphan, fmt.Sprintf("orphan: no host has owned it since %s", c.Record.OrphanSince.UTC().Format(time.RFC3339)))
	if c.Runtime.Orphan != "" {
		reason.Text = fmt.Sprintf("orphan: %s (seen so since %s)", c.Runtime.Orphan, c.Record.OrphanSince.UTC().Format(time.RFC3339))
	}
	if !why.IsZero() {
		if scheduled && why.Code != Busy {
			// A pin, lease, hold or a start cancels the notice.
			out.Cancel = append(out.Cancel, notice(k, backend.StepDelete, c.Record.ScheduledDue, why))
			tr.add(k, RuleOrphan, backend.StepDelete, Cancels, why, time.Time{})
		} else if !scheduled {
			out.Skipped = append(out.Skipped, skip(k, backend.StepDelete, why))
			tr.blocked(k, RuleOrphan, backend.StepDelete, why, c, orphanDue(c, now))
		} else {
			tr.blocked(k, RuleOrphan, backend.StepDelete, why, c, time.Time{})
		}
		return true
	}
	if why := cannotRemove(c); !why.IsZero() {
		out.Skipped = append(out.Skipped, skip(k, backend.StepDelete, why))
		tr.add(k, RuleOrphan, backend.StepDelete, Not, why, time.Time{})
		return true
	}
	if c.Record.Scheduled != "" && !scheduled {
		// Another notice (an archive) is in force: withdraw it; the
		// orphan's own notice follows at the next pass.
		r := because(OrphanInstead, "an orphan now: deleted instead")
		out.Cancel = append(out.Cancel, notice(k, c.Record.Scheduled, c.Record.ScheduledDue, r))
		tr.add(k, RuleOrphan, c.Record.Scheduled, Cancels, r, time.Time{})
		return true
	}
	if !scheduled {
		// The grace runs from when it became an orphan, but the notice
		// always comes first: a due time in the past acts at the next pass.
		due := orphanDue(c, now)
		out.Schedule = append(out.Schedule, notice(k, backend.StepDelete, due, reason))
		tr.add(k, RuleOrphan, backend.StepDelete, Announces, reason, due)
		return true
	}
	if now.Before(c.Record.ScheduledDue) || now.Before(c.Record.OrphanSince.Add(c.Settings.Grace)) {
		// Announced, not yet due.
		due := c.Record.ScheduledDue
		if g := c.Record.OrphanSince.Add(c.Settings.Grace); g.After(due) {
			due = g
		}
		tr.add(k, RuleOrphan, backend.StepDelete, Due, reason, due)
		return true
	}
	out.Actions = append(out.Actions, Action{Key: k, Step: backend.StepDelete, Paths: runtimePaths(c),
		Bytes: max(c.SizeBytes, 0), Reason: reason.Text + "; announced " + c.Record.ScheduledAt.UTC().Format(time.RFC3339),
		Filesystem: c.Filesystem, Code: RuleOrphan})
	acted[k] = true
	tr.add(k, RuleOrphan, backend.StepDelete, Acts, reason, now)
	return true
}

// orphanDue is when the deletion of the orphan c, announced now, is due:
// Grace after it became one, and never before the notice.
func orphanDue(c *Candidate, now time.Time) time.Time {
	due := c.Record.OrphanSince.Add(c.Settings.Grace)
	if due.Before(now) {
		due = now
	}
	return due
}

// reportKept lists, as skipped, each ignored folder of c the backend keeps
// (not rebuildable), with why: the plan says what it leaves.
func reportKept(out *Output, c *Candidate) {
	for _, f := range c.Dependencies {
		if f.Kept == "" {
			continue
		}
		sk := skip(c.Runtime.Key, backend.StepDependencies, because(KeptFolder, "kept "+f.Path+": "+f.Kept))
		if !slices.Contains(out.Skipped, sk) {
			out.Skipped = append(out.Skipped, sk)
		}
	}
}

// cannotRemove says why c cannot be removed safely; zero when it can.
func cannotRemove(c *Candidate) Reason {
	switch {
	case !c.Can.Delete:
		return because(CannotRemove, "its backend cannot remove it")
	case c.Runtime.Unsaved != "" && !c.Can.Export:
		return because(UnsavedNoArchive, "unsaved work ("+c.Runtime.Unsaved+") and no way to archive it")
	case c.Runtime.Unarchivable != "":
		return because(Unarchivable, "it holds what cannot be archived and restored exactly: "+c.Runtime.Unarchivable)
	}
	return Reason{}
}

func runtimePaths(c *Candidate) []string {
	if c.Runtime.Path != "" {
		return []string{c.Runtime.Path}
	}
	return nil
}

func filesAction(c *Candidate, step backend.Step, files []backend.File, reason Reason) Action {
	a := Action{Key: c.Runtime.Key, Step: step, Reason: reason.Text, Code: reason.Code, Filesystem: c.Filesystem}
	for _, f := range files {
		a.Paths = append(a.Paths, f.Path)
		a.Bytes += max(f.Bytes, 0)
	}
	return a
}

// budget sheds dependencies, least recently active first, on every
// filesystem above its high watermark, until the projection is at or under
// its low watermark.
func budget(out *Output, in Input, cands []Candidate, freed map[string]uint64, acted map[backend.Key]bool, tr *tracer) {
	var traced *Candidate // the runtime tr explains, when on a budgeted filesystem
	if tr != nil {
		traced = find(cands, tr.key)
	}
	for _, fs := range in.Filesystems {
		if fs.High <= 0 || fs.Fraction <= fs.High {
			if traced != nil && fs.High > 0 && traced.Filesystem == fs.ID && traced.Runtime.State.Present() {
				tr.add(traced.Runtime.Key, RuleBudget, backend.StepDependencies, Not, because(UnderBudget,
					fmt.Sprintf("%s is %.1f%% full, at or under disk_high %s", fs.Path, fs.Fraction*100, Percent(fs.High))), time.Time{})
			}
			continue
		}
		var tracedIn bool // the traced runtime is in the pool
		if traced != nil && traced.Filesystem == fs.ID && traced.Runtime.State.Present() {
			c, k := traced, traced.Runtime.Key
			switch {
			case !c.Can.Files:
				tr.add(k, RuleBudget, backend.StepDependencies, Not, because(CannotReclaim, "its backend cannot reclaim files"), time.Time{})
			case acted[k]:
				tr.add(k, RuleBudget, backend.StepDependencies, Not, because(AlreadyPlanned, "another step was already planned for it in this pass"), time.Time{})
			case len(backend.Shed(c.Dependencies)) == 0:
				tr.add(k, RuleBudget, backend.StepDependencies, Not, because(NothingToReclaim, "no dependencies it could shed"), time.Time{})
			default:
				if why := protection(c, in.Now); !why.IsZero() {
					tr.blocked(k, RuleBudget, backend.StepDependencies, why, c, in.Now)
				} else {
					tracedIn = true
				}
			}
		}
		used, avail := fs.UsedBytes, fs.AvailBytes
		give := min(freed[fs.ID], used)
		used, avail = used-give, avail+give
		var pool []*Candidate
		for i := range cands {
			c := &cands[i]
			if c.Filesystem != fs.ID || !c.Can.Files || len(c.Dependencies) == 0 || acted[c.Runtime.Key] || !c.Runtime.State.Present() {
				continue
			}
			reportKept(out, c)
			if len(backend.Shed(c.Dependencies)) == 0 {
				continue
			}
			if why := protection(c, in.Now); !why.IsZero() {
				out.Skipped = append(out.Skipped, skip(c.Runtime.Key, backend.StepDependencies, why))
				continue
			}
			pool = append(pool, c)
		}
		slices.SortStableFunc(pool, func(a, b *Candidate) int {
			return cmp.Or(a.LastActive().Compare(b.LastActive()),
				cmp.Compare(a.Runtime.Backend, b.Runtime.Backend), cmp.Compare(a.Runtime.ID, b.Runtime.ID))
		})
		for _, c := range pool {
			if fraction(used, avail) <= fs.Low {
				if tracedIn {
					tr.add(tr.key, RuleBudget, backend.StepDependencies, Not, because(UnderBudget,
						fmt.Sprintf("the budget is met before it: %s would be %.1f%% full, at or under disk_low %s", fs.Path, fraction(used, avail)*100, Percent(fs.Low))), time.Time{})
				}
				break
			}
			r := because(RuleBudget, fmt.Sprintf("%s is %.1f%% full, over disk_high %s; least recently active first", fs.Path, fs.Fraction*100, Percent(fs.High)))
			a := filesAction(c, backend.StepDependencies, backend.Shed(c.Dependencies), r)
			out.Actions = append(out.Actions, a)
			tr.add(c.Runtime.Key, RuleBudget, backend.StepDependencies, Acts, r, in.Now)
			give := min(uint64(a.Bytes), used)
			used, avail = used-give, avail+give
		}
		if fraction(used, avail) > fs.Low {
			out.Messages = append(out.Messages, fmt.Sprintf("disk budget: %s would still be %.1f%% full (disk_low %s): nothing more to shed",
				fs.Path, fraction(used, avail)*100, Percent(fs.Low)))
		}
	}
}

func fraction(used, avail uint64) float64 {
	if used+avail == 0 {
		return 0
	}
	return float64(used) / float64(used+avail)
}

// human prints a duration in days, hours or minutes.
func human(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d >= 2*time.Minute:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return d.Round(time.Second).String()
}

// Percent is a watermark in words: 0.85 is "85%", 0.005 "0.5%".
func Percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}
