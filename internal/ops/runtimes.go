package ops

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/views"
)

// RuntimeQuery selects runtimes to list.
type RuntimeQuery struct {
	Backend, Source, State string
	// Cursor continues a listing (NextCursor of the previous page); Limit
	// bounds a page (0: every runtime).
	Cursor string
	Limit  int
	// Observe lists the sources again now, fully (unsaved work, activity),
	// instead of showing what the last pass saw: what `reclaimer ls` does.
	Observe bool
	// Sizes measures each local runtime on disk (a walk each).
	Sizes bool
	// Search keeps the runtimes whose ID, backend, source, path, home,
	// workspace, label, owner or pin reason contains it (case-insensitive).
	Search string
	// Scheduled keeps the runtimes with an archive or delete announced.
	Scheduled bool
	// Sort orders the page by "size" (largest first; measures every
	// runtime matched), "activity" (most recent first) or "due" (soonest
	// first; nothing due last) instead of key order; Desc reverses it. A
	// sorted listing is one page (Limit runtimes at most): it has no
	// cursor.
	Sort string
	Desc bool
}

// The orders a listing can be sorted in (RuntimeQuery.Sort).
var RuntimeSorts = []string{"size", "activity", "due"}

// Runtimes lists the runtimes of the configured sources that the ledger
// knows, in key order: what their backends last showed, with the ledger's
// decisions, holds and schedules. Records of sources this configuration
// does not have (another's, an ad-hoc run's) are not shown.
func (a *App) Runtimes(ctx context.Context, q RuntimeQuery) (*views.RuntimeList, error) {
	if q.Limit < 0 || q.Limit > 10000 {
		return nil, Input("limit", "limit %d: between 1 and 10000", q.Limit)
	}
	if q.Sort != "" {
		if !slices.Contains(RuntimeSorts, q.Sort) {
			return nil, Input("sort", "sort %q: one of %s", q.Sort, strings.Join(RuntimeSorts, ", "))
		}
		if q.Cursor != "" {
			return nil, Input("cursor", "a sorted listing is one page: it takes no cursor")
		}
	}
	if q.Desc && q.Sort == "" {
		return nil, Input("desc", "desc reverses a sort: give sort too")
	}
	w, err := a.worldFor(ctx, q.Observe)
	if err != nil {
		return nil, err
	}
	f := ledger.RuntimeFilter{Backend: q.Backend, Source: q.Source, State: q.State}
	if q.Cursor != "" {
		if f.After, err = decodeCursor(q.Cursor); err != nil {
			return nil, err
		}
	}
	s := a.setupNow()
	shown := func(k backend.Key) bool {
		if s.cfg.Fleet() {
			return true // every replica's runtimes, wherever asked
		}
		if _, ok := s.sourceOf(k.Source); ok {
			return true
		}
		return k.Source == "" && slices.ContainsFunc(s.sources, func(src engine.Source) bool { return src.Backend.Name() == k.Backend })
	}
	d, err := a.decorations(ctx)
	if err != nil {
		return nil, err
	}
	out := &views.RuntimeList{Runtimes: []views.Runtime{}, Problems: w.Problems}
	if out.Problems == nil {
		out.Problems = []plan.Problem{}
	}
	if len(s.sources) == 0 {
		out.Problems = append(out.Problems, noSources())
	}
	// A sorted listing takes every runtime matched, then orders and cuts.
	limit := q.Limit
	if q.Sort != "" {
		limit = 0
	}
	search := strings.ToLower(q.Search)
	const pageSize = 1000
	for {
		f.Limit = pageSize
		page, err := a.store.ListRuntimes(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("list runtimes: %w", err)
		}
		for _, rec := range page {
			if !shown(rec.Key) {
				continue
			}
			if q.Scheduled && rec.ScheduledStep == "" {
				continue
			}
			v := a.runtimeView(rec, w.Find(rec.Key), d)
			if search != "" && !matches(&v, search) {
				continue
			}
			if limit > 0 && len(out.Runtimes) == limit {
				out.NextCursor = encodeCursor(out.Runtimes[len(out.Runtimes)-1])
				break
			}
			out.Runtimes = append(out.Runtimes, v)
		}
		if out.NextCursor != "" || len(page) < pageSize {
			break
		}
		f.After = page[len(page)-1].Key
	}
	if q.Sizes || q.Sort == "size" {
		a.measure(ctx, w, out.Runtimes)
	}
	if q.Sort != "" {
		sortRuntimes(out.Runtimes, q.Sort, q.Desc)
		if q.Limit > 0 && len(out.Runtimes) > q.Limit {
			out.Runtimes = out.Runtimes[:q.Limit]
		}
	}
	return out, nil
}

