package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
)

// ApplyOptions tune Apply.
type ApplyOptions struct {
	// Progress, when set, is called after each action.
	Progress func(done, total int)
	// Step, when set, is told how a long step goes while it runs (an
	// archive's bytes, a removal's purge).
	Step Progress
	// World is the observation the plan was made from, when the caller has
	// it (a pass plans and applies at once); nil makes Apply observe.
	World *World
	// Stop, when closed, ends the apply between two actions, like a
	// canceled context, but lets the action in flight finish with a live
	// context (its ledger writes included) and stops waiting for purges:
	// what a graceful shutdown wants. The rest is left for the next pass.
	Stop <-chan struct{}
}

// Apply carries out p: never more than it says, skipping what changed.
func (e *Engine) Apply(ctx context.Context, p *plan.Plan, opts ApplyOptions) (*plan.Applied, error) {
	res := &plan.Applied{PlanID: p.ID, Results: make([]plan.Result, 0, len(p.Actions)), Problems: []plan.Problem{}}
	unlock, _, err := e.applyLock(false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	defer e.setProgress(opts.Step)()
	w := opts.World
	if w == nil {
		var err error
		if w, err = e.Observe(ctx, ObserveOptions{Light: true}); err != nil {
			return nil, err
		}
		// A saved plan applied later: what this observation could not
		// look at is this apply's to report (a pass's own are its plan's).
		res.Problems = append(res.Problems, w.Problems...)
	}
	e.PurgeLeftovers(w)
	e.recordNotices(ctx, p, res)

	budgetMet := map[string]bool{}
	type waiting struct {
		i  int
		ch []<-chan int64
	}
	var purges []waiting
	ours := map[backend.Key]plan.Observed{}
	// later counts the actions still to come per runtime: only a runtime
	// with another action ahead is observed again after a step (a walk of
	// its files, or Engine requests, that would otherwise be wasted).
	later := map[backend.Key]int{}
	for _, a := range p.Actions {
		later[a.Key()]++
	}
	for i, a := range p.Actions {
		later[a.Key()]--
		r := resultOf(a)
		switch {
		case ctx.Err() != nil || closed(opts.Stop):
			r.Outcome, r.Code, r.Reason = plan.Pending, plan.Stopped, "stopped before reaching it"
		case a.Step == backend.StepDependencies && budgetMet[a.Filesystem]:
			r.Outcome, r.Code, r.Reason = plan.Skip, plan.BudgetMet, "disk budget met: usage is at or under disk_low"
		default:
			if o, ok := ours[a.Key()]; ok {
				// An earlier action of this apply changed the runtime (its
				// caches went): compare with what it left, not with the plan.
				a.Observed = o
			}
			var chans []<-chan int64
			r, chans = e.applyOne(ctx, p, a)
			if r.Outcome == plan.Done && !a.Step.Destructive() && later[a.Key()] > 0 {
				if w, err := e.Observe(ctx, ObserveOptions{Only: []backend.Key{a.Key()}}); err == nil {
					if s := w.Find(a.Key()); s != nil {
						ours[a.Key()] = observed(s)
					}
				}
			}
			if len(chans) > 0 {
				if a.Step == backend.StepDependencies {
					// The budget re-measures once the files are really gone.
					r.FreedBytes = wait(ctx, opts.Stop, chans)
					if met, err := e.budgetMet(ctx, a); err == nil && met {
						budgetMet[a.Filesystem] = true
					}
				} else {
					purges = append(purges, waiting{len(res.Results), chans})
				}
			}
		}
		res.Results = append(res.Results, r)
		if opts.Progress != nil {
			opts.Progress(i+1, len(p.Actions))
		}
	}
	for _, w := range purges {
		res.Results[w.i].FreedBytes = wait(ctx, opts.Stop, w.ch)
	}
	for _, r := range res.Results {
		res.FreedBytes += r.FreedBytes
	}
	return res, nil
}

func resultOf(a plan.Action) plan.Result {
	return plan.Result{Runtime: a.Runtime, Backend: a.Backend, Source: a.Source, Step: a.Step}
}

func observed(s *Seen) plan.Observed {
	return plan.Observed{State: s.Runtime.State, LastActivity: s.LastActive(), Fingerprint: s.Runtime.Fingerprint}
}

func wait(ctx context.Context, stop <-chan struct{}, chans []<-chan int64) int64 {
	var n int64
	for _, ch := range chans {
		select {
		case b := <-ch:
			n += b
		case <-ctx.Done():
			return n
		case <-stop:
			return n
		}
	}
	return n
}

// closed tells whether ch is closed; a nil channel never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// budgetMet re-measures the filesystem of a dependency action.
func (e *Engine) budgetMet(ctx context.Context, a plan.Action) (bool, error) {
	if len(a.Paths) == 0 {
		return false, nil
	}
	w, err := e.Observe(ctx, ObserveOptions{Only: []backend.Key{a.Key()}})
	if err != nil {
		return false, err
	}
	for _, fs := range w.Filesystems {
		if fs.ID == a.Filesystem || len(w.Filesystems) == 1 {
			return fs.Fraction <= fs.Low, nil
		}
	}
	return false, nil
}

// recordNotices persists the plan's announcements and cancellations.
func (e *Engine) recordNotices(ctx context.Context, p *plan.Plan, res *plan.Applied) {
	for _, n := range p.Scheduled {
		k := n.Key()
		err := e.writeFor(ctx, k, func(ctx context.Context, st ledger.Store) error {
			_, err := st.Update(ctx, k, func(r *ledger.RuntimeRecord) error {
				if r.ScheduledStep == "" {
					r.ScheduledStep, r.ScheduledAt, r.ScheduledDue = string(n.Step), p.CreatedAt, n.Due
				}
				return nil
			})
			if err == nil {
				_, err = st.RecordNotice(ctx, ledger.Notice{Key: k, Kind: "scheduled", Step: string(n.Step), Due: n.Due, At: p.CreatedAt,
					Message: n.Reason, PlanID: p.ID})
			}
			return err
		})
		if err != nil {
			res.Messages = append(res.Messages, fmt.Sprintf("announce %s of %s: %v", n.Step, k, err))
		} else {
			res.Announced = append(res.Announced, n)
			res.Messages = append(res.Messages, fmt.Sprintf("%s of %s scheduled for %s: %s", n.Step, k, n.Due.Format(time.RFC3339), n.Reason))
		}
	}
	for _, n := range p.Canceled {
		k := n.Key()
		err := e.writeFor(ctx, k, func(ctx context.Context, st ledger.Store) error {
			_, err := st.Update(ctx, k, func(r *ledger.RuntimeRecord) error {
				r.ScheduledStep, r.ScheduledAt, r.ScheduledDue = "", time.Time{}, time.Time{}
				return nil
			})
			if err == nil {
				_, err = st.RecordNotice(ctx, ledger.Notice{Key: k, Kind: "canceled", Step: string(n.Step), Due: n.Due, At: p.CreatedAt,
					Message: n.Reason, PlanID: p.ID})
			}
			return err
		})
		if err != nil {
			res.Messages = append(res.Messages, fmt.Sprintf("cancel %s of %s: %v", n.Step, k, err))
		} else {
			res.Messages = append(res.Messages, fmt.Sprintf("%s of %s canceled: %s", n.Step, k, n.Reason))
		}
	}
}

// applyOne carries out one action in the order of destruction.
func (e *Engine) applyOne(ctx context.Context, p *plan.Plan, a plan.Action) (plan.Result, []<-chan int64) {
	r := resultOf(a)
	var term *leader.Term
	if src, ok := e.Source(a.Source); ok {
		if term, ok = e.termOf(src); !ok {
			r.Outcome, r.Code, r.Reason = plan.Pending, plan.Stopped, errNotLeading.Error()
			return r, nil
		}
	}
	// Look again before the journal and any export: most changes show.
	seen, change, err := e.reobserve(ctx, a)
	if err != nil {
		return failed(r, err), nil
	} else if !change.IsZero() {
		return change.skip(r), nil
	}

	var intent int64
	err = e.write(ctx, term, func(ctx context.Context, st ledger.Store) error {
		var err error
		intent, err = st.AppendIntent(ctx, ledger.Intent{PlanID: p.ID, Key: a.Key(),
			Step: string(a.Step), Paths: a.Paths, Reason: a.Reason, At: e.opts.Now().UTC()})
		return err
	})
	switch {
	case Refused(err):
		// The term ended under us (the lease row was taken over): nothing
		// was journaled, nothing is done; the leader acts on it.
		r.Outcome, r.Code, r.Reason = plan.Pending, plan.Stopped, errNotLeading.Error()
		return r, nil
	case err != nil:
		return failed(r, fmt.Errorf("journal intent: %w", err)), nil
	}
	r, chans, mark, release := e.execute(ctx, p, a, seen, term)
	defer release()
	now := e.opts.Now().UTC()
	outcome := ledger.Outcome{Result: string(r.Outcome), Reason: r.Reason, FreedBytes: a.Bytes, At: now}
	if r.Outcome != plan.Done {
		outcome.FreedBytes = 0
	}
	// The closing write, still under the runtime's lock, in one fenced
	// transaction for a shared source's runtime: the state the step left
	// (a suspend's), the notice of a removal done or failed, the outcome.
	// Refused (the term ended during the step), none of it is written: the
	// entry stays unfinished, and the next leader's recovery finishes it
	// from what it observes.
	var notice *ledger.Notice
	switch {
	case r.Outcome == plan.Failed && a.Step.Destructive():
		// Whoever watches notices learns why the runtime stays.
		n := failureNotice(p.ID, a, r.Reason, now)
		notice = &n
	case r.Outcome == plan.Done && a.Step.Destructive():
		// ... or that it is gone, and where its work went.
		n := doneNotice(p.ID, a, r, now)
		notice = &n
	}
	var noticeErr error
	err = e.write(ctx, term, func(ctx context.Context, st ledger.Store) error {
		var errs []error
		if mark != nil {
			errs = append(errs, mark(ctx, st))
		}
		if notice != nil {
			_, noticeErr = st.RecordNotice(ctx, *notice)
			errs = append(errs, noticeErr)
		}
		errs = append(errs, st.RecordOutcome(ctx, intent, outcome))
		return errors.Join(errs...)
	})
	// The webhooks' outbox sends a recorded notice (at least once, from the
	// ledger); one not recorded is the daemon's to send from memory. A
	// fenced write is one transaction: all of it committed, or nothing.
	r.Noticed = notice != nil && noticeErr == nil && (term == nil || err == nil)
	switch {
	case Refused(err) && r.Outcome == plan.Failed:
		// Its failure was not recorded, so it is not announced either:
		// the new leader's recovery closes the entry and plans it again.
		r.Outcome, r.Code = plan.Pending, plan.Stopped
		r.Reason = fmt.Sprintf("%s (this replica no longer leads: not recorded; the leader acts on it)", r.Reason)
		e.log.Warn("journal outcome refused: this replica no longer leads", "runtime", a.Key().Unique(), "err", err)
	case Refused(err):
		e.log.Warn("journal outcome refused: this replica no longer leads; the leader's recovery finishes the entry",
			"runtime", a.Key().Unique(), "outcome", r.Outcome, "err", err)
	case err != nil:
		e.log.Error("journal outcome", "runtime", a.Key().Unique(), "err", err)
	}
	return r, chans
}

// failed ends r with err: a step the backend cannot take for this runtime
// (errors.ErrUnsupported) is skipped, not failed, with nothing done (the
// engine's fallback: the runtime stays as it was, and the next pass plans
// again), and so is a runtime gone in the meantime; unsaved work that cannot be archived is "protected"; anything
// else is an error.
func failed(r plan.Result, err error) plan.Result {
	r.Reason = plan.OneLine(err.Error())
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		r.Outcome, r.Code = plan.Skip, plan.Unsupported
	case errors.Is(err, backend.ErrProtected):
		r.Outcome, r.Code = plan.Failed, plan.Protected
	case errors.Is(err, backend.ErrNotFound):
		// Gone between the re-check and the step: nothing left to do.
		r.Outcome, r.Code = plan.Skip, plan.ChangedSincePlan
	default:
		r.Outcome, r.Code = plan.Failed, plan.Error
	}
	return r
}

