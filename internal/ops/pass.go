package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/views"
)

// How long a plan can be applied by its id, and how many are kept: a plan
// of a large host is large.
const (
	PlanTTL  = time.Hour
	maxPlans = 16
)

// statusReuse is how long a dry run answers Status: polling status must
// not turn into a pass each time.
const statusReuse = 10 * time.Second

// PassRequest describes one pass.
type PassRequest struct {
	// Trigger says why: "cli", "api", "timer", "start", "watch", ...
	Trigger string
	Steps   []backend.Step
	// Only narrows the pass to these runtimes.
	Only []backend.Key
	// Requests are steps asked for explicitly (delete now).
	Requests []policy.Request
	DryRun   bool
	// Exact applies exactly this plan (never more).
	Exact *plan.Plan
	// Wait bounds the wait for a pass already running; 0 waits as long
	// as ctx lets it.
	Wait time.Duration
	// Progress, when set, is called after each action applied.
	Progress func(done, total int)
	// Step, when set, is told how a long step goes (engine.Progress).
	Step engine.Progress
	// Explain, when set, asks the dry run to explain this runtime
	// (engine.PlanOptions.Explain).
	Explain backend.Key
}

// full tells whether the pass observes everything.
func (r PassRequest) full() bool { return len(r.Only) == 0 && r.Exact == nil }

// PassReport is one pass as OnPass sees it.
type PassReport struct {
	Request PassRequest
	Plan    *plan.Plan
	Applied *plan.Applied
	// World is what the pass observed (nil for an exact plan).
	World *engine.World
	Took  time.Duration
	Err   error
}

// Pass plans and (unless a dry run) applies, one pass at a time. The apply
// runs on a context a client going away does not cancel: an action once
// started finishes; a stop (Options.Stop) ends it between actions.
func (a *App) Pass(ctx context.Context, req PassRequest) (*plan.Plan, *plan.Applied, error) {
	p, res, _, err := a.pass(ctx, req)
	return p, res, err
}

// pass is Pass, also giving what the pass observed (nil for an exact
// plan).
func (a *App) pass(ctx context.Context, req PassRequest) (*plan.Plan, *plan.Applied, *engine.World, error) {
	var timeout <-chan time.Time
	if req.Wait > 0 {
		t := a.clock.NewTimer(req.Wait)
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case a.passSem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, nil, ctx.Err()
	case <-timeout:
		return nil, nil, nil, fmt.Errorf("another pass is running; try again when it is done: %w", backend.ErrBusy)
	case <-a.opts.Stop:
		return nil, nil, nil, ErrShuttingDown
	}
	defer func() { <-a.passSem }()
	if closed(a.opts.Stop) {
		return nil, nil, nil, ErrShuttingDown
	}
	s := a.setupNow()
	start := a.clock.Now()
	// Rule "every pass ends": its deadline bounds planning (every
	// listing, narrowed read and provider call under it) and apply
	// (between actions), whatever a provider does.
	limit := s.cfg.ServerSettings().PassTimeout
	pctx, cancelPass := context.WithTimeout(ctx, limit)
	defer cancelPass()
	rep := PassReport{Request: req}
	defer func() {
		rep.Took = a.clock.Now().Sub(start)
		a.finishPass(rep, start)
	}()
	if req.Exact != nil {
		rep.Plan = req.Exact
	} else {
		p, w, err := s.engine.Plan(pctx, engine.PlanOptions{Steps: req.Steps, Only: req.Only, Requests: req.Requests, Explain: req.Explain})
		if err != nil {
			if ctx.Err() == nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
				err = fmt.Errorf("the pass did not finish planning within pass_timeout %s; nothing was applied (%v): %w", limit, err, backend.ErrUnavailable)
			}
			rep.Err = err
			return nil, nil, nil, err
		}
		rep.Plan, rep.World = p, w
		if len(s.sources) == 0 {
			p.Problems = append(p.Problems, noSources())
		}
		p.Messages = append(p.Messages, a.followerMessages(ctx)...)
	}
	if req.DryRun {
		a.rememberPlan(rep.Plan)
		return rep.Plan, nil, rep.World, nil
	}
	applyWorld := rep.World
	if !req.full() {
		applyWorld = nil // narrowed: observe everything once for the trash leftovers
	}
	// The stop: the daemon's (a graceful stop), else the caller's context
	// (the CLI's Ctrl-C). Either ends the apply between two actions; the
	// action in flight finishes with a live context.
	// The pass's deadline stops it too: what it did not reach is
	// reported, and the next pass tries it.
	stop := a.opts.Stop
	if stop == nil {
		stop = ctx.Done()
	}
	stopOrDeadline := make(chan struct{})
	applied := make(chan struct{})
	go func() {
		defer close(stopOrDeadline)
		select {
		case <-stop:
		case <-pctx.Done():
		case <-applied:
		}
	}()
	res, err := s.engine.Apply(context.WithoutCancel(ctx), rep.Plan, engine.ApplyOptions{World: applyWorld, Stop: stopOrDeadline,
		Progress: req.Progress, Step: req.Step})
	close(applied)
	if res != nil && !closed(stop) && errors.Is(pctx.Err(), context.DeadlineExceeded) {
		passTimedOut(res, limit)
	}
	rep.Applied, rep.Err = res, err
	if err != nil {
		return rep.Plan, nil, rep.World, err
	}
	a.keys.applied(res)
	return rep.Plan, res, rep.World, nil
}

