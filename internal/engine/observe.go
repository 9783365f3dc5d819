package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/diskusage"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// Seen is one runtime as a pass observed it, with what the ledger knows.
type Seen struct {
	// Runtime points into the backend's listing (not a copy: at 100,000
	// runtimes a copy is 29 MB of fresh pages, and fresh pages are most of
	// a pass's cost on a paravirtualised machine).
	Runtime *backend.Runtime
	Source  *Source
	// Record is the ledger's record; zero for a runtime seen for the first
	// time (HasRecord false).
	Record    ledger.RuntimeRecord
	HasRecord bool
	// Activity is the newest activity reported to reclaimer (touch, API).
	Activity time.Time
	HeldBy   string
	// Filesystem is the policy filesystem id of the runtime's root.
	Filesystem string
	// Light: observed without activity, fingerprint and unsaved work.
	Light bool
	// unscanned: the /proc scan has not looked at it yet (DeferBusy).
	unscanned bool
}

// LastActive is the newest of reported and observed activity.
func (s *Seen) LastActive() time.Time {
	if s.Activity.After(s.Runtime.LastActivity) {
		return s.Activity
	}
	return s.Runtime.LastActivity
}

// PolicyRecord turns the ledger's facts into the policy's.
func (s *Seen) PolicyRecord() policy.Record {
	r := s.Record
	return policy.Record{
		Pinned: r.Pinned, PinReason: r.PinReason, LeaseUntil: r.LeaseUntil, HeldBy: s.HeldBy,
		Retention: r.RetentionOverride, Activity: s.Activity,
		Scheduled: backend.Step(r.ScheduledStep), ScheduledAt: r.ScheduledAt, ScheduledDue: r.ScheduledDue,
		Owners: len(r.Conversations), OrphanSince: s.orphanSince(),
	}
}

// orphanSince is when the runtime last had no owning conversation: when
// released, or when first seen if no host ever registered it; zero while
// owned, or when its source does not sweep orphans.
func (s *Seen) orphanSince() time.Time {
	r := s.Record
	switch {
	case len(r.Conversations) > 0:
		return time.Time{}
	case s.Runtime.Orphan != "":
		// Its backend says nothing owns it: since it was first seen, or
		// since its last owner let go.
		if r.ReleasedAt.After(r.FirstSeen) {
			return r.ReleasedAt
		}
		return r.FirstSeen
	case !s.Source.Settings.RegisteredOnly:
		return time.Time{}
	case !r.ReleasedAt.IsZero():
		return r.ReleasedAt
	case r.RegisteredAt.IsZero():
		return r.FirstSeen
	}
	return time.Time{}
}

// World is what one pass observed.
type World struct {
	Now         time.Time
	Runtimes    []*Seen
	Filesystems []policy.Filesystem
	// Gone are ledger records of runtimes no longer present anywhere
	// (archived, deleted, missing), for ls and status.
	Gone []ledger.RuntimeRecord
	// Problems are sources that could not be listed and other per-item
	// failures that did not stop the pass.
	Problems []plan.Skipped

	index map[backend.Key]*Seen // built by Find; Runtimes is fixed by then
}

// Find returns the runtime with key k.
func (w *World) Find(k backend.Key) *Seen {
	if w.index == nil {
		w.index = make(map[backend.Key]*Seen, len(w.Runtimes))
		for _, s := range w.Runtimes {
			w.index[s.Runtime.Key] = s
		}
	}
	return w.index[k]
}

// ObserveOptions narrow an observation.
type ObserveOptions struct {
	// Only lists just these runtimes (IDs passed to each Lister).
	Only []backend.Key
	// Record writes what was seen into the ledger (new runtimes, changed
	// states, runtimes gone missing). Default true for passes.
	Record bool
	// Light observes runtimes without their activity, fingerprint and
	// unsaved work where nothing needs them: sources with no retention,
	// idle suspend or disk budget, and runtimes with no notice in force
	// and no retention of their own. A pass then observes fully only the
	// runtimes it acts on.
	Light bool
	// DeferBusy leaves the /proc scan to the caller (Plan scans only the
	// runtimes a decision would touch).
	DeferBusy bool
}