// execute does the step, under the runtime's lock for the parts that
// change anything. mark, when set, is the state the step left, for the
// caller to write with the outcome; release ends the runtime's lock (and
// the backend's), which the caller calls once it wrote them, so that the
// state flips under the lock. release is never nil.
func (e *Engine) execute(ctx context.Context, p *plan.Plan, a plan.Action, seen *Seen, term *leader.Term) (
	r plan.Result, chans []<-chan int64, mark func(context.Context, ledger.Store) error, release func()) {
	r = resultOf(a)
	var held []func() // released in reverse order
	release = func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i]()
		}
	}
	fail := func(err error) (plan.Result, []<-chan int64, func(context.Context, ledger.Store) error, func()) {
		return failed(r, err), nil, nil, release
	}
	b := seen.Source.Backend
	rt := *seen.Runtime

	// Export first, outside the lock: it is slow, and the re-check under
	// the lock catches any change made while it ran.
	var exp *backend.Export
	kept := false // the export was recorded; otherwise it is removed again
	if a.Step == backend.StepArchive || (a.Step == backend.StepDelete && rt.Unsaved != "") {
		ex, ok := backend.As[backend.Exporter](b)
		switch {
		case ok:
			got, err := e.export(ctx, ex, rt, seen.Source.Settings, p.CreatedAt, a)
			if err != nil {
				return fail(fmt.Errorf("archive (nothing was removed): %w", err))
			}
			exp = &got
			defer func() {
				if !kept {
					// Skipped or failed after the export: an archive
					// nothing refers to would only take space.
					e.dropExport(archive.ObjectBase(rt.Backend, rt.ID, p.CreatedAt), got)
					e.abandonExport(b, rt, p.CreatedAt)
				}
			}()
		case rt.Unsaved != "":
			return fail(fmt.Errorf("unsaved work (%s) and no way to archive it: %w", rt.Unsaved, backend.ErrProtected))
		}
	}

	lockCtx := ctx
	if term != nil {
		// A leader stopped while it holds the lock keeps its successor
		// off this runtime no longer than its term could have lasted.
		lockCtx = ledger.WithLockIdle(ctx, term.Remaining())
	}
	unlock, err := e.lockRuntime(lockCtx, rt.Key)
	if err != nil {
		r.Outcome, r.Code, r.Reason = plan.Skip, plan.LockedByAnother, err.Error()
		return r, nil, nil, release
	}
	held = append(held, unlock)
	locked, change, unlockBackend, err := e.recheckLocked(ctx, a, seen)
	if err != nil {
		return fail(err)
	}
	held = append(held, unlockBackend)
	if !change.IsZero() {
		return change.skip(r), nil, nil, release
	}
	rt = *locked.Runtime
	// A shared source's backend is called only while the term holds, and
	// stops with it.
	ctx, endCall, err := callCtx(ctx, term)
	if err != nil {
		r.Outcome, r.Code, r.Reason = plan.Pending, plan.Stopped, err.Error()
		return r, nil, nil, release
	}
	defer endCall()

	discard := func(path string) error {
		ch, err := e.discard(rt.Root, path)
		if err == nil {
			chans = append(chans, ch)
		}
		return err
	}
	switch a.Step {
	case backend.StepCaches, backend.StepDependencies:
		fr, ok := backend.As[backend.FileReclaimer](b)
		if !ok {
			return fail(fmt.Errorf("reclaim files: %w", errors.ErrUnsupported))
		}
		files, err := fr.ReclaimFiles(ctx, rt, backend.FileOptions{Step: a.Step, CacheDirs: seen.Source.Settings.CacheDirs,
			Rebuildable: seen.Source.Settings.Rebuildable, Keep: seen.Source.Settings.Keep,
			Paths: a.Paths, Discard: discard})
		if err != nil && len(files) == 0 {
			return fail(err)
		}
		if len(files) < len(a.Paths) {
			r.Reason = fmt.Sprintf("%d of %d paths no longer qualified and were kept", len(a.Paths)-len(files), len(a.Paths))
		}
	case backend.StepSuspend:
		s, ok := backend.As[backend.Suspender](b)
		if !ok {
			return fail(fmt.Errorf("suspend: %w", errors.ErrUnsupported))
		}
		off, change, err := e.noDeleteOnSuspend(ctx, b, rt, seen.Source.Settings.Grace)
		if err != nil {
			return fail(err)
		} else if !change.IsZero() {
			return change.skip(r), nil, nil, release
		}
		if off != "" {
			r.Reason = off
		}
		if err := s.Suspend(ctx, rt, backend.SuspendOptions{Reason: a.Reason}); err != nil {
			return fail(err)
		}
		// Marked with the outcome, in one write (fenced in a fleet).
		mark = func(ctx context.Context, st ledger.Store) error {
			return markIn(ctx, st, rt, backend.StateSuspended, "", e.opts.Now().UTC())
		}
	case backend.StepArchive, backend.StepDelete:
		d, ok := backend.As[backend.Deleter](b)
		if !ok {
			return fail(fmt.Errorf("remove: %w", errors.ErrUnsupported))
		}
		state := backend.StateDeleted
		if a.Step == backend.StepArchive {
			state = backend.StateArchived
		}
		if exp != nil {
			id, err := e.recordArchive(ctx, term, rt, exp, p.CreatedAt)
			if err != nil {
				return fail(fmt.Errorf("record archive (nothing was removed): %w", err))
			}
			r.ArchiveID = id
			r.Kept, r.NotKept = splitSurvives(exp.Survives)
			kept = true
		}
		// Mark first: a crash after this point is finished by Recover.
		if err := e.markState(ctx, term, rt, state, r.ArchiveID); err != nil {
			return fail(fmt.Errorf("mark %s (nothing was removed): %w", state, err))
		}
		if term != nil && !term.Valid() {
			// The mark committed under the lease, but the term ran out
			// since: no provider call now. The next leader's pass sees
			// the runtime still there and plans it again.
			e.markState(context.WithoutCancel(ctx), term, rt, rt.State, r.ArchiveID) // refused, most likely: the next leader's listing corrects it
			r.Outcome, r.Code, r.Reason = plan.Pending, plan.Stopped, errNotLeading.Error()
			return r, nil, nil, release
		}
		if err := d.Delete(ctx, rt, backend.DeleteOptions{Discard: discard, Step: a.Step}); err != nil {
			e.markState(context.WithoutCancel(ctx), term, rt, rt.State, r.ArchiveID)
			return fail(err)
		}
	}
	r.Outcome = plan.Done
	return r, chans, mark, release
}

