package native

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
)

// Options configure Plan and Sync.
type Options struct {
	// Sources are the configured sources; those whose backend has no
	// NativeLifecycle are left out.
	Sources []engine.Source
	Ledger  ledger.Store
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Concurrency bounds the runtimes read or written at once per source
	// (each backend's client bounds its requests too). Default 8.
	Concurrency int
	// Only, when set, syncs just these runtimes (a hold or lease just
	// taken through the API), listing them by ID.
	Only []backend.Key
}

// Setting is one native setting of one runtime.
type Setting struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	Policy   string `json:"policy"`
	// Drift is "", "stricter" or "looser".
	Drift string `json:"drift,omitempty"`
	// Action is what sync does: "set", "report only: why"; after Sync,
	// "set" or "failed: why".
	Action string `json:"action,omitempty"`
}

// Row is one runtime.
type Row struct {
	Backend  string            `json:"backend"`
	Runtime  string            `json:"runtime"`
	Source   string            `json:"source"`
	State    backend.State     `json:"state"`
	Provider backend.Lifecycle `json:"provider"`
	Policy   backend.Lifecycle `json:"policy"`
	Settings []Setting         `json:"settings"`
	// Touch: the provider's idle timer is restarted (a lease or hold).
	Touch  bool     `json:"touch,omitempty"`
	Notes  []string `json:"notes,omitempty"`
	Error  string   `json:"error,omitempty"`
	target Target
}

// Report is the outcome of Plan or Sync.
type Report struct {
	At   time.Time `json:"at"`
	Rows []Row     `json:"rows"`
	// Problems are sources that could not be listed.
	Problems []string `json:"problems,omitempty"`
	// Written counts the runtimes whose settings Sync changed or touched;
	// Failed those where it failed.
	Written int `json:"written"`
	Failed  int `json:"failed"`
	// Drifted counts the runtimes with at least one drifted setting.
	Drifted int  `json:"drifted"`
	Applied bool `json:"applied"`
}

// Plan reads every runtime's native settings and compares them with the
// policy. It writes nothing.
func Plan(ctx context.Context, opts Options) (*Report, error) { return run(ctx, opts, false) }

// Sync does what Plan shows: it writes the wanted settings where the
// provider allows it and restarts idle timers of leased or held runtimes.
// The daemon calls it on every pass, after the loop's own pass.
func Sync(ctx context.Context, opts Options) (*Report, error) { return run(ctx, opts, true) }

type facts struct {
	activity map[ledger.Key]time.Time
	until    map[ledger.Key]time.Time // lease or hold end
	pinned   map[ledger.Key]bool
}

func readLedger(ctx context.Context, st ledger.Store, now time.Time) (facts, error) {
	f := facts{until: map[ledger.Key]time.Time{}, pinned: map[ledger.Key]bool{}}
	var err error
	if f.activity, err = st.ActivityTimes(ctx); err != nil {
		return f, fmt.Errorf("read activity: %w", err)
	}
	holds, err := st.ListHolds(ctx, ledger.HoldFilter{Now: now})
	if err != nil {
		return f, fmt.Errorf("read holds: %w", err)
	}
	for _, h := range holds {
		if h.ExpiresAt.After(f.until[h.Key]) {
			f.until[h.Key] = h.ExpiresAt
		}
	}
	var after ledger.Key
	for {
		page, err := st.ListRuntimes(ctx, ledger.RuntimeFilter{After: after, Limit: 10000, Decided: true})
		if err != nil {
			return f, fmt.Errorf("read runtimes: %w", err)
		}
		for _, r := range page {
			if r.Pinned {
				f.pinned[r.Key] = true
			}
			if r.LeaseUntil.After(f.until[r.Key]) {
				f.until[r.Key] = r.LeaseUntil
			}
		}
		if len(page) < 10000 {
			break
		}
		after = page[len(page)-1].Key
	}
	return f, nil
}

