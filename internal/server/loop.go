package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/native"
	"github.com/reclaimer/reclaimer/internal/notify"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/plan"
)

// maxPlans bounds the dry runs kept for POST /v1/passes {plan_id}.
const maxPlans = 16

// passRequest describes one pass.
type passRequest struct {
	trigger string // timer, start, api, watch, reconnect
	opts    engine.PlanOptions
	dryRun  bool
	exact   *plan.Plan // apply exactly this plan
	// wait bounds the wait for a pass already running; 0 waits as long
	// as ctx lets it.
	wait time.Duration
}

// pass plans and (unless a dry run) applies, one pass at a time. The
// apply runs on a context that a client going away does not cancel: an
// action once started finishes; a stop ends it between actions.
func (d *Daemon) pass(ctx context.Context, req passRequest) (*plan.Plan, *plan.Applied, error) {
	var timeout <-chan time.Time
	if req.wait > 0 {
		t := time.NewTimer(req.wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case d.passSem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-timeout:
		return nil, nil, locked("another pass is running; try again when it is done")
	case <-d.stopCh:
		return nil, nil, errShuttingDown
	}
	defer func() { <-d.passSem }()
	if d.stopping.Load() {
		return nil, nil, errShuttingDown
	}
	s := d.setupNow()
	start := time.Now()
	var p *plan.Plan
	var w *engine.World
	var err error
	if req.exact != nil {
		p = req.exact
	} else if p, w, err = s.engine.Plan(ctx, req.opts); err != nil {
		d.finishPass(req, start, nil, nil, nil, err)
		return nil, nil, err
	}
	full := len(req.opts.Only) == 0 && req.exact == nil
	if full {
		d.stateMu.Lock()
		d.world = w // what the API reports from, as soon as it is seen
		d.stateMu.Unlock()
	}
	if req.dryRun {
		d.rememberPlan(p)
		if full {
			d.finishPass(req, start, w, p, nil, nil)
		}
		return p, nil, nil
	}
	applyWorld := w
	if !full {
		applyWorld = nil // narrowed: observe everything once for the trash leftovers
	}
	res, err := s.engine.Apply(context.WithoutCancel(ctx), p, engine.ApplyOptions{World: applyWorld, Stop: d.stopCh})
	if err != nil {
		d.finishPass(req, start, w, p, nil, err)
		return p, nil, err
	}
	d.finishPass(req, start, w, p, res, nil)
	d.announce(s, p, res)
	return p, res, nil
}

// finishPass records the pass for status, metrics and the key cache.
func (d *Daemon) finishPass(req passRequest, start time.Time, w *engine.World, p *plan.Plan, res *plan.Applied, err error) {
	took := time.Since(start)
	full := w != nil && len(req.opts.Only) == 0 && req.exact == nil
	if full {
		d.metrics.observePass(req.trigger, req.dryRun, took, w, res)
		d.keys.refresh(w)
	} else {
		// A narrowed observation says nothing of the other runtimes: the
		// gauges keep what the last full pass saw.
		d.metrics.observePass(req.trigger, req.dryRun, took, nil, res)
	}
	if res != nil {
		for _, r := range res.Results {
			if r.Outcome == plan.Done && r.Step.Destructive() {
				state := backend.StateDeleted
				if r.Step == backend.StepArchive {
					state = backend.StateArchived
				}
				d.keys.set(ledger.Key{Backend: r.Backend, ID: r.Runtime}, string(state))
			}
		}
	}
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	if full {
		d.world = w
		if req.dryRun {
			d.lastDry, d.lastDryAt = p, time.Now()
		} else {
			d.lastDry = nil // what it showed was just applied
		}
	}
	if req.dryRun {
		return
	}
	sum := &openapi.PassSummary{Trigger: req.trigger, StartedAt: start.UTC(), FinishedAt: time.Now().UTC()}
	if p != nil {
		sum.PlanId = p.ID
	}
	if err != nil {
		sum.Error = err.Error()
	}
	if res != nil {
		sum.Actions = len(res.Results)
		sum.FreedBytes = res.FreedBytes
		for _, r := range res.Results {
			if r.Outcome == plan.Failed {
				sum.Failed++
			}
		}
	}
	d.lastPass = sum
	level := d.log.Debug
	if sum.FreedBytes > 0 || sum.Failed > 0 || err != nil {
		level = d.log.Info
	}
	level("pass", "trigger", req.trigger, "plan", sum.PlanId, "actions", sum.Actions, "freed_bytes", sum.FreedBytes,
		"failed", sum.Failed, "took", took.Round(time.Millisecond).String(), "err", err)
}

func (d *Daemon) rememberPlan(p *plan.Plan) {
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	now := time.Now()
	for id, c := range d.plans {
		if now.Sub(c.at) > planTTL {
			delete(d.plans, id)
		}
	}
	// A plan of a large host is large: keep the newest few only.
	for len(d.plans) >= maxPlans {
		oldest := ""
		for id, c := range d.plans {
			if oldest == "" || c.at.Before(d.plans[oldest].at) {
				oldest = id
			}
		}
		delete(d.plans, oldest)
	}
	d.plans[p.ID] = cachedPlan{p: p, at: now}
}

// planByID returns a dry run made within planTTL; 404 if never made, 410
// once too old to apply.
func (d *Daemon) planByID(id string) (*plan.Plan, error) {
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	c, ok := d.plans[id]
	if !ok {
		return nil, notFound("plan %q: not made by this daemon within the last %s (GET /v1/plan makes one)", id, planTTL)
	}
	if time.Since(c.at) > planTTL {
		delete(d.plans, id)
		return nil, &apiError{410, openapi.Archived, "plan_id", fmt.Sprintf("plan %q is older than %s: make a new one", id, planTTL)}
	}
	return c.p, nil
}

// announce sends the notices of an applied pass.
func (d *Daemon) announce(s *setup, p *plan.Plan, res *plan.Applied) {
	now := time.Now().UTC()
	for _, n := range p.Scheduled {
		s.notifier.Send(notify.Event{Event: notify.Scheduled, Runtime: n.Runtime, Backend: n.Backend, Step: string(n.Step),
			Due: n.Due, Reason: n.Reason, PlanID: p.ID, At: now, HowToStop: howToCancel(n.Backend, n.Runtime)})
	}
	for _, r := range res.Results {
		ev := notify.Event{Runtime: r.Runtime, Backend: r.Backend, Step: string(r.Step), Reason: r.Reason,
			FreedBytes: r.FreedBytes, ArchiveID: r.ArchiveID, PlanID: p.ID, At: now}
		switch {
		case r.Outcome == plan.Failed:
			ev.Event = notify.Failed
		case r.Outcome != plan.Done:
			continue
		case r.ArchiveID != "":
			ev.Event = notify.Archived
		default:
			ev.Event = notify.Reclaimed
		}
		s.notifier.Send(ev)
	}
}

func howToCancel(backendName, id string) string {
	q := "?backend=" + backendName
	return fmt.Sprintf("report activity (POST /v1/runtimes/%s/activity%s), pin it (PUT /v1/runtimes/%s/pin%s), "+
		"lease it (POST /v1/runtimes/%s/lease%s) or take a hold; or run: reclaimer pin %s", id, q, id, q, id, q, id)
}

// recordDelivery journals each webhook delivery and counts it.
func (d *Daemon) recordDelivery(del notify.Delivery) {
	result := ledger.ResultDone
	reason := fmt.Sprintf("%s notice to %s", del.Event.Event, del.URL)
	if del.Err != nil {
		result, reason = ledger.ResultFailed, reason+": "+del.Err.Error()
		d.log.Warn("notice not delivered", "event", del.Event.Event, "url", del.URL, "attempts", del.Attempts, "err", del.Err)
	}
	d.metrics.notices.WithLabelValues(del.Event.Event, result).Inc()
	k := ledger.Key{Backend: del.Event.Backend, ID: del.Event.Runtime}
	if k.Validate() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := time.Now().UTC()
	id, err := d.raw.AppendIntent(ctx, ledger.Intent{PlanID: del.Event.PlanID, Key: k, Step: "notify", Reason: reason, At: now})
	if err == nil {
		err = d.raw.RecordOutcome(ctx, id, ledger.Outcome{Result: result, Reason: reason, At: now})
	}
	if err != nil {
		d.log.Warn("journal a notice", "err", err)
	}
}

// loop runs a pass at start and every interval, until ctx ends.
func (d *Daemon) loop(ctx context.Context) {
	trigger := "start"
	for {
		d.runScheduled(ctx, trigger)
		trigger = "timer"
		interval := d.setupNow().server.Interval
		d.stateMu.Lock()
		d.nextPass = time.Now().Add(interval).UTC()
		d.stateMu.Unlock()
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-d.fullCh:
			t.Stop()
			trigger = "reconnect"
		}
	}
}