// passTimedOut says, for each action an apply stopped at the pass's
// deadline did not reach, why, and adds the pass's problem.
func passTimedOut(res *plan.Applied, limit time.Duration) {
	n := 0
	for i := range res.Results {
		if r := &res.Results[i]; r.Code == plan.Stopped {
			r.Reason = fmt.Sprintf("not reached within pass_timeout %s; the next pass tries again", limit)
			n++
		}
	}
	if n > 0 {
		res.Problems = append(res.Problems, plan.Problem{Code: plan.PassTimeout,
			Message: fmt.Sprintf("the pass reached pass_timeout %s with %d of %d actions not done; the next pass tries them again", limit, n, len(res.Results))})
	}
}

func noSources() plan.Problem {
	return plan.Problem{Code: plan.NoSources,
		Message: "no source is configured: nothing is managed (give --repo or --dir, or source tables such as [[worktrees]] in --config)"}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// finishPass keeps what a pass observed for Status and the views, and
// tells OnPass.
func (a *App) finishPass(rep PassReport, start time.Time) {
	req := rep.Request
	full := rep.World != nil && req.full()
	if full {
		a.keys.refresh(rep.World)
		a.keys.applied(rep.Applied) // after: the world is what was there before the apply
	}
	a.stateMu.Lock()
	if full {
		a.world, a.worldAt = rep.World, a.now()
		if req.DryRun {
			a.lastDry, a.dryAt = rep.Plan, a.now()
		} else {
			a.lastDry = nil // what it showed was just applied
		}
	}
	if !req.DryRun && (rep.Plan != nil || rep.Err != nil) {
		sum := &views.PassSummary{Trigger: req.Trigger, StartedAt: start.UTC(), FinishedAt: a.now()}
		if rep.Plan != nil {
			sum.PlanID, sum.Problems = rep.Plan.ID, len(rep.Plan.Problems)
		}
		if rep.Err != nil {
			sum.Error = rep.Err.Error()
		}
		if res := rep.Applied; res != nil {
			sum.Actions, sum.FreedBytes = len(res.Results), res.FreedBytes
			sum.Problems += len(res.Problems)
			for _, r := range res.Results {
				if r.Outcome == plan.Failed {
					sum.Failed++
				}
			}
		}
		a.lastPass = sum
	}
	a.stateMu.Unlock()
	if a.opts.SampleUsage && full && !req.DryRun {
		a.recordUsage(context.Background(), rep.World, rep.Plan)
	}
	if a.opts.OnPass != nil {
		a.opts.OnPass(rep)
	}
}

func (a *App) rememberPlan(p *plan.Plan) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	now := a.now()
	for id, c := range a.plans {
		if now.Sub(c.at) > PlanTTL {
			delete(a.plans, id)
		}
	}
	for len(a.plans) >= maxPlans {
		oldest := ""
		for id, c := range a.plans {
			if oldest == "" || c.at.Before(a.plans[oldest].at) {
				oldest = id
			}
		}
		delete(a.plans, oldest)
	}
	a.plans[p.ID] = cachedPlan{p: p, at: now}
}