// Observe re-reads the world from scratch.
func (e *Engine) Observe(ctx context.Context, opts ObserveOptions) (*World, error) {
	w := &World{Now: e.opts.Now().UTC()}

	// List every source, bounded in parallel.
	type listed struct {
		runtimes []backend.Runtime
		light    bool
		err      error
	}
	results := make([]listed, len(e.opts.Sources))
	var wg sync.WaitGroup
	sem := make(chan struct{}, e.opts.Concurrency)
	for i := range e.opts.Sources {
		src := &e.opts.Sources[i]
		var ids []string
		for _, k := range opts.Only {
			if k.Backend == src.Backend.Name() {
				ids = append(ids, k.ID)
			}
		}
		if len(opts.Only) > 0 && len(ids) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			l, _ := backend.As[backend.Lister](src.Backend)
			light := opts.Light && len(ids) == 0 && !needsActivity(src.Settings)
			rts, err := l.List(ctx, backend.ListOptions{IDs: ids, Light: light})
			results[i] = listed{rts, light, err}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	failedBackends := map[string]bool{}
	total := 0
	for _, r := range results {
		total += len(r.runtimes)
	}
	byKey := make(map[backend.Key]*Seen, total)
	// One allocation for every Seen instead of one each.
	slab := make([]Seen, 0, total)
	w.Runtimes = make([]*Seen, 0, total)
	for i, r := range results {
		src := &e.opts.Sources[i]
		if r.err != nil {
			failedBackends[src.Backend.Name()] = true
			w.Problems = append(w.Problems, plan.Skipped{Runtime: src.Name, Backend: src.Backend.Name(),
				Reason: "listing failed: " + r.err.Error()})
			continue
		}
		for j := range r.runtimes {
			rt := &r.runtimes[j]
			rt.Source = src.Name
			if prev, ok := byKey[rt.Key]; ok {
				// Two sources claim one runtime: touch neither.
				w.Problems = append(w.Problems, plan.Skipped{Runtime: rt.ID, Backend: rt.Backend,
					Reason: fmt.Sprintf("found by both %s and %s; fix the configuration", prev.Source.Name, src.Name)})
				prev.Runtime.Pinned = "found by two sources"
				continue
			}
			slab = append(slab, Seen{Runtime: rt, Source: src, Light: r.light, unscanned: opts.DeferBusy})
			s := &slab[len(slab)-1]
			byKey[rt.Key] = s
			w.Runtimes = append(w.Runtimes, s)
		}
	}
	slices.SortFunc(w.Runtimes, func(a, b *Seen) int {
		return cmp.Or(cmp.Compare(a.Runtime.Backend, b.Runtime.Backend), cmp.Compare(a.Runtime.ID, b.Runtime.ID))
	})

	if !opts.DeferBusy {
		if err := e.busy(ctx, w.Runtimes); err != nil {
			// Without the busy scan nothing local may be touched.
			return nil, fmt.Errorf("observe: scan for busy runtimes: %w", err)
		}
	}
	if err := e.attachLedger(ctx, w, byKey, opts, failedBackends); err != nil {
		return nil, err
	}
	// A notice in force or a runtime's own retention needs activity even
	// where its source's policies do not.
	var full []*Seen
	for _, s := range w.Runtimes {
		if s.Light && (s.Record.ScheduledStep != "" || (s.Record.RetentionOverride != nil && *s.Record.RetentionOverride > 0)) {
			full = append(full, s)
		}
	}
	if err := e.ObserveFully(ctx, full); err != nil {
		return nil, err
	}

	e.measureFilesystems(w)
	return w, nil
}

func (e *Engine) busy(ctx context.Context, seen []*Seen) error {
	for _, s := range seen {
		s.unscanned = false
	}
	if e.opts.Busy == nil {
		return nil
	}
	var paths []string
	for _, s := range seen {
		if s.Runtime.Path != "" && s.Runtime.Busy == "" {
			paths = append(paths, s.Runtime.Path)
		}
	}
	if len(paths) == 0 {
		return nil
	}
	busy, err := e.opts.Busy(ctx, paths)
	if err != nil {
		return err
	}
	for _, s := range seen {
		if why := busy[s.Runtime.Path]; why != "" && s.Runtime.Busy == "" {
			s.Runtime.Busy = why
		}
	}
	return nil
}

// attachLedger reads the ledger's records, activity and holds, and records
// what changed.
func (e *Engine) attachLedger(ctx context.Context, w *World, byKey map[backend.Key]*Seen, opts ObserveOptions, failedBackends map[string]bool) error {
	st := e.opts.Ledger
	if len(opts.Only) > 0 {
		return e.attachLedgerNarrow(ctx, w)
	}
	activity, err := st.ActivityTimes(ctx)
	if err != nil {
		return fmt.Errorf("observe: read activity: %w", err)
	}
	holds, err := st.ListHolds(ctx, ledger.HoldFilter{Now: w.Now})
	if err != nil {
		return fmt.Errorf("observe: read holds: %w", err)
	}
	held := map[backend.Key]string{}
	for _, h := range holds {
		held[fromLedgerKey(h.Key)] = h.Holder
	}
	// Every runtime's state, and in full only the records that carry a
	// decision (pin, lease, retention, schedule, archive): most runtimes
	// have none, and reading 100,000 full records was a quarter of a pass.
	states, err := st.RuntimeStates(ctx)
	if err != nil {
		return fmt.Errorf("observe: read runtimes: %w", err)
	}
	records := map[backend.Key]ledger.RuntimeRecord{}
	var after ledger.Key
	for {
		page, err := st.ListRuntimes(ctx, ledger.RuntimeFilter{After: after, Limit: 10000, Decided: true})
		if err != nil {
			return fmt.Errorf("observe: read runtimes: %w", err)
		}
		for _, r := range page {
			records[fromLedgerKey(r.Key)] = r
		}
		if len(page) < 10000 {
			break
		}
		after = page[len(page)-1].Key
	}
	recordOf := func(k backend.Key) (ledger.RuntimeRecord, bool, bool) {
		if r, ok := records[k]; ok {
			return r, true, true
		}
		state, ok := states[toLedgerKey(k)]
		return ledger.RuntimeRecord{Key: toLedgerKey(k), State: state, SizeBytes: -1}, ok, false
	}

	var obs []ledger.Observation
	for _, s := range w.Runtimes {
		k := s.Runtime.Key
		s.Activity = activity[toLedgerKey(k)]
		s.HeldBy = held[k]
		var whole bool
		s.Record, s.HasRecord, whole = recordOf(k)
		switch {
		case !s.HasRecord:
			obs = append(obs, observation(*s.Runtime, w.Now))
		case whole && changed(s), !whole && s.Record.State != string(s.Runtime.State):
			obs = append(obs, observation(*s.Runtime, w.Now))
		}
	}
	backendsListed := map[string]bool{}
	for _, src := range e.opts.Sources {
		backendsListed[src.Backend.Name()] = !failedBackends[src.Backend.Name()]
	}
	for lk := range states {
		k := fromLedgerKey(lk)
		if _, ok := byKey[k]; ok {
			continue
		}
		r, _, _ := recordOf(k)
		state := backend.State(r.State)
		if state.Present() && len(opts.Only) == 0 && backendsListed[k.Backend] {
			// It was there and is not any more, and nobody told us.
			obs = append(obs, ledger.Observation{Key: r.Key, State: string(backend.StateMissing), At: w.Now})
			r.State = string(backend.StateMissing)
		}
		if len(opts.Only) == 0 {
			w.Gone = append(w.Gone, r)
		}
	}
	slices.SortFunc(w.Gone, func(a, b ledger.RuntimeRecord) int { return a.Key.Compare(b.Key) })
	// A source that sweeps orphans needs when each runtime was first seen,
	// which the light read leaves out: read those records whole (orphans
	// are few; registered runtimes were read whole already).
	for _, s := range w.Runtimes {
		if s.HasRecord && (s.Source.Settings.RegisteredOnly || s.Runtime.Orphan != "") {
			if _, whole := records[s.Runtime.Key]; !whole {
				r, err := st.Runtime(ctx, toLedgerKey(s.Runtime.Key))
				if err != nil {
					return fmt.Errorf("observe: read runtime %s: %w", s.Runtime.Key, err)
				}
				r.State = s.Record.State
				s.Record = r
			}
		}
	}
	if opts.Record && len(obs) > 0 {
		if err := st.Observe(ctx, obs); err != nil {
			return fmt.Errorf("observe: record runtimes: %w", err)
		}
		// Keep the in-memory records in step with what was written.
		for _, s := range w.Runtimes {
			if !s.HasRecord {
				s.Record, s.HasRecord = observation(*s.Runtime, w.Now).FirstRecord(), true
			}
		}
	}
	return nil
}

func changed(s *Seen) bool {
	r, rt := s.Record, *s.Runtime
	return r.State != string(rt.State) || r.Home != rt.Home || !slices.Equal(r.Workspaces, rt.Workspaces) ||
		!maps.Equal(r.Labels, rt.Labels)
}

func observation(rt backend.Runtime, now time.Time) ledger.Observation {
	return ledger.Observation{Key: toLedgerKey(rt.Key), State: string(rt.State), Home: rt.Home,
		Workspaces: rt.Workspaces, Labels: rt.Labels, SizeBytes: -1, At: now}
}

// measureFilesystems measures the filesystem of every managed root once
// and gives each runtime the id of its budget.
func (e *Engine) measureFilesystems(w *World) {
	type fsKey struct {
		fsid      [2]int32
		high, low float64
	}
	ids := map[fsKey]string{}
	type measured struct {
		u   diskusage.Usage
		err error
	}
	usageOf := map[string]measured{} // once per managed root
	// fsOf measures the filesystem of path (once) and returns its budget id.
	fsOf := func(path string, set policy.Settings) (string, bool) {
		m, ok := usageOf[path]
		if !ok {
			m.u, m.err = e.opts.Usage(path)
			usageOf[path] = m
			if m.err != nil {
				w.Problems = append(w.Problems, plan.Skipped{Runtime: path, Reason: "measure disk usage: " + m.err.Error()})
			}
		}
		if m.err != nil {
			return "", false
		}
		u := m.u
		k := fsKey{u.FSID, set.DiskHigh, set.DiskLow}
		id, ok := ids[k]
		if !ok {
			id = fmt.Sprintf("fs%d", len(ids))
			ids[k] = id
			w.Filesystems = append(w.Filesystems, policy.Filesystem{ID: id, Path: path,
				UsedBytes: u.UsedBytes, AvailBytes: u.AvailBytes, Fraction: u.Fraction, High: set.DiskHigh, Low: set.DiskLow})
		}
		return id, true
	}
	for _, s := range w.Runtimes {
		rt := s.Runtime
		// A runtime's files are on its root's filesystem; one with no
		// managed folder (a container with no host mounts) lives on its
		// storage's (Docker's data root), which is measured in any case.
		path := cmp.Or(rt.Root, rt.Storage)
		if path == "" {
			continue
		}
		if id, ok := fsOf(path, s.Source.Settings); ok {
			s.Filesystem = id
		}
		if rt.Storage != "" && rt.Storage != path {
			fsOf(rt.Storage, s.Source.Settings)
		}
	}
}

// attachLedgerNarrow reads the ledger for the few runtimes of a narrowed
// observation (apply re-observing one runtime) without reading it whole.
func (e *Engine) attachLedgerNarrow(ctx context.Context, w *World) error {
	st := e.opts.Ledger
	for _, s := range w.Runtimes {
		k := toLedgerKey(s.Runtime.Key)
		r, err := st.Runtime(ctx, k)
		switch {
		case err == nil:
			s.Record, s.HasRecord = r, true
		case !errors.Is(err, ledger.ErrNotFound):
			return fmt.Errorf("observe %s: %w", k, err)
		}
		at, err := st.LastActivity(ctx, k)
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return fmt.Errorf("observe %s: %w", k, err)
		}
		s.Activity = at
		holds, err := st.ListHolds(ctx, ledger.HoldFilter{Key: k, Now: w.Now})
		if err != nil {
			return fmt.Errorf("observe %s: %w", k, err)
		}
		if len(holds) > 0 {
			s.HeldBy = holds[0].Holder
		}
	}
	return nil
}