// noDeleteOnSuspend enforces, under the runtime's lock, the rule "no
// deletion we did not announce" for a suspend: it reads the provider's
// timers afresh (they may have changed since the plan); where suspending
// would make the provider delete the runtime, it turns that timer off and
// reads it back, and only a read back that shows it off lets the suspend
// go on. A provider that will not let reclaimer change it is a change
// since the plan (the next pass announces a delete instead). It returns
// what it did, in words, when it turned a timer off.
func (e *Engine) noDeleteOnSuspend(ctx context.Context, b backend.Backend, rt backend.Runtime, grace time.Duration) (string, Change, error) {
	nl, ok := backend.As[backend.NativeLifecycle](b)
	if !ok {
		return "", Change{}, nil
	}
	l, err := nl.Lifecycle(ctx, rt, backend.LifecycleOptions{})
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return "", Change{}, nil
	case err != nil:
		return "", Change{}, fmt.Errorf("read its provider's timers (not suspended: a suspend might delete it): %w", err)
	case !l.DeleteOnSuspend(grace):
		return "", Change{}, nil
	case !slices.Contains(l.Can, backend.TimerDelete):
		return "", changedBecause(ChangeTimers, "its provider now deletes it upon suspension, and reclaimer may not change that"), nil
	}
	set := l
	set.Can, set.Delete = nil, 0
	set.Unknown = slices.DeleteFunc(slices.Clone(l.Unknown), func(u string) bool { return u == backend.TimerDelete })
	got, err := nl.Lifecycle(ctx, rt, backend.LifecycleOptions{Set: &set, Current: &l})
	if err != nil {
		return "", Change{}, fmt.Errorf("turn off its provider's deletion upon suspension (not suspended): %w", err)
	}
	if got.DeleteOnSuspend(grace) {
		return "", Change{}, fmt.Errorf("its provider still deletes it upon suspension after that timer was turned off (not suspended): %w",
			backend.ErrProtected)
	}
	return "its provider's deletion upon suspension was turned off and read back first", Change{}, nil
}

