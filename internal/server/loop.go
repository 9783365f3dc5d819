package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/notify"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/plan"
)

// onPass is the application layer's report of each pass: metrics,
// notices of what was applied, and the event for tests.
func (d *Daemon) onPass(rep ops.PassReport) {
	full := rep.World != nil && len(rep.Request.Only) == 0 && rep.Request.Exact == nil
	w := rep.World
	if !full {
		// A narrowed observation says nothing of the other runtimes: the
		// gauges keep what the last full pass saw.
		w = nil
	}
	d.metrics.observePass(rep.Request.Trigger, rep.Request.DryRun, rep.Took, w, rep.Plan, rep.Applied)
	d.metrics.board.observe(d.metrics, rep, w, d.app.Config().ServerSettings().Interval, d.clock.Now())
	if rep.Applied != nil {
		d.announce(d.setupNow(), rep.Plan, rep.Applied)
	}
	if !rep.Request.DryRun {
		d.logPass(rep)
		d.kickOutbox() // the notices the pass recorded
	}
	if d.dash != nil && !rep.Request.DryRun {
		d.dash.Publish("pass")
	}
	d.event(Event{Kind: "pass", Pass: &rep})
}

// logPass logs a pass once, whatever it did (a quiet first pass too):
// its trigger, what it saw, the actions and their outcomes, what it freed
// and how long it took; an error only when there was one.
func (d *Daemon) logPass(rep ops.PassReport) {
	attrs := []any{"trigger", rep.Request.Trigger}
	if rep.Plan != nil {
		attrs = append(attrs, "plan", rep.Plan.ID)
	}
	if rep.World != nil {
		attrs = append(attrs, "seen", len(rep.World.Runtimes))
	}
	var actions, done, failed int
	var freed int64
	if res := rep.Applied; res != nil {
		actions, freed = len(res.Results), res.FreedBytes
		for _, r := range res.Results {
			switch r.Outcome {
			case plan.Done:
				done++
			case plan.Failed:
				failed++
			}
		}
	}
	attrs = append(attrs, "actions", actions, "done", done, "failed", failed, "freed_bytes", freed)
	if rep.Plan != nil && len(rep.Plan.Problems) > 0 {
		attrs = append(attrs, "problems", len(rep.Plan.Problems))
	}
	attrs = append(attrs, "took", rep.Took.Round(time.Millisecond).String())
	level := d.log.Info
	switch {
	case rep.Err != nil && (errors.Is(rep.Err, context.Canceled) || errors.Is(rep.Err, ops.ErrShuttingDown)):
		attrs = append(attrs, "err", rep.Err)
		level = d.log.Warn // a stop cut it short
	case rep.Err != nil:
		attrs = append(attrs, "err", rep.Err)
		level = d.log.Error
	case failed > 0:
		level = d.log.Warn
	}
	level("pass", attrs...)
}