// needsActivity tells whether a source's policies read activity, or (the
// lifetime cap) when a runtime started, which a container's listing does
// not tell.
func needsActivity(s policy.Settings) bool {
	return s.Retention > 0 || s.IdleSuspend > 0 || s.DiskHigh > 0 || s.MaxLifetime > 0
}

// ObserveFully replaces lightly observed runtimes of seen with full
// observations (activity, fingerprint, unsaved work), asking each backend
// for just those runtimes.
func (e *Engine) ObserveFully(ctx context.Context, seen []*Seen) error {
	bySource := map[*Source][]*Seen{}
	for _, s := range seen {
		if s.Light {
			bySource[s.Source] = append(bySource[s.Source], s)
		}
	}
	for src, list := range bySource {
		ids := make([]string, len(list))
		for i, s := range list {
			ids[i] = s.Runtime.ID
		}
		l, _ := backend.As[backend.Lister](src.Backend)
		rts, err := l.List(ctx, backend.ListOptions{IDs: ids})
		if err != nil {
			return fmt.Errorf("observe %s: %w", src.Name, err)
		}
		got := map[string]backend.Runtime{}
		for _, rt := range rts {
			rt.Source = src.Name
			got[rt.ID] = rt
		}
		for _, s := range list {
			if rt, ok := got[s.Runtime.ID]; ok {
				rt.Busy = s.Runtime.Busy
				if rt.Pinned == "" {
					rt.Pinned = s.Runtime.Pinned // e.g. found by two sources
				}
				s.Runtime, s.Light = &rt, false
			}
		}
	}
	return nil
}
