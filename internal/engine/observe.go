package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/diskusage"
	"github.com/reclaimer/reclaimer/internal/leader"
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
	// clocked: its agent-server's idle clock was read (or it has none).
	clocked bool
	// clock says which of its provider's times were clamped (clampTimes).
	clock clamped
}

// LastActive is the newest of reported and observed activity.
func (s *Seen) LastActive() time.Time {
	if s.Activity.After(s.Runtime.LastActivity) {
		return s.Activity
	}
	return s.Runtime.LastActivity
}

// ActivityFrom says where LastActive comes from: "reported" (touch, the
// API), "observed" (the backend: files, the provider), or "" when neither
// knows.
func (s *Seen) ActivityFrom() string {
	switch {
	case s.Activity.IsZero() && s.Runtime.LastActivity.IsZero():
		return ""
	case s.Activity.After(s.Runtime.LastActivity):
		return "reported"
	}
	return "observed"
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

// Listed is what one pass learned of one source.
type Listed struct {
	Source *Source
	// OK: the source was listed (warnings aside).
	OK bool
	// Runtimes is how many it listed.
	Runtimes int
	// Took is how long the listing took.
	Took time.Duration
}

// World is what one pass observed.
type World struct {
	Now         time.Time
	Runtimes    []*Seen
	Filesystems []policy.Filesystem
	// Usage is the measurement of each filesystem, by Filesystem.ID.
	Usage map[string]diskusage.Usage
	// Gone are ledger records of the configured sources' runtimes no
	// longer present (archived, deleted, missing), for ls and status.
	Gone []ledger.RuntimeRecord
	// Sources says, per source listed, whether the listing worked.
	Sources []Listed
	// Problems are what the pass could not look at: sources that could not
	// be listed, filesystems that could not be measured, selections that
	// failed. They did not stop the pass.
	Problems []plan.Problem
	// Explained is the explanation a plan was asked for
	// (PlanOptions.Explain); nil otherwise.
	Explained *Explained

	index map[backend.Key]*Seen // built by Find; Runtimes is fixed by then
	// terms are the leadership terms the shared sources were listed
	// under, by source name: what was seen of them is recorded under that
	// term's fence, or not at all.
	terms map[string]*leader.Term
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
	// Only lists just these runtimes (IDs passed to each Lister of their
	// source).
	Only []backend.Key
	// Record writes what was seen into the ledger (new runtimes, changed
	// states, runtimes gone missing, legacy records adopted). Default true
	// for passes.
	Record bool
	// Light observes runtimes without their activity, fingerprint and
	// unsaved work where nothing needs them: sources whose policies read
	// no activity, and runtimes with no notice in force and no retention
	// of their own. A pass then observes fully only the runtimes it acts
	// on.
	Light bool
	// DeferBusy leaves the /proc scan to the caller (Plan scans only the
	// runtimes a decision would touch).
	DeferBusy bool
}

// listing is one source's listing in a pass.
type listing struct {
	runtimes []backend.Runtime
	light    bool
	err      error
	took     time.Duration
	skipped  bool         // not asked (a narrowed observation of other sources)
	term     *leader.Term // the term a shared source was listed under
}

// Observe re-reads the world from scratch.
func (e *Engine) Observe(ctx context.Context, opts ObserveOptions) (*World, error) {
	w := &World{Now: e.opts.Now().UTC()}
	results := e.list(ctx, opts)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	total := 0
	for _, r := range results {
		total += len(r.runtimes)
	}
	byKey := make(map[backend.Key]*Seen, total)
	// One allocation for every Seen instead of one each.
	slab := make([]Seen, 0, total)
	w.Runtimes = make([]*Seen, 0, total)
	empty := map[string]string{} // source → why it listed nothing
	for i, r := range results {
		src := &e.opts.Sources[i]
		if r.skipped {
			continue
		}
		if r.term != nil {
			if w.terms == nil {
				w.terms = map[string]*leader.Term{}
			}
			w.terms[src.Name] = r.term
		}
		ok := e.listingProblems(w, src, r, empty)
		w.Sources = append(w.Sources, Listed{Source: src, OK: ok, Runtimes: len(r.runtimes), Took: r.took})
		if !ok {
			continue
		}
		for j := range r.runtimes {
			rt := &r.runtimes[j]
			rt.Key.Source = src.Name
			if why := unusable(rt); why != "" {
				// One source's bad data is that source's problem (rules for
				// remote providers): the item is skipped and reported, and
				// the ledger, which would refuse its key for the whole
				// batch, never sees it.
				w.Problems = append(w.Problems, plan.Problem{Code: plan.BadItem, Source: src.Name, Label: src.Label,
					Backend: rt.Backend, Runtime: rt.ID, Message: "skipped a listed item: " + why})
				continue
			}
			clock := clampTimes(w, src, rt)
			if _, dup := byKey[rt.Key]; dup {
				continue // a backend listing one runtime twice: the first counts
			}
			slab = append(slab, Seen{Runtime: rt, Source: src, Light: r.light, unscanned: opts.DeferBusy, clock: clock})
			s := &slab[len(slab)-1]
			byKey[rt.Key] = s
			w.Runtimes = append(w.Runtimes, s)
		}
	}
	slices.SortFunc(w.Runtimes, func(a, b *Seen) int { return a.Runtime.Key.Compare(b.Runtime.Key) })

	if !opts.DeferBusy {
		if err := e.busy(ctx, w.Runtimes); err != nil {
			// Without the busy scan nothing local may be touched.
			return nil, fmt.Errorf("observe: scan for busy runtimes: %w", err)
		}
	}
	if err := e.attachLedger(ctx, w, byKey, opts, empty); err != nil {
		return nil, err
	}
	for _, s := range w.Runtimes {
		e.floorCreation(ctx, s, w.Now)
	}
	// A notice in force or a runtime's own retention needs activity even
	// where its source's policies do not.
	var full []*Seen
	for _, s := range w.Runtimes {
		if s.Light && (s.Record.ScheduledStep != "" || (s.Record.RetentionOverride != nil && *s.Record.RetentionOverride > 0)) {
			full = append(full, s)
		}
	}
	if err := e.ObserveFully(ctx, w, full); err != nil {
		return nil, err
	}
	e.readIdleClocks(ctx, w.Runtimes)

	e.measureFilesystems(w)
	return w, nil
}

// readIdleClocks moves the last activity of every fully observed, running
// runtime whose OpenHands agent-server is known (the backend's
// Runtime.AgentServer, else the agent_server_url a host registered) to
// what that server's idle clock says, when newer. Reading it is not
// activity (nothing is recorded as reported) and a runtime that is not
// running is never contacted; a clock that cannot be read makes the
// runtime busy for the pass (fail closed).
func (e *Engine) readIdleClocks(ctx context.Context, seen []*Seen) {
	var batch []backend.Runtime
	var from []*Seen
	for _, s := range seen {
		if s.clocked || s.Light {
			continue
		}
		s.clocked = true
		if s.Runtime.AgentServer == nil && s.Record.AgentServerURL != "" {
			s.Runtime.AgentServer = &backend.AgentServer{URL: s.Record.AgentServerURL}
		}
		if s.Runtime.AgentServer == nil || s.Runtime.State != backend.StateRunning {
			continue
		}
		batch = append(batch, *s.Runtime)
		from = append(from, s)
	}
	if len(batch) == 0 {
		return
	}
	if err := e.opts.IdleClock.Refine(ctx, batch); err != nil {
		e.log.Warn("agent-server idle clocks", "err", err)
	}
	for i, s := range from {
		s.Runtime.LastActivity, s.Runtime.Busy = batch[i].LastActivity, batch[i].Busy
	}
}

// list lists every source (those of opts.Only when set), bounded in
// parallel, each within its ListTimeout.
func (e *Engine) list(ctx context.Context, opts ObserveOptions) []listing {
	results := make([]listing, len(e.opts.Sources))
	var wg sync.WaitGroup
	sem := make(chan struct{}, e.opts.Concurrency)
	for i := range e.opts.Sources {
		src := &e.opts.Sources[i]
		var ids []string
		for _, k := range opts.Only {
			if k.Source == src.Name {
				ids = append(ids, k.ID)
			}
		}
		if len(opts.Only) > 0 && len(ids) == 0 {
			results[i].skipped = true
			continue
		}
		term, ok := e.termOf(src)
		if !ok {
			// The leader's to list: not listed is not missing.
			results[i].skipped = true
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			// Rule "no stalled source starves the others": a listing
			// still running after SlowListing gives up its slot (it
			// waits on a provider, not on this host's disks) and goes
			// on, bounded by its ListTimeout.
			var once sync.Once
			release := func() { once.Do(func() { <-sem }) }
			defer release()
			slow := time.AfterFunc(e.opts.SlowListing, release)
			defer slow.Stop()
			light := opts.Light && len(ids) == 0 && !src.Settings.NeedsActivity()
			start := time.Now()
			rts, err := listWithin(ctx, src, backend.ListOptions{IDs: ids, Light: light})
			results[i] = listing{runtimes: rts, light: light, err: err, took: time.Since(start), term: term}
		})
	}
	wg.Wait()
	return results
}