func (d *Daemon) runScheduled(ctx context.Context, trigger string) {
	if _, _, err := d.pass(ctx, passRequest{trigger: trigger}); err != nil && ctx.Err() == nil {
		d.log.Error("pass", "trigger", trigger, "err", err)
	}
	d.syncNative(ctx)
	// Expired holds protect nothing; a day of them is kept for reading.
	if n, err := d.raw.PruneHolds(ctx, time.Now().Add(-24*time.Hour)); err != nil && ctx.Err() == nil {
		d.log.Warn("prune expired holds", "err", err)
	} else if n > 0 {
		d.log.Debug("pruned expired holds", "holds", n)
	}
}

// syncNative writes the policy into the providers' own timers (native
// first: the provider acts between passes), after the loop's own pass.
// Leases and holds taken since extend those timers here too.
func (d *Daemon) syncNative(ctx context.Context) {
	s := d.setupNow()
	if !slices.ContainsFunc(s.sources, func(src engine.Source) bool {
		_, ok := backend.As[backend.NativeLifecycle](src.Backend)
		return ok
	}) {
		return
	}
	rep, err := native.Sync(ctx, native.Options{Sources: s.sources, Ledger: d.store})
	switch {
	case err != nil && ctx.Err() == nil:
		d.log.Error("native sync", "err", err)
	case err == nil && (rep.Written > 0 || rep.Failed > 0 || len(rep.Problems) > 0):
		d.log.Info("native sync", "written", rep.Written, "failed", rep.Failed, "drifted", rep.Drifted,
			"problems", len(rep.Problems))
	}
}