// splitSurvives splits an archive's survives list into what it keeps and
// what it does not (the lines saying "NOT kept").
func splitSurvives(lines []string) (kept, notKept []string) {
	for _, l := range lines {
		if strings.Contains(l, " NOT kept") {
			notKept = append(notKept, l)
		} else {
			kept = append(kept, l)
		}
	}
	return kept, notKept
}

// reobserve looks at the action's runtime again, through its source's
// Lister and the ledger, and says what changed since the plan (zero when
// the action may go on).
func (e *Engine) reobserve(ctx context.Context, a plan.Action) (*Seen, Change, error) {
	w, err := e.Observe(ctx, ObserveOptions{Only: []backend.Key{a.Key()}})
	if err != nil {
		return nil, Change{}, fmt.Errorf("re-observe %s: %w", a.Key(), err)
	}
	s := w.Find(a.Key())
	if s == nil {
		for _, pr := range w.Problems {
			if pr.Source == a.Source && (pr.Code == plan.SourceUnreadable || pr.Code == plan.SourceTimeout) {
				// Not listed is not gone: the source could not be read.
				return nil, Change{}, fmt.Errorf("re-observe %s: %s", a.Key(), pr.Message)
			}
		}
	}
	return s, recheck(a, s, w.Now), nil
}

// recheckLocked re-checks the action under the runtime's lock: with the
// backend's own lock when it has one (a Locker, which re-observes the
// runtime as it holds it), else by observing it again. release ends the
// backend's lock; it is never nil.
func (e *Engine) recheckLocked(ctx context.Context, a plan.Action, seen *Seen) (*Seen, Change, func(), error) {
	noop := func() {}
	lk, ok := backend.As[backend.Locker](seen.Source.Backend)
	if !ok {
		s, change, err := e.reobserve(ctx, a)
		return s, change, noop, err
	}
	l, err := lk.Lock(ctx, *seen.Runtime, backend.LockOptions{Step: a.Step})
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		// No lock for this runtime: the engine's own re-check it is.
		s, change, err := e.reobserve(ctx, a)
		return s, change, noop, err
	case errors.Is(err, backend.ErrNotFound):
		return nil, changedBecause(ChangeGone, "the runtime is gone"), noop, nil
	case errors.Is(err, backend.ErrBusy), errors.Is(err, backend.ErrConflict):
		return nil, changedBecause(ChangeLocked, plan.OneLine(err.Error())), noop, nil
	case err != nil:
		return nil, Change{}, noop, err
	}
	release := noop
	if l.Unlock != nil {
		release = l.Unlock
	}
	rt := l.Runtime
	rt.Key.Source = seen.Source.Name
	s := &Seen{Runtime: &rt, Source: seen.Source}
	now := e.opts.Now().UTC()
	if err := e.attachRecord(ctx, s, now); err != nil {
		release()
		return nil, Change{}, noop, err
	}
	if err := e.busy(ctx, []*Seen{s}); err != nil {
		release()
		return nil, Change{}, noop, fmt.Errorf("re-observe %s: scan for busy runtimes: %w", a.Key(), err)
	}
	return s, recheck(a, s, now), release, nil
}