// planByID returns a dry run this App made within PlanTTL.
func (a *App) planByID(id string) (*plan.Plan, error) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	c, ok := a.plans[id]
	if !ok {
		return nil, fmt.Errorf("plan %q: not made here within the last %s (make one, or save one with plan --out FILE and give that): %w",
			id, PlanTTL, backend.ErrNotFound)
	}
	if a.now().Sub(c.at) > PlanTTL {
		delete(a.plans, id)
		return nil, fmt.Errorf("plan %q is older than %s: make a new one: %w", id, PlanTTL, ErrArchived)
	}
	return c.p, nil
}

// PlanRequest asks for a dry run.
type PlanRequest struct {
	Steps    []backend.Step
	Runtimes []Ref
}

// Plan is the dry run now: what a pass would do, and why. Its id can be
// applied (Apply with PlanID) within PlanTTL by this App.
func (a *App) Plan(ctx context.Context, req PlanRequest) (*views.Plan, error) {
	only, err := a.resolveKeys(ctx, "runtimes", req.Runtimes)
	if err != nil {
		return nil, err
	}
	p, _, err := a.Pass(ctx, PassRequest{Trigger: "plan", Steps: req.Steps, Only: only, DryRun: true, Wait: a.holdWait()})
	return p, err
}

// ApplyRequest asks for a pass now.
type ApplyRequest struct {
	Steps    []backend.Step
	Runtimes []Ref
	// Delete asks for the named runtimes' removal now (no notice), archived
	// first when they hold unsaved work.
	Delete bool
	// Announced carries out the step announced for each named runtime
	// (its scheduled archive or delete) now, without waiting for its due
	// time: "reclaim now" on what a notice said would happen. Every rule
	// but the notice period still applies (a pin, lease, hold or busy
	// runtime is skipped, unsaved work is archived first).
	Announced bool
	// Rule and Why say what asked for the removal when that was not a
	// person (policy.Request); the journal gives them as its reason.
	Rule policy.Code
	Why  string
	// PlanID applies exactly a dry run this App made; Plan exactly this
	// one (a plan saved with plan --out). Neither combines with Steps,
	// Runtimes or Delete.
	PlanID string
	Plan   *plan.Plan
	DryRun bool
	// Trigger says who asked ("cli", "api"); default "api".
	Trigger string
	// Progress, when set, is told after each action, and Step how a long
	// step goes (the CLI's progress line on a terminal); the API has none.
	Progress func(done, total int)
	Step     engine.Progress
}