// syncNativeOf pushes a hold or lease just taken on k into its provider's
// own timers at once (an E2B timeout due in a minute must not pause a
// sandbox a host just took a ten-minute hold on), in the background: the
// request that took it does not wait on the provider.
func (d *Daemon) syncNativeOf(k ledger.Key) {
	s := d.setupNow()
	if !slices.ContainsFunc(s.sources, func(src engine.Source) bool {
		_, ok := backend.As[backend.NativeLifecycle](src.Backend)
		return ok && src.Backend.Name() == k.Backend
	}) {
		return
	}
	d.mu.Lock()
	runCtx := d.runCtx
	d.mu.Unlock()
	if runCtx == nil || runCtx.Err() != nil {
		return // not serving, or stopping: the next start's pass syncs
	}
	d.bg.Go(func() {
		ctx, cancel := context.WithTimeout(runCtx, time.Minute)
		defer cancel()
		if _, err := native.Sync(ctx, native.Options{Sources: s.sources, Ledger: d.store,
			Only: []backend.Key{{Backend: k.Backend, ID: k.ID}}}); err != nil {
			d.log.Warn("native sync after a hold or lease", "runtime", k.String(), "err", err)
		}
	})
}

// watch runs Watch of every backend that has it, and a narrowed pass
// (that runtime, caches) for each change, coalescing bursts.
func (d *Daemon) watch(ctx context.Context) {
	d.startWatchers(ctx)
	for {
		var k backend.Key
		select {
		case <-ctx.Done():
			return
		case k = <-d.kickCh:
		}
		keys := []backend.Key{k}
	drain:
		for {
			select {
			case k := <-d.kickCh:
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			default:
				break drain
			}
		}
		_, _, err := d.pass(ctx, passRequest{trigger: "watch",
			opts: engine.PlanOptions{Only: keys, Steps: []backend.Step{backend.StepCaches}}})
		if err != nil && ctx.Err() == nil {
			d.log.Warn("pass after a change", "runtimes", len(keys), "err", err)
		}
	}
}