// matches tells whether any name of v contains search (lower case).
func matches(v *views.Runtime, search string) bool {
	has := func(s string) bool { return strings.Contains(strings.ToLower(s), search) }
	if has(v.ID) || has(v.Backend) || has(v.Source) || has(v.SourceLabel) || has(v.Path) || has(v.Home) ||
		has(v.PinReason) || has(v.State) {
		return true
	}
	for _, s := range slices.Concat(v.Workspaces, v.Conversations) {
		if has(s) {
			return true
		}
	}
	for k, val := range v.Labels {
		if has(k) || has(val) || has(k+"="+val) {
			return true
		}
	}
	return false
}

// sortRuntimes orders list by size (largest first), activity (newest
// first) or due time (soonest first, nothing due last), then by key; desc
// reverses the order.
func sortRuntimes(list []views.Runtime, by string, desc bool) {
	byKey := func(a, b *views.Runtime) int {
		return cmp.Or(cmp.Compare(a.Backend, b.Backend), cmp.Compare(a.Source, b.Source), cmp.Compare(a.ID, b.ID))
	}
	order := func(a, b *views.Runtime) int {
		switch by {
		case "size":
			return cmp.Compare(b.SizeBytes, a.SizeBytes)
		case "activity":
			return b.LastActivity.Compare(a.LastActivity)
		case "due":
			if a.ScheduledDue.IsZero() || b.ScheduledDue.IsZero() {
				return cmp.Compare(boolInt(a.ScheduledDue.IsZero()), boolInt(b.ScheduledDue.IsZero()))
			}
			return a.ScheduledDue.Compare(b.ScheduledDue)
		}
		return 0
	}
	slices.SortStableFunc(list, func(a, b views.Runtime) int {
		c := cmp.Or(order(&a, &b), byKey(&a, &b))
		if desc {
			return -c
		}
		return c
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Runtime is one runtime.
func (a *App) Runtime(ctx context.Context, ref Ref) (*views.Runtime, error) {
	observed := false
	r, err := a.resolve(ctx, ref, &observed)
	if err != nil {
		return nil, err
	}
	return a.runtimeOf(ctx, r.key)
}

// runtimeOf is the view of one runtime from its record and the newest
// observation.
func (a *App) runtimeOf(ctx context.Context, k backend.Key) (*views.Runtime, error) {
	rec, err := a.store.Runtime(ctx, k)
	if err != nil {
		return nil, err
	}
	d, err := a.decorationsOf(ctx, k)
	if err != nil {
		return nil, err
	}
	w, _ := a.LastWorld()
	var s *engine.Seen
	if w != nil {
		s = w.Find(k)
	}
	v := a.runtimeView(rec, s, d)
	return &v, nil
}

// worldFor is what a listing shows: a fresh full observation when asked
// (the CLI), else the newest a pass made, else a fresh light one.
func (a *App) worldFor(ctx context.Context, observe bool) (*engine.World, error) {
	if !observe {
		if w, _ := a.LastWorld(); w != nil {
			return w, nil
		}
	}
	w, err := a.setupNow().engine.Observe(ctx, engine.ObserveOptions{Record: true, Light: !observe})
	if err != nil {
		return nil, err
	}
	a.keys.refresh(w)
	a.stateMu.Lock()
	a.world, a.worldAt = w, a.now()
	a.stateMu.Unlock()
	return w, nil
}

// decoration is what the ledger knows of runtimes besides their records:
// reported activity, holds in force, archive locations.
type decoration struct {
	now      time.Time
	activity map[ledger.Key]time.Time
	holds    map[ledger.Key]ledger.Hold // the one lasting longest
	archives func(id string) string
}

func (a *App) decorations(ctx context.Context) (*decoration, error) {
	now := a.now()
	act, err := a.store.ActivityTimes(ctx)
	if err != nil {
		return nil, fmt.Errorf("read activity: %w", err)
	}
	hs, err := a.store.ListHolds(ctx, ledger.HoldFilter{Now: now})
	if err != nil {
		return nil, fmt.Errorf("read holds: %w", err)
	}
	return a.decorate(ctx, now, act, hs), nil
}

func (a *App) decorationsOf(ctx context.Context, k backend.Key) (*decoration, error) {
	now := a.now()
	act := map[ledger.Key]time.Time{}
	if at, err := a.store.LastActivity(ctx, k); err == nil {
		act[k] = at
	}
	hs, err := a.store.ListHolds(ctx, ledger.HoldFilter{Key: k, Now: now})
	if err != nil {
		return nil, fmt.Errorf("read holds: %w", err)
	}
	return a.decorate(ctx, now, act, hs), nil
}

func (a *App) decorate(ctx context.Context, now time.Time, act map[ledger.Key]time.Time, hs []ledger.Hold) *decoration {
	d := &decoration{now: now, activity: act, holds: map[ledger.Key]ledger.Hold{}}
	for _, h := range hs {
		if h.ExpiresAt.After(d.holds[h.Key].ExpiresAt) {
			d.holds[h.Key] = h
		}
	}
	d.archives = func(id string) string {
		if ar, err := a.store.Archive(ctx, id); err == nil {
			return ar.Location
		}
		return ""
	}
	return d
}

// runtimeView is the one picture of a runtime: the ledger's record, with
// what the observation s saw of it (nil when it did not list it).
func (a *App) runtimeView(rec ledger.RuntimeRecord, s *engine.Seen, d *decoration) views.Runtime {
	// The state is the ledger's: passes record what they saw, and apply
	// marks what it did (an observation made before an apply is older).
	k := rec.Key
	v := views.Runtime{ID: k.ID, Backend: k.Backend, Source: k.Source, State: rec.State, Path: rec.Path, Home: rec.Home,
		Workspaces: rec.Workspaces, Labels: rec.Labels, FirstSeen: rec.FirstSeen, SizeBytes: -1,
		Pinned: rec.Pinned, PinReason: rec.PinReason, LeaseUntil: rec.LeaseUntil,
		ScheduledStep: rec.ScheduledStep, ScheduledDue: rec.ScheduledDue, ScheduledAt: rec.ScheduledAt,
		ArchiveID: rec.ArchiveID, Conversations: rec.Conversations, CanResume: backend.State(rec.State).Present()}
	if !rec.LeaseUntil.After(d.now) {
		v.LeaseUntil = time.Time{}
	}
	settings := policy.Settings{}
	if src, ok := a.setupNow().sourceOf(k.Source); ok {
		v.SourceLabel, settings = src.Label, src.Settings
		v.IdleSuspend = IdleSuspendText(src.Backend, settings)
	}
	if h, ok := d.holds[k]; ok {
		v.HeldBy, v.HeldUntil = h.Holder, h.ExpiresAt
	}
	if rec.ArchiveID != "" {
		v.ArchiveLocation = d.archives(rec.ArchiveID)
	}
	reported := d.activity[k]
	if s != nil {
		rt := s.Runtime
		if backend.State(rec.State).Present() {
			v.Path, v.Home, v.Workspaces, v.Labels = rt.Path, rt.Home, rt.Workspaces, rt.Labels
			v.CreatedAt, v.Busy, v.Unsaved = rt.CreatedAt, rt.Busy, rt.Unsaved
			v.Merged, v.Orphan = rt.Merged, rt.Orphan
		}
		if rt.Pinned != "" && !v.Pinned {
			v.Pinned, v.PinReason = true, rt.Pinned
		}
		if s.Activity.After(reported) {
			reported = s.Activity
		}
		v.LastActivity, v.LastActivityFrom = rt.LastActivity, "observed"
		if rt.LastActivity.IsZero() {
			v.LastActivityFrom = ""
		}
		if rt.StorageBytes > 0 && rt.Path == "" && rt.Root == "" {
			v.SizeBytes = rt.StorageBytes
		}
	}
	if reported.After(v.LastActivity) {
		v.LastActivity, v.LastActivityFrom = reported, "reported"
	}
	ret := settings.Retention
	if rec.RetentionOverride != nil {
		ret, v.RetentionSet = *rec.RetentionOverride, true
	}
	v.Retention = DurationText(ret)
	if backend.State(v.State).Present() {
		c := policy.Candidate{Runtime: &backend.Runtime{Key: k, State: backend.State(v.State), Busy: v.Busy},
			Record: policy.Record{Pinned: v.Pinned, PinReason: v.PinReason, LeaseUntil: v.LeaseUntil, HeldBy: v.HeldBy}}
		if s != nil {
			c.Runtime.Pinned = s.Runtime.Pinned
			c.Record.Pinned, c.Record.PinReason = rec.Pinned, rec.PinReason
		}
		if why := policy.Protection(&c, d.now); !why.IsZero() {
			v.Protection = &views.Reason{Code: why.Code, Reason: why.Text}
		}
	}
	return v
}

// measure sizes the local runtimes of list on disk, a few at a time (each
// walk is parallel already).
func (a *App) measure(ctx context.Context, w *engine.World, list []views.Runtime) {
	eng := a.setupNow().engine
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range list {
		k := backend.Key{Source: list[i].Source, Backend: list[i].Backend, ID: list[i].ID}
		s := w.Find(k)
		if s == nil || (s.Runtime.Root == "" && s.Runtime.StorageBytes <= 0) {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			list[i].SizeBytes = eng.Size(ctx, *s.Runtime)
		})
	}
	wg.Wait()
}

// DurationText prints a policy duration: "14d", "12h", "90m", "off".
func DurationText(d time.Duration) string {
	switch {
	case d <= 0:
		return "off"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// encodeCursor makes a page's cursor: its last runtime's key, opaquely.
func encodeCursor(v views.Runtime) string {
	return base64.RawURLEncoding.EncodeToString([]byte(v.Backend + "\x00" + v.Source + "\x00" + v.ID))
}

func decodeCursor(s string) (ledger.Key, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	parts := strings.Split(string(raw), "\x00")
	if err != nil || len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return ledger.Key{}, Input("cursor", "cursor %q is not one this API returned", s)
	}
	return ledger.Key{Backend: parts[0], Source: parts[1], ID: parts[2]}, nil
}

// Status is the state of the host: from a dry run now, or one made within
// the last seconds (polling status is no pass each time), or, while a pass
// runs, from what the last pass saw.
func (a *App) Status(ctx context.Context) (*views.Status, error) {
	a.stateMu.Lock()
	p, at, w := a.lastDry, a.dryAt, a.world
	fresh := p != nil && a.now().Sub(at) < statusReuse
	a.stateMu.Unlock()
	if !fresh {
		np, _, err := a.Pass(ctx, PassRequest{Trigger: "status", DryRun: true, Wait: 50 * time.Millisecond})
		switch {
		case err == nil:
			p = np
			w, _ = a.LastWorld()
		case p == nil && w == nil:
			return nil, err
		default:
			// A pass is running: report what was last seen.
		}
	}
	st := &views.Status{Filesystems: []views.Filesystem{}, Sources: []views.SourceStatus{},
		RuntimesByState: map[string]int{}, RuntimesByBackend: map[string]int{}, ReclaimableBytesByStep: map[string]int64{},
		Scheduled: []plan.Notice{}, Problems: []plan.Problem{}}
	if p != nil {
		st.Problems = append(st.Problems, p.Problems...)
	}
	if w != nil {
		fillStatus(st, w, p)
		a.forecasts(ctx, st)
	}
	a.stateMu.Lock()
	st.LastPass, st.NextPassAt = a.lastPass, a.nextPass
	a.stateMu.Unlock()
	if j, err := a.store.ListJournal(ctx, ledger.JournalFilter{Limit: 1}); err == nil && len(j) > 0 {
		e := journalView(j[0])
		st.LastAction = &e
	}
	f, err := a.Fleet(ctx)
	if err != nil {
		return nil, fmt.Errorf("status of the fleet: %w", err)
	}
	st.Fleet = f
	return st, nil
}

// fillStatus counts what w saw and what p would free.
func fillStatus(st *views.Status, w *engine.World, p *plan.Plan) {
	st.ObservedAt = w.Now
	byFS := map[string]*views.Filesystem{}
	for _, fs := range w.Filesystems {
		u := w.Usage[fs.ID]
		st.Filesystems = append(st.Filesystems, views.Filesystem{Path: fs.Path, TotalBytes: int64(u.TotalBytes),
			UsedBytes: int64(fs.UsedBytes), AvailBytes: int64(fs.AvailBytes), Fraction: fs.Fraction, High: fs.High, Low: fs.Low,
			ReclaimableBytesByStep: map[string]int64{}})
	}
	for i, fs := range w.Filesystems {
		byFS[fs.ID] = &st.Filesystems[i]
	}
	for _, l := range w.Sources {
		st.Sources = append(st.Sources, views.SourceStatus{Name: l.Source.Name, Label: l.Source.Label,
			Backend: l.Source.Backend.Name(), Listed: l.OK, Runtimes: l.Runtimes})
	}
	for _, s := range w.Runtimes {
		st.RuntimesByState[string(s.Runtime.State)]++
		st.RuntimesByBackend[s.Runtime.Backend]++
		if f := byFS[s.Filesystem]; f != nil {
			f.Runtimes++
		}
		if s.HasRecord && s.Record.ScheduledStep != "" {
			k := s.Runtime.Key
			st.Scheduled = append(st.Scheduled, plan.Notice{Runtime: k.ID, Backend: k.Backend, Source: k.Source,
				Step: backend.Step(s.Record.ScheduledStep), Due: s.Record.ScheduledDue, Reason: "announced " + s.Record.ScheduledAt.Format(time.RFC3339)})
		}
	}
	for _, g := range w.Gone {
		st.RuntimesByState[g.State]++
		st.RuntimesByBackend[g.Key.Backend]++
	}
	if p == nil {
		return
	}
	for _, act := range p.Actions {
		step := string(act.Step)
		st.ReclaimableBytesByStep[step] += act.Bytes
		st.ReclaimableBytes += act.Bytes
		if f := byFS[act.Filesystem]; f != nil {
			f.ReclaimableBytesByStep[step] += act.Bytes
			f.ReclaimableBytes += act.Bytes
		}
	}
}

// IdleSuspendText says what idle reclaiming does to the runtimes of a
// source: its idle_suspend ("20m", "off") where the backend can suspend;
// an archive then a delete where it cannot and idling loses the files
// (backend.IdleLosesFiles); "not offered" where it cannot suspend at all,
// so that ls shows why an idle runtime of such a source stays as it is.
func IdleSuspendText(b backend.Backend, s policy.Settings) string {
	if _, ok := backend.As[backend.Suspender](b); ok {
		return DurationText(s.IdleSuspend)
	}
	if _, ok := backend.As[backend.IdleLosesFiles](b); ok {
		if s.IdleSuspend <= 0 {
			return DurationText(0)
		}
		return "archive then delete after " + DurationText(s.IdleSuspend)
	}
	return "not offered: " + b.Name() + " cannot suspend its runtimes"
}