// Apply runs a pass now: everything, some steps, some runtimes, a
// removal, or exactly a plan made earlier, never more (each action is
// re-checked under the runtime's lock).
func (a *App) Apply(ctx context.Context, req ApplyRequest) (*views.Pass, error) {
	exact := req.PlanID != "" || req.Plan != nil
	if exact && (len(req.Steps) > 0 || len(req.Runtimes) > 0 || req.Delete || req.Announced) {
		return nil, Input("plan_id", "a plan is applied as it is: it cannot be combined with steps or runtimes")
	}
	if req.Delete && len(req.Runtimes) == 0 {
		return nil, Input("runtimes", "which runtimes to delete?")
	}
	if req.Announced && (req.Delete || len(req.Steps) > 0 || len(req.Runtimes) == 0) {
		return nil, Input("runtimes", "an announced step is carried out for named runtimes, without steps or delete")
	}
	pr := PassRequest{Trigger: req.Trigger, DryRun: req.DryRun, Steps: req.Steps, Wait: a.holdWait(), Progress: req.Progress, Step: req.Step}
	if pr.Trigger == "" {
		pr.Trigger = "api"
	}
	switch {
	case req.Plan != nil:
		if err := plan.Check(req.Plan, "(given)"); err != nil {
			return nil, err
		}
		pr.Exact = req.Plan
	case req.PlanID != "":
		p, err := a.planByID(req.PlanID)
		if err != nil {
			return nil, err
		}
		pr.Exact = p
	}
	if pr.Exact != nil && !pr.DryRun {
		var keys []backend.Key
		for _, act := range pr.Exact.Actions {
			keys = append(keys, act.Key())
		}
		if shared := a.sharedOnFollower(keys); len(shared) > 0 {
			return nil, a.notLeading(ctx, fmt.Sprintf("apply a plan acting on %s (and %d more of the remote sources)", shared[0], len(shared)-1))
		}
	}
	switch {
	case pr.Exact != nil:
	default:
		live := req.Delete || req.Announced
		keys, err := a.resolveKeysLive(ctx, "runtimes", req.Runtimes, live)
		if err != nil {
			return nil, err
		}
		pr.Only = keys
		if shared := a.sharedOnFollower(keys); len(shared) > 0 {
			return nil, a.notLeading(ctx, fmt.Sprintf("%s (%d of the runtimes asked for)", shared[0], len(shared)))
		}
		if req.Announced {
			if pr.Steps, pr.Requests, err = a.announced(ctx, keys); err != nil {
				return nil, err
			}
		}
		if req.Delete {
			pr.Steps = []backend.Step{backend.StepDelete}
			for _, k := range keys {
				pr.Requests = append(pr.Requests, policy.Request{Key: k, Step: backend.StepDelete, Rule: req.Rule, Why: req.Why})
			}
		}
	}
	if pr.Exact != nil && pr.DryRun {
		return &views.Pass{Plan: pr.Exact}, nil
	}
	p, res, err := a.Pass(ctx, pr)
	if err != nil {
		return nil, err
	}
	if (req.Delete || req.Announced) && res != nil {
		notDone(p, res, pr.Requests)
	}
	return &views.Pass{Plan: p, Applied: res}, nil
}

// announced is the request of each runtime's announced step, and the
// steps they are; a runtime with nothing announced refuses them all.
func (a *App) announced(ctx context.Context, keys []backend.Key) ([]backend.Step, []policy.Request, error) {
	var steps []backend.Step
	var reqs []policy.Request
	for i, k := range keys {
		rec, err := a.store.Runtime(ctx, k)
		if err != nil {
			return nil, nil, err
		}
		step := backend.Step(rec.ScheduledStep)
		if step == "" {
			return nil, nil, fmt.Errorf("runtimes[%d]: nothing is announced for %s (no archive or delete is scheduled): %w",
				i, k, backend.ErrConflict)
		}
		if !slices.Contains(steps, step) {
			steps = append(steps, step)
		}
		reqs = append(reqs, policy.Request{Key: k, Step: step})
	}
	return steps, reqs, nil
}

// notDone adds, for each runtime asked to be removed that the plan does
// not act on, a skipped result saying why: a removal always answers for
// every runtime named.
func notDone(p *plan.Plan, res *plan.Applied, reqs []policy.Request) {
	acted := map[backend.Key]bool{}
	for _, a := range p.Actions {
		acted[a.Key()] = true
	}
	for _, rq := range reqs {
		k := rq.Key
		if acted[k] {
			continue
		}
		r := plan.Result{Runtime: k.ID, Backend: k.Backend, Source: k.Source, Step: rq.Step, Outcome: plan.Skip,
			Code: plan.ChangedSincePlan, Reason: "nothing to do"}
		for _, s := range p.Skipped {
			if s.Key() == k {
				r.Code, r.Reason = plan.ResultCode(s.Code), s.Reason
			}
		}
		res.Results = append(res.Results, r)
	}
}

// holdWait bounds how long a request waits for a pass that holds what it
// needs ([server] hold_wait).
func (a *App) holdWait() time.Duration { return a.setupNow().cfg.ServerSettings().HoldWait }