// startWatchers runs Watch for each source of the setup in force that has
// it, until ctx ends or the next call (a reload) replaces them.
func (d *Daemon) startWatchers(ctx context.Context) {
	wctx, cancel := context.WithCancel(ctx)
	d.mu.Lock()
	if d.stopWatch != nil {
		d.stopWatch()
	}
	d.stopWatch = cancel
	s := d.cur
	d.mu.Unlock()
	for i := range s.sources {
		src := s.sources[i]
		if w, ok := backend.As[backend.Watcher](src.Backend); ok {
			go d.watchOne(wctx, src, w)
		}
	}
}

// watchOne keeps one backend's event stream open: after a failure it
// retries with backoff, and asks for a full pass once it reconnects,
// since the events of the gap were missed.
func (d *Daemon) watchOne(ctx context.Context, src engine.Source, w backend.Watcher) {
	backoff := time.Second
	name := src.Backend.Name()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case d.fullCh <- struct{}{}:
			default:
			}
		}
		started := time.Now()
		err := w.Watch(ctx, func(id string) {
			select {
			case d.kickCh <- backend.Key{Backend: name, ID: id}:
			default: // a burst: the next full pass covers the rest
			}
		})
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second // it ran a good while: start over
		}
		d.log.Warn("watch events; retrying", "source", src.Name, "err", err, "in", backoff.String())
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, time.Minute)
	}
}

// Reload re-reads the configuration and swaps it in between passes,
// logging what changed. A configuration that does not load changes
// nothing.
func (d *Daemon) Reload(ctx context.Context) error {
	old := d.setupNow()
	cfg, err := loadConfig(d.opts.ConfigPath)
	if err != nil {
		d.log.Error("reload: configuration not changed", "err", err)
		return err
	}
	if err := config.CheckReload(old.cfg, cfg); err != nil {
		d.log.Error("reload: configuration not changed", "err", err)
		return err
	}
	changes := configChanges(old.cfg, cfg)
	if len(changes) == 0 {
		d.log.Info("reload: nothing changed")
		return nil
	}
	ns := cfg.ServerSettings()
	if ns.Listen != old.server.Listen {
		d.log.Warn("reload: listen takes effect at the next start")
	}
	select {
	case d.passSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-d.passSem }()
	s, err := d.build(cfg)
	if err != nil {
		d.log.Error("reload: configuration not changed", "err", err)
		return err
	}
	d.mu.Lock()
	d.cur = s
	d.mu.Unlock()
	if wctx := d.watchCtx(); wctx != nil {
		d.startWatchers(wctx) // the new backends' event streams replace the old
	}
	d.level.Set(parseLevel(ns.LogLevel))
	d.closeSetup(old)
	d.log.Info("reloaded the configuration", "changed", strings.Join(changes, "; "))
	return nil
}

// configChanges lists the keys whose values differ, as "key: old → new".
func configChanges(a, b *config.Config) []string {
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", toJSONValue(a), fa)
	flatten("", toJSONValue(b), fb)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if fa[k] != fb[k] {
			va, vb := fa[k], fb[k]
			if strings.Contains(strings.ToLower(k), "secret") || strings.Contains(k, "token") {
				va, vb = "(hidden)", "(hidden)"
			}
			out = append(out, fmt.Sprintf("%s: %s → %s", k, orNone(va), orNone(vb)))
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}

// toJSONValue turns a configuration into maps keyed as in the file.
func toJSONValue(v any) any {
	data, err := toml.Marshal(v)
	if err != nil {
		return nil
	}
	var out map[string]any
	_ = toml.Unmarshal(data, &out)
	return out
}

func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, x[k], out)
		}
	case []any:
		if len(x) > 0 {
			if _, table := x[0].(map[string]any); !table {
				out[prefix] = fmt.Sprint(x) // a list of values is one value
				return
			}
		}
		for i, e := range x {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), e, out)
		}
	case nil:
	default:
		out[prefix] = fmt.Sprint(x)
	}
}