// markState records the runtime's new state, with the archive that keeps
// it; a runtime the ledger never recorded gets a record.
func (e *Engine) markState(ctx context.Context, term *leader.Term, rt backend.Runtime, state backend.State, archiveID string) error {
	return e.write(ctx, term, func(ctx context.Context, st ledger.Store) error {
		return markIn(ctx, st, rt, state, archiveID, e.opts.Now().UTC())
	})
}

// markIn is markState's write, in st.
func markIn(ctx context.Context, st ledger.Store, rt backend.Runtime, state backend.State, archiveID string, now time.Time) error {
	_, err := st.Update(ctx, rt.Key, func(r *ledger.RuntimeRecord) error {
		r.State = string(state)
		if archiveID != "" {
			r.ArchiveID = archiveID
		}
		if rt.Path != "" {
			r.Path = rt.Path
		}
		if !state.Present() {
			r.ScheduledStep, r.ScheduledAt, r.ScheduledDue = "", time.Time{}, time.Time{}
		}
		return nil
	})
	if errors.Is(err, ledger.ErrNotFound) {
		err = st.Observe(ctx, []ledger.Observation{{Key: rt.Key, State: string(state), Path: rt.Path, SizeBytes: -1, At: now}})
	}
	return err
}

// recordArchive records the archive exp of rt, fenced by term for a
// shared source's runtime (a Cloudflare sandbox's idle_archive): a leader
// whose term ended records no archive, and removes nothing.
func (e *Engine) recordArchive(ctx context.Context, term *leader.Term, rt backend.Runtime, exp *backend.Export, at time.Time) (string, error) {
	id := plan.NewID(e.opts.Now())
	manifest := exp.Manifest
	if len(manifest) == 0 {
		manifest, _ = jsonMarshal(map[string]any{"survives": exp.Survives, "restore": exp.Restore, "path": rt.Path,
			"home": rt.Home, "workspaces": rt.Workspaces, "source": rt.Key.Source})
	}
	var objs []ledger.ArchiveObject
	for _, o := range exp.Objects {
		objs = append(objs, ledger.ArchiveObject{Name: o.Name, Bytes: o.Bytes, SHA256: o.SHA256})
	}
	err := e.write(ctx, term, func(ctx context.Context, st ledger.Store) error {
		return st.RecordArchive(ctx, ledger.Archive{ID: id, Key: rt.Key, CreatedAt: at.UTC(),
			Location: exp.Location, Formats: exp.Formats, Bytes: exp.Bytes, Objects: objs, Manifest: manifest})
	})
	return id, err
}