// announce sends from memory the notices of an applied pass that the
// ledger did not record: the results of the steps that destroy nothing,
// and a removal done whose notice could not be recorded. The recorded
// ones (a step scheduled, a removal done or failed: Result.Noticed) go
// through the outbox, which sends them from the ledger at least once. In
// a fleet only a term that could act records them (fenced): a leader
// whose writes were refused announces nothing of them, and a failure it
// could not record is not reported as failed (engine.applyOne).
func (d *Daemon) announce(s *setup, p *plan.Plan, res *plan.Applied) {
	now := d.clock.Now().UTC()
	for _, r := range res.Results {
		ev := notify.Event{Runtime: r.Runtime, Backend: r.Backend, Source: r.Source, Step: string(r.Step), Reason: r.Reason,
			FreedBytes: r.FreedBytes, ArchiveID: r.ArchiveID, PlanID: p.ID, At: now}
		switch {
		case r.Noticed:
			continue // recorded as a notice: the outbox sends it
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

func howToCancel(k backend.Key) string {
	id := url.PathEscape(k.ID)
	q := "?backend=" + url.QueryEscape(k.Backend) + "&source=" + url.QueryEscape(k.Source)
	return fmt.Sprintf("report activity (POST /v1/runtimes/%s/activity%s), pin it (PUT /v1/runtimes/%s/pin%s), "+
		"lease it (POST /v1/runtimes/%s/lease%s) or take a hold; or run: reclaimer pin %s", id, q, id, q, id, q, k)
}

// recordDelivery journals each webhook delivery and counts it; an outbox
// delivery's outcome is written to the ledger first.
func (d *Daemon) recordDelivery(del notify.Delivery) {
	if del.Notice != 0 && d.recordOutbox(del) {
		return
	}
	result := ledger.ResultDone
	// del.URL is redacted and del.Err quotes no credential (notify's
	// contract): the journal, readable through /v1/journal, holds none.
	reason := fmt.Sprintf("%s notice to %s", del.Event.Event, del.URL)
	if del.ID != "" {
		reason += " (delivery " + del.ID + ")"
	}
	switch {
	case del.Err != nil && del.Notice != 0:
		// Given up: the ledger says so (recordOutbox), and it is never
		// sent again.
		result, reason = ledger.ResultFailed, reason+": given up: "+del.Err.Error()
		d.log.Error("notice given up: not delivered after its attempts", "event", del.Event.Event, "runtime", del.Event.Runtime,
			"url", del.URL, "delivery", del.ID, "attempts", del.Attempts, "err", del.Err)
	case del.Err != nil:
		result, reason = ledger.ResultFailed, reason+": "+del.Err.Error()
		d.log.Warn("notice not delivered", "event", del.Event.Event, "url", del.URL, "delivery", del.ID, "attempts", del.Attempts, "err", del.Err)
	}
	d.metrics.notices.WithLabelValues(del.Event.Event, result).Inc()
	defer d.event(Event{Kind: "delivery", Err: del.Err})
	k := ledger.Key{Source: del.Event.Source, Backend: del.Event.Backend, ID: del.Event.Runtime}
	if k.Validate() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := d.clock.Now().UTC()
	// A shared runtime's rows are the leader's, under its fence and in one
	// transaction (engine.WriteFor): a replica whose term ended since it
	// recorded the notice (a delivery retried for minutes) has delivered
	// it, but writes nothing of a remote runtime any more.
	err := d.app.Engine().WriteFor(ctx, k, func(ctx context.Context, st ledger.Store) error {
		id, err := st.AppendIntent(ctx, ledger.Intent{PlanID: del.Event.PlanID, Key: k, Step: "notify", Reason: reason, At: now})
		if err == nil {
			err = st.RecordOutcome(ctx, id, ledger.Outcome{Result: result, Reason: reason, At: now})
		}
		return err
	})
	switch {
	case engine.Refused(err):
		d.log.Warn("notice delivered but not journaled: this replica no longer leads", "event", del.Event.Event,
			"runtime", k.String(), "delivery", del.ID, "err", err)
	case err != nil:
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
		d.app.SetNextPass(d.clock.Now().Add(interval).UTC())
		t := d.clock.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-d.fullCh:
			t.Stop()
			trigger = "reconnect"
		}
	}
}

func (d *Daemon) runScheduled(ctx context.Context, trigger string) {
	if d.ledgerDown() {
		d.log.Warn("pass skipped: the ledger (PostgreSQL) does not answer", "trigger", trigger)
		return
	}
	d.recoverLeaderEntries(ctx)
	if trigger == "start" {
		// Native sync first at start (rules for remote providers: turn
		// off what deletes before anything suspends): a provider timer
		// that deletes what is stopped is off before the first pass.
		d.syncNative(ctx)
	}
	// The pass logs itself (logPass); a pass that could not start (one
	// already running, a stop) is not a pass.
	if _, _, err := d.app.Pass(ctx, ops.PassRequest{Trigger: trigger}); err != nil && ctx.Err() == nil &&
		(errors.Is(err, backend.ErrBusy) || errors.Is(err, ops.ErrShuttingDown)) {
		d.log.Warn("pass not run", "trigger", trigger, "err", err)
	}
	d.syncNative(ctx)
	// Expired holds protect nothing; a day of them is kept for reading.
	if n, err := d.app.PruneHolds(ctx); err != nil && ctx.Err() == nil {
		d.log.Warn("prune expired holds", "err", err)
	} else if n > 0 {
		d.log.Debug("pruned expired holds", "holds", n)
	}
}

// syncNative writes the policy into the providers' own timers (native
// first: the provider acts between passes), after the loop's own pass.
// Leases and holds taken since extend those timers here too.
func (d *Daemon) syncNative(ctx context.Context) {
	if !d.app.HasNative(nil) {
		return
	}
	rep, err := d.app.Native(ctx, true, nil)
	switch {
	case err != nil && ctx.Err() == nil:
		d.log.Error("native sync", "err", err)
	case err == nil && (rep.Written > 0 || rep.Failed > 0 || len(rep.Problems) > 0):
		d.log.Info("native sync", "written", rep.Written, "failed", rep.Failed, "drifted", rep.Drifted,
			"problems", len(rep.Problems))
	}
	d.event(Event{Kind: "native", Err: err})
}

// syncNativeOf pushes a hold or lease just taken on k into its provider's
// own timers at once (an E2B timeout due in a minute must not pause a
// sandbox a host just took a ten-minute hold on), in the background: the
// request that took it does not wait on the provider.
func (d *Daemon) syncNativeOf(k backend.Key) {
	if !d.app.HasNative(&k) {
		return
	}
	runCtx := d.watchCtx()
	if runCtx == nil || runCtx.Err() != nil {
		return // not serving, or stopping: the next start's pass syncs
	}
	d.bg.Go(func() {
		ctx, cancel := context.WithTimeout(runCtx, time.Minute)
		defer cancel()
		_, err := d.app.Native(ctx, true, []backend.Key{k})
		if err != nil {
			d.log.Warn("native sync after a hold or lease", "runtime", k.String(), "err", err)
		}
		d.event(Event{Kind: "native", Err: err})
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
		// The pass logs itself (logPass).
		_, _, err := d.app.Pass(ctx, ops.PassRequest{Trigger: "watch", Only: keys, Steps: []backend.Step{backend.StepCaches}})
		if err != nil && ctx.Err() == nil && errors.Is(err, ops.ErrShuttingDown) {
			d.log.Debug("pass after a change not run", "runtimes", len(keys), "err", err)
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
	d.mu.Unlock()
	for _, src := range d.app.Sources() {
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
		started := d.clock.Now()
		d.event(Event{Kind: "watch", Source: src.Name})
		err := w.Watch(ctx, func(id string) {
			select {
			case d.kickCh <- backend.Key{Source: src.Name, Backend: name, ID: id}:
			default: // a burst: the next full pass covers the rest
			}
		})
		if ctx.Err() != nil {
			return
		}
		if d.clock.Now().Sub(started) > time.Minute {
			backoff = time.Second // it ran a good while: start over
		}
		d.log.Warn("watch events; retrying", "source", src.Label, "err", err, "in", backoff.String())
		t := d.clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		backoff = min(backoff*2, time.Minute)
	}
}

// Reload re-reads the configuration and swaps it in between passes,
// logging what changed. A configuration that does not load changes
// nothing.
func (d *Daemon) Reload(ctx context.Context) (err error) {
	defer func() { d.event(Event{Kind: "reload", Err: err}) }()
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
	s, err := d.build(cfg)
	if err != nil {
		d.log.Error("reload: configuration not changed", "err", err)
		return err
	}
	if err := d.app.Reload(ctx, cfg); err != nil {
		d.closeSetup(s)
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
	d.kickOutbox() // the webhooks of the new configuration
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
			if k == "ledger.url" {
				va, vb = config.RedactURL(va), config.RedactURL(vb)
			}
			// Rule "no configuration message quotes a credential".
			va, vb = config.RedactCredentials(va), config.RedactCredentials(vb)
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

// toJSONValue turns a configuration into maps keyed as in the file, but
// for the source tables, keyed by their stable names: a table added or
// moved is one change, not one for each table after it.
func toJSONValue(c *config.Config) any {
	data, err := c.Marshal()
	if err != nil {
		return nil
	}
	var out map[string]any
	_ = toml.Unmarshal(data, &out)
	names := map[string][]string{}
	for _, src := range c.Sources {
		names[src.Kind] = append(names[src.Kind], src.Name())
	}
	for table, ns := range names {
		tables, ok := out[table].([]any)
		if !ok || len(tables) != len(ns) {
			continue
		}
		delete(out, table)
		for i, t := range tables {
			out[ns[i]] = t
		}
	}
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