// listTimeout is a listing cut short by its source's list_timeout.
type listTimeout struct {
	d   time.Duration
	err error
}

func (t *listTimeout) Error() string {
	return fmt.Sprintf("no complete answer within list_timeout %s (%v)", t.d, t.err)
}

func (t *listTimeout) Unwrap() error { return t.err }

// listingProblems turns a listing's error into the pass's problems and
// tells whether its runtimes may be used. A backend's Warnings are
// reported and the runtimes used; an EmptyListing is kept, to be reported
// only if the ledger knows runtimes of the source (attachLedger).
func (e *Engine) listingProblems(w *World, src *Source, r listing, empty map[string]string) bool {
	if r.err == nil {
		return true
	}
	problem := func(code plan.ProblemCode, msg string) {
		w.Problems = append(w.Problems, plan.Problem{Code: code, Source: src.Name, Label: src.Label, Message: msg})
	}
	var warnings backend.Warnings
	var nothing backend.EmptyListing
	var timeout *listTimeout
	switch {
	case errors.As(r.err, &warnings):
		for _, msg := range warnings {
			problem(plan.SourceWarning, msg)
		}
		return true
	case errors.As(r.err, &nothing) && len(r.runtimes) == 0:
		empty[src.Name] = string(nothing)
		return true
	case errors.As(r.err, &timeout):
		problem(plan.SourceTimeout, timeout.Error())
	default:
		problem(plan.SourceUnreadable, r.err.Error())
	}
	return false
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

// ledgerView is what a pass reads of the ledger: the state of every
// runtime, and in full only the records that carry a decision (pin, lease,
// retention, schedule, archive, owners): most runtimes have none, and
// reading 100,000 full records was a quarter of a pass.
type ledgerView struct {
	activity map[ledger.Key]time.Time
	held     map[ledger.Key]string
	states   map[ledger.Key]string
	records  map[ledger.Key]ledger.RuntimeRecord
}

func (e *Engine) readLedger(ctx context.Context, now time.Time) (*ledgerView, error) {
	st := e.opts.Ledger
	v := &ledgerView{held: map[ledger.Key]string{}, records: map[ledger.Key]ledger.RuntimeRecord{}}
	if sr, ok := st.(ledger.ScopedReader); ok && e.opts.Lead != nil {
		return e.readScoped(ctx, sr, v, now)
	}
	var err error
	if v.activity, err = st.ActivityTimes(ctx); err != nil {
		return nil, fmt.Errorf("observe: read activity: %w", err)
	}
	holds, err := st.ListHolds(ctx, ledger.HoldFilter{Now: now})
	if err != nil {
		return nil, fmt.Errorf("observe: read holds: %w", err)
	}
	for _, h := range holds {
		v.held[h.Key] = h.Holder
	}
	if v.states, err = st.RuntimeStates(ctx); err != nil {
		return nil, fmt.Errorf("observe: read runtimes: %w", err)
	}
	if err := readDecided(ctx, st, "", v.records); err != nil {
		return nil, err
	}
	return v, nil
}

// readDecided reads the decided runtime records of one source ("" every
// source) into records, in pages of 10,000.
func readDecided(ctx context.Context, st ledger.Store, source string, records map[ledger.Key]ledger.RuntimeRecord) error {
	var after ledger.Key
	for {
		page, err := st.ListRuntimes(ctx, ledger.RuntimeFilter{Source: source, After: after, Limit: 10000, Decided: true})
		if err != nil {
			return fmt.Errorf("observe: read runtimes: %w", err)
		}
		for _, r := range page {
			records[r.Key] = r
		}
		if len(page) < 10000 {
			return nil
		}
		after = page[len(page)-1].Key
	}
}

// recordOf returns the record of k: whole when it carries a decision, else
// its key and state (SizeBytes -1: unknown); whether the ledger has it;
// and whether the record is whole.
func (v *ledgerView) recordOf(k backend.Key) (ledger.RuntimeRecord, bool, bool) {
	if r, ok := v.records[k]; ok {
		return r, true, true
	}
	state, ok := v.states[k]
	return ledger.RuntimeRecord{Key: k, State: state, SizeBytes: -1}, ok, false
}

// attachLedger reads the ledger's records, activity and holds, and records
// what changed.
func (e *Engine) attachLedger(ctx context.Context, w *World, byKey map[backend.Key]*Seen, opts ObserveOptions, empty map[string]string) error {
	if len(opts.Only) > 0 {
		return e.attachLedgerNarrow(ctx, w)
	}
	v, err := e.readLedger(ctx, w.Now)
	if err != nil {
		return err
	}
	if opts.Record {
		adopted, err := e.adoptLegacy(ctx, w, v)
		if err != nil {
			return err
		}
		if adopted {
			if v, err = e.readLedger(ctx, w.Now); err != nil {
				return err
			}
		}
	}

	var obs []ledger.Observation
	for _, s := range w.Runtimes {
		k := s.Runtime.Key
		s.Activity = v.activity[k]
		s.HeldBy = v.held[k]
		var whole bool
		s.Record, s.HasRecord, whole = v.recordOf(k)
		switch {
		case !s.HasRecord:
			obs = append(obs, observation(*s.Runtime, w.Now))
		case whole && changed(s), !whole && s.Record.State != string(s.Runtime.State):
			obs = append(obs, observation(*s.Runtime, w.Now))
		}
	}
	// Sources listed: what the ledger knew of them and they no longer list
	// is missing. A source that lists nothing at all while the ledger knew
	// runtimes of it as present may have gone blind (a selector that
	// matches nothing, a root unmounted): that pass says so, loudly.
	listed := map[string]bool{}
	configured := map[string]bool{}
	for _, l := range w.Sources {
		listed[l.Source.Name] = l.OK
	}
	backends := map[string]bool{}
	for _, src := range e.opts.Sources {
		configured[src.Name] = true
		backends[src.Backend.Name()] = true
	}
	vanished := map[string][]ledger.RuntimeRecord{} // source that listed nothing → its records marked missing
	for k := range v.states {
		if _, ok := byKey[k]; ok {
			continue
		}
		// Records of sources this run does not have (another
		// configuration's, an ad-hoc --repo run's) are not its business;
		// legacy records of its backends are shown until adopted.
		if !configured[k.Source] && !(k.Source == "" && backends[k.Backend]) {
			continue
		}
		r, _, _ := v.recordOf(k)
		if backend.State(r.State).Present() && listed[k.Source] {
			// It was there and is not any more, and nobody told us.
			obs = append(obs, ledger.Observation{Key: r.Key, State: string(backend.StateMissing), At: w.Now})
			r.State = string(backend.StateMissing)
			if sourceListedNothing(w, k.Source) {
				vanished[k.Source] = append(vanished[k.Source], r)
			}
		}
		w.Gone = append(w.Gone, r)
	}
	for _, name := range slices.Sorted(maps.Keys(vanished)) {
		recs := vanished[name]
		src, _ := e.Source(name)
		why := empty[name]
		if why == "" {
			why = "listed no runtime"
		}
		slices.SortFunc(recs, func(a, b ledger.RuntimeRecord) int { return a.Key.Compare(b.Key) })
		w.Problems = append(w.Problems, plan.Problem{Code: plan.SourceEmpty, Source: name, Label: src.Label,
			Message: fmt.Sprintf("%s, while the ledger knew %d of its runtimes as present (%s): they are marked missing",
				why, len(recs), sampleKeys(recs))})
	}
	slices.SortFunc(w.Gone, func(a, b ledger.RuntimeRecord) int { return a.Key.Compare(b.Key) })
	// A source that sweeps orphans needs when each runtime was first seen,
	// which the light read leaves out: read those records whole (orphans
	// are few; registered runtimes were read whole already).
	for _, s := range w.Runtimes {
		if s.HasRecord && (s.Source.Settings.RegisteredOnly || s.Runtime.Orphan != "") {
			if _, whole := v.records[s.Runtime.Key]; !whole {
				r, err := e.opts.Ledger.Runtime(ctx, s.Runtime.Key)
				if err != nil {
					return fmt.Errorf("observe: read runtime %s: %w", s.Runtime.Key, err)
				}
				r.State = s.Record.State
				s.Record = r
			}
		}
	}
	if opts.Record && len(obs) > 0 {
		if err := e.recordObservations(ctx, w, obs); err != nil {
			return err
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

// recordObservations writes what a pass saw: the observations of this
// replica's own sources directly, those of the shared sources under the
// fence of the term they were listed under (one transaction per term,
// normally one), so that a leader whose term ended records nothing of
// them (no remote runtime marked missing or changed by a listing the new
// leader did not make). A term's write refused drops its sources from w,
// as if they had not been listed; any other failure fails the pass.
func (e *Engine) recordObservations(ctx context.Context, w *World, obs []ledger.Observation) error {
	var local []ledger.Observation
	shared := map[*leader.Term][]ledger.Observation{}
	for _, o := range obs {
		if t := w.terms[o.Key.Source]; t != nil {
			shared[t] = append(shared[t], o)
		} else {
			local = append(local, o)
		}
	}
	if len(local) > 0 {
		if err := e.opts.Ledger.Observe(ctx, local); err != nil {
			return fmt.Errorf("observe: record runtimes: %w", err)
		}
	}
	for t, batch := range shared {
		err := e.write(ctx, t, func(ctx context.Context, st ledger.Store) error { return st.Observe(ctx, batch) })
		switch {
		case Refused(err):
			e.log.Warn("observe: the listing of the remote sources was not recorded: this replica no longer leads",
				"generation", t.Fence().Generation, "err", err)
			e.dropTerm(w, t)
		case err != nil:
			return fmt.Errorf("observe: record runtimes: %w", err)
		}
	}
	return nil
}

// dropTerm takes the sources listed under t out of w: what was seen of
// them is the next leader's to see again, and nothing of it may be
// planned on.
func (e *Engine) dropTerm(w *World, t *leader.Term) {
	gone := map[string]bool{}
	for name, lt := range w.terms {
		if lt == t {
			gone[name] = true
			delete(w.terms, name)
		}
	}
	w.Runtimes = slices.DeleteFunc(w.Runtimes, func(s *Seen) bool { return gone[s.Source.Name] })
	w.Gone = slices.DeleteFunc(w.Gone, func(r ledger.RuntimeRecord) bool { return gone[r.Key.Source] })
	w.Sources = slices.DeleteFunc(w.Sources, func(l Listed) bool { return gone[l.Source.Name] })
	w.Problems = slices.DeleteFunc(w.Problems, func(p plan.Problem) bool { return gone[p.Source] })
}

func sourceListedNothing(w *World, name string) bool {
	for _, l := range w.Sources {
		if l.Source.Name == name {
			return l.OK && l.Runtimes == 0
		}
	}
	return false
}

// sampleKeys names up to three records, for a message.
func sampleKeys(recs []ledger.RuntimeRecord) string {
	var names []string
	for i, r := range recs {
		if i == 3 {
			names = append(names, "...")
			break
		}
		names = append(names, r.Key.String())
	}
	return strings.Join(names, ", ")
}

// adoptLegacy gives each legacy record (a key without a source, from a
// ledger of schema 1) to the one source that lists its runtime; one listed
// by two sources is given to neither, and reported. It tells whether any
// record moved.
func (e *Engine) adoptLegacy(ctx context.Context, w *World, v *ledgerView) (bool, error) {
	adopter, ok := e.opts.Ledger.(ledger.Adopter)
	if !ok {
		return false, nil
	}
	claims := map[backend.Key][]backend.Key{} // legacy key → claimants
	for _, s := range w.Runtimes {
		k := s.Runtime.Key
		legacy := backend.Key{Backend: k.Backend, ID: k.ID}
		if _, has := v.states[legacy]; !has {
			continue
		}
		if _, own := v.states[k]; own {
			continue
		}
		claims[legacy] = append(claims[legacy], k)
	}
	if len(claims) == 0 {
		return false, nil
	}
	var keys []backend.Key
	for _, legacy := range slices.SortedFunc(maps.Keys(claims), backend.Key.Compare) {
		ks := claims[legacy]
		if len(ks) == 1 {
			keys = append(keys, ks[0])
			continue
		}
		var labels []string
		for _, k := range ks {
			if src, ok := e.Source(k.Source); ok {
				labels = append(labels, src.Label)
			}
		}
		msg := fmt.Sprintf("its ledger record (from before runtimes were keyed by source) is claimed by %s; "+
			"its pin, lease and holds apply to neither until set again on the one meant", strings.Join(labels, " and "))
		// A pin or lease that cannot be placed protects every claimant
		// rather than none: nothing is removed on a guess.
		if rec, err := e.opts.Ledger.Runtime(ctx, legacy); err == nil && (rec.Pinned || rec.LeaseUntil.After(w.Now)) {
			msg = fmt.Sprintf("its ledger record (from before runtimes were keyed by source) is pinned or leased and claimed by %s; "+
				"both stay protected until it is pinned or leased again on the one meant (reclaimer pin SOURCE/ID)", strings.Join(labels, " and "))
			for _, s := range w.Runtimes {
				if slices.Contains(ks, s.Runtime.Key) && s.Runtime.Pinned == "" {
					s.Runtime.Pinned = "an older ledger's pin or lease, claimed by two sources"
				}
			}
		}
		w.Problems = append(w.Problems, plan.Problem{Code: plan.LegacyAmbiguous, Backend: legacy.Backend, Runtime: legacy.ID, Message: msg})
	}
	if len(keys) == 0 {
		return false, nil
	}
	// A shared source's claims move records of remote runtimes: under the
	// fence of the term it was listed under, as every other write of them.
	var local []backend.Key
	shared := map[*leader.Term][]backend.Key{}
	for _, k := range keys {
		if t := w.terms[k.Source]; t != nil {
			shared[t] = append(shared[t], k)
		} else {
			local = append(local, k)
		}
	}
	n := 0
	if len(local) > 0 {
		var err error
		if n, err = adopter.AdoptLegacy(ctx, local); err != nil {
			return false, fmt.Errorf("observe: %w", err)
		}
	}
	for t, ks := range shared {
		m := 0
		err := e.write(ctx, t, func(ctx context.Context, st ledger.Store) error {
			a, ok := st.(ledger.Adopter)
			if !ok {
				return nil
			}
			var err error
			m, err = a.AdoptLegacy(ctx, ks)
			return err
		})
		switch {
		case err == nil:
			n += m
		case Refused(err):
			// Left for the next leader (and this term's listing is not
			// recorded either: recordObservations drops it).
		case err != nil:
			return false, fmt.Errorf("observe: %w", err)
		}
	}
	if n > 0 {
		e.log.Info("gave ledger records of an older version to their sources", "records", n)
	}
	return n > 0, nil
}

func changed(s *Seen) bool {
	r, rt := s.Record, *s.Runtime
	return r.State != string(rt.State) || r.Path != rt.Path || r.Home != rt.Home || !slices.Equal(r.Workspaces, rt.Workspaces) ||
		!maps.Equal(r.Labels, rt.Labels)
}

func observation(rt backend.Runtime, now time.Time) ledger.Observation {
	return ledger.Observation{Key: rt.Key, State: string(rt.State), Path: rt.Path, Home: rt.Home,
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
	w.Usage = map[string]diskusage.Usage{}
	usageOf := map[string]measured{} // once per managed root
	// fsOf measures the filesystem of path (once) and returns its budget id.
	fsOf := func(path string, set policy.Settings) (string, bool) {
		m, ok := usageOf[path]
		if !ok {
			m.u, m.err = e.opts.Usage(path)
			usageOf[path] = m
			if m.err != nil {
				w.Problems = append(w.Problems, plan.Problem{Code: plan.Unmeasured, Path: path, Message: "measure disk usage: " + m.err.Error()})
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
			w.Usage[id] = u
		}
		return id, true
	}
	for _, s := range w.Runtimes {
		rt := s.Runtime
		// A runtime's files are on its root's filesystem; one with no
		// managed folder (a container with no host mounts) lives on its
		// storage's (Docker's data root), which is measured in any case.
		path := rt.Root
		if path == "" {
			path = rt.Storage
		}
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
	for _, s := range w.Runtimes {
		if err := e.attachRecord(ctx, s, w.Now); err != nil {
			return err
		}
	}
	return nil
}

// attachRecord reads one runtime's record, activity and holds.
func (e *Engine) attachRecord(ctx context.Context, s *Seen, now time.Time) error {
	st := e.opts.Ledger
	k := s.Runtime.Key
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
	holds, err := st.ListHolds(ctx, ledger.HoldFilter{Key: k, Now: now})
	if err != nil {
		return fmt.Errorf("observe %s: %w", k, err)
	}
	if len(holds) > 0 {
		s.HeldBy = holds[0].Holder
	}
	return nil
}

// ObserveFully replaces lightly observed runtimes of seen with full
// observations (activity, fingerprint, unsaved work), asking each backend
// for just those runtimes. A source whose narrowed read fails (a 503 on
// GET /runtimes/r1) is that source's problem, not the pass's: its
// runtimes that could not be re-read are reported (source_partial) and
// marked busy for this pass, so nothing acts on what was not read, and
// every other runtime goes on; a read that takes longer than the source's
// list_timeout is such a failure. It fails only when ctx ends.
func (e *Engine) ObserveFully(ctx context.Context, w *World, seen []*Seen) error {
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
		rts, err := listWithin(ctx, src, backend.ListOptions{IDs: ids})
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		var warnings backend.Warnings
		if err != nil && !errors.As(err, &warnings) {
			w.Problems = append(w.Problems, plan.Problem{Code: plan.SourcePartial, Source: src.Name, Label: src.Label,
				Message: fmt.Sprintf("re-reading %d of its runtimes (%s) failed: %v; they are left alone in this pass",
					len(list), sampleIDs(ids), err)})
			for _, s := range list {
				rt := *s.Runtime
				rt.Busy = Unread + err.Error()
				s.Runtime = &rt
			}
			continue
		}
		got := map[string]backend.Runtime{}
		for _, rt := range rts {
			rt.Key.Source = src.Name
			if unusable(&rt) != "" {
				continue
			}
			got[rt.ID] = rt
		}
		for _, s := range list {
			if rt, ok := got[s.Runtime.ID]; ok {
				s.clock = clampTimes(w, src, &rt)
				rt.Busy = s.Runtime.Busy
				if rt.Pinned == "" {
					rt.Pinned = s.Runtime.Pinned
				}
				if rt.Native == nil {
					rt.Native = s.Runtime.Native
				}
				s.Runtime, s.Light, s.clocked = &rt, false, false
				e.floorCreation(ctx, s, w.Now)
			}
		}
	}
	e.readIdleClocks(ctx, seen)
	return nil
}

// listWithin lists src within its ListTimeout (a listing, and the
// narrowed re-read of ObserveFully): a provider that stops answering
// costs the pass that source's runtimes, not the rest of the pass.
func listWithin(ctx context.Context, src *Source, opts backend.ListOptions) ([]backend.Runtime, error) {
	l, _ := backend.As[backend.Lister](src.Backend)
	if src.ListTimeout <= 0 {
		return l.List(ctx, opts)
	}
	lctx, cancel := context.WithTimeout(ctx, src.ListTimeout)
	defer cancel()
	rts, err := l.List(lctx, opts)
	if err != nil && ctx.Err() == nil && (errors.Is(lctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)) {
		err = &listTimeout{d: src.ListTimeout, err: err}
	}
	return rts, err
}

// clamped says which provider times clampTimes replaced.
type clamped uint8

const (
	clampedActivity clamped = 1 << iota
	clampedCreation
)

// floorCreation gives a runtime whose provider said it was created in the
// future the time reclaimer first saw it instead: it existed since then at
// least, and max_lifetime counts from there (clamping to now on every pass
// would exempt it from the cap forever). The few such records are read
// whole (a pass reads most records without their first sighting).
func (e *Engine) floorCreation(ctx context.Context, s *Seen, now time.Time) {
	if s.clock&clampedCreation == 0 || !s.HasRecord {
		return
	}
	first := s.Record.FirstSeen
	if first.IsZero() {
		if r, err := e.opts.Ledger.Runtime(ctx, s.Runtime.Key); err == nil {
			first = r.FirstSeen
		}
	}
	if !first.IsZero() && first.Before(now) {
		s.Runtime.CreatedAt = first
	}
}

// Unread starts the Busy of a runtime whose narrowed re-read failed:
// what cannot be read counts as busy, and Plan drops its actions.
const Unread = "could not be re-read from its provider: "

func sampleIDs(ids []string) string {
	if len(ids) > 3 {
		return strings.Join(ids[:3], ", ") + ", ..."
	}
	return strings.Join(ids, ", ")
}

// unusable says why a listed item cannot be a runtime ("" when it can):
// its key is invalid (no id, a NUL byte), or its id is not one path
// segment ("." or ".."), which no provider request may carry.
func unusable(rt *backend.Runtime) string {
	if err := rt.Key.Validate(); err != nil {
		return err.Error()
	}
	if rt.ID == "." || rt.ID == ".." {
		return fmt.Sprintf("id %q is not a usable runtime id", rt.ID)
	}
	return ""
}

// ClockSlack is how far ahead of ours a provider's clock may be before a
// time it reports is taken as wrong: clocks a little apart are normal.
const ClockSlack = 5 * time.Minute

// clampTimes enforces the rule "a provider's clock is not ours" (rules for
// remote providers): an activity or creation time in the future would
// exempt a runtime from idle suspend and the lifetime cap (a last activity
// in 2100), so it is clamped to now; an activity before the creation is
// raised to the creation. Either is reported (provider_clock), so the plan
// says that this runtime's activity came from a clock that disagrees with
// ours.
func clampTimes(w *World, src *Source, rt *backend.Runtime) clamped {
	if _, remote := backend.As[backend.RemoteClock](src.Backend); !remote {
		return 0 // this host's own clock
	}
	var c clamped
	var said []string
	limit := w.Now.Add(ClockSlack)
	if rt.LastActivity.After(limit) {
		said = append(said, fmt.Sprintf("last activity %s is in the future", rt.LastActivity.UTC().Format(time.RFC3339)))
		rt.LastActivity, c = w.Now, c|clampedActivity
	}
	if rt.CreatedAt.After(limit) {
		said = append(said, fmt.Sprintf("creation %s is in the future", rt.CreatedAt.UTC().Format(time.RFC3339)))
		rt.CreatedAt, c = w.Now, c|clampedCreation
	}
	if !rt.LastActivity.IsZero() && !rt.CreatedAt.IsZero() && rt.LastActivity.Before(rt.CreatedAt.Add(-ClockSlack)) {
		said = append(said, fmt.Sprintf("last activity %s is before its creation %s",
			rt.LastActivity.UTC().Format(time.RFC3339), rt.CreatedAt.UTC().Format(time.RFC3339)))
		rt.LastActivity = rt.CreatedAt
	}
	if len(said) == 0 {
		return c
	}
	taken := "; its activity taken as " + rt.LastActivity.UTC().Format(time.RFC3339)
	if c&clampedCreation != 0 {
		taken += ", its creation as when reclaimer first saw it"
	}
	w.Problems = append(w.Problems, plan.Problem{Code: plan.ProviderClock, Source: src.Name, Label: src.Label,
		Backend: rt.Backend, Runtime: rt.ID, Message: "the provider's clock disagrees with ours: " + strings.Join(said, "; ") +
			" (as of " + w.Now.UTC().Format(time.RFC3339) + ")" + taken})
	return c
}