func run(ctx context.Context, opts Options, write bool) (*Report, error) {
	if opts.Ledger == nil {
		return nil, errors.New("native settings: no ledger")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	now := opts.Now().UTC()
	f, err := readLedger(ctx, opts.Ledger, now)
	if err != nil {
		return nil, fmt.Errorf("native settings: %w", err)
	}
	rep := &Report{At: now, Rows: []Row{}, Applied: write}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range opts.Sources {
		src := &opts.Sources[i]
		nl, ok := backend.As[backend.NativeLifecycle](src.Backend)
		if !ok {
			continue
		}
		wg.Go(func() {
			rows, err := runSource(ctx, src, nl, f, now, opts, write)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %v", cmp.Or(src.Label, src.Name), err))
			}
			rep.Rows = append(rep.Rows, rows...)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(rep.Rows, func(a, b Row) int {
		if a.Backend != b.Backend {
			return compare(a.Backend, b.Backend)
		}
		return compare(a.Runtime, b.Runtime)
	})
	slices.Sort(rep.Problems)
	for _, r := range rep.Rows {
		if slices.ContainsFunc(r.Settings, func(s Setting) bool { return s.Drift != "" }) {
			rep.Drifted++
		}
		if !write {
			continue
		}
		switch {
		case r.Error != "":
			rep.Failed++
		case r.Touch || slices.ContainsFunc(r.Settings, func(s Setting) bool { return s.Action == "set" }):
			rep.Written++
		}
	}
	return rep, nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func runSource(ctx context.Context, src *engine.Source, nl backend.NativeLifecycle, f facts, now time.Time, opts Options, write bool) ([]Row, error) {
	l, ok := backend.As[backend.Lister](src.Backend)
	if !ok {
		return nil, errors.New("cannot list runtimes")
	}
	opt := backend.ListOptions{Light: true}
	if len(opts.Only) > 0 {
		for _, k := range opts.Only {
			if k.Source == src.Name {
				opt.IDs = append(opt.IDs, k.ID)
			}
		}
		if len(opt.IDs) == 0 {
			return nil, nil
		}
	}
	rts, err := l.List(ctx, opt)
	if err != nil {
		return nil, fmt.Errorf("listing failed: %w", err)
	}
	rows := make([]Row, 0, len(rts))
	for i := range rts {
		rts[i].Key.Source = src.Name
	}
	for _, rt := range rts {
		if rt.State.Present() {
			rows = append(rows, Row{Backend: rt.Backend, Runtime: rt.ID, Source: src.Name, State: rt.State})
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, opts.Concurrency)
	byID := map[string]backend.Runtime{}
	for _, rt := range rts {
		byID[rt.ID] = rt
	}
	for i := range rows {
		row := &rows[i]
		rt := byID[row.Runtime]
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			one(ctx, src, nl, rt, row, f, now, write)
		})
	}
	wg.Wait()
	return rows, nil
}

// one reads, compares and (when write) syncs one runtime.
func one(ctx context.Context, src *engine.Source, nl backend.NativeLifecycle, rt backend.Runtime, row *Row, f facts, now time.Time, write bool) {
	k := rt.Key
	var cur backend.Lifecycle
	var err error
	if rt.Native != nil {
		cur = *rt.Native // the listing carried the timers
	} else {
		cur, err = nl.Lifecycle(ctx, rt, backend.LifecycleOptions{})
	}
	if err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			row.Notes = append(row.Notes, "no native settings: the loop covers it")
			return
		}
		row.Error = "read settings: " + err.Error()
		return
	}
	row.Provider = cur
	t := Want(Input{Now: now, Settings: src.Settings, Runtime: rt, Activity: f.activity[k],
		ProtectedUntil: f.until[k], Pinned: f.pinned[k], Provider: cur})
	row.target, row.Policy, row.Touch, row.Notes = t, t.Lifecycle, t.Touch, append(row.Notes, t.Notes...)
	reportOnly := "report only: the provider does not let reclaimer change it"
	if ex, ok := backend.As[backend.NativeExplainer](src.Backend); ok {
		why := ex.NativeExplanation()
		row.Notes = append(row.Notes, why)
		reportOnly = "report only: " + why
	}
	row.Policy.DeadlineStep = cur.DeadlineStep
	set := cur
	set.Can = nil
	changes := 0
	for _, name := range []string{backend.TimerIdleSuspend, backend.TimerIdlePause, backend.TimerArchive, backend.TimerDelete, backend.TimerDeadline} {
		if !t.Has(name) {
			// No opinion: still show what the provider enforces.
			if slices.Contains(cur.Can, name) || Describe(name, cur) != Describe(name, backend.Lifecycle{}) {
				row.Settings = append(row.Settings, Setting{Name: name, Provider: Describe(name, cur), Policy: "-"})
			}
			continue
		}
		s := Setting{Name: name, Provider: Describe(name, cur), Policy: Describe(name, row.Policy), Drift: Drift(name, cur, row.Policy)}
		switch {
		case s.Drift == "":
		case !slices.Contains(cur.Can, name):
			s.Action = reportOnly
		case name == backend.TimerDeadline && cur.DeadlineStep == backend.StepDelete && t.Lifecycle.Deadline.Before(cur.Deadline):
			s.Action = "report only: the provider deletes at this timer; reclaimer only ever extends it"
		default:
			s.Action = "set"
			changes++
			switch name {
			case backend.TimerIdleSuspend:
				set.IdleSuspend = t.Lifecycle.IdleSuspend
			case backend.TimerIdlePause:
				set.IdlePause = t.Lifecycle.IdlePause
			case backend.TimerArchive:
				set.Archive = t.Lifecycle.Archive
			case backend.TimerDelete:
				set.Delete = t.Lifecycle.Delete
			case backend.TimerDeadline:
				set.Deadline = t.Lifecycle.Deadline
			}
		}
		if s.Drift == "stricter" && s.Action == "set" {
			s.Action = "set (the provider was stricter than the policy)"
		}
		row.Settings = append(row.Settings, s)
	}
	if !write || (changes == 0 && !t.Touch) {
		return
	}
	read := cur // what was read just now: the backend need not read it again
	opts := backend.LifecycleOptions{Touch: t.Touch, Current: &read}
	if changes > 0 {
		opts.Set = &set
	}
	got, err := nl.Lifecycle(ctx, rt, opts)
	if err != nil {
		row.Error = "write settings: " + err.Error()
		for i := range row.Settings {
			if row.Settings[i].Action != "" && !isReport(row.Settings[i].Action) {
				row.Settings[i].Action = "failed: " + err.Error()
			}
		}
		return
	}
	row.Provider = got
	for i := range row.Settings {
		if a := row.Settings[i].Action; a != "" && !isReport(a) {
			row.Settings[i].Action = "set"
			row.Settings[i].Provider = Describe(row.Settings[i].Name, got)
		}
	}
}

func isReport(action string) bool { return len(action) >= 6 && action[:6] == "report" }
