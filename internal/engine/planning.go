package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

// PlanOptions narrow a pass.
type PlanOptions struct {
	Steps    []backend.Step
	Only     []backend.Key
	Requests []policy.Request
	// Explain, when set, asks for the explanation of this runtime
	// (World.Explained): every rule's verdict in the pass. The runtime is
	// observed fully and scanned for processes before deciding, as apply
	// would re-observe it.
	Explain backend.Key
}

// Explained is what a pass decided for one runtime, and why.
type Explained struct {
	// Seen is the runtime as observed (nil when no source listed it).
	Seen *Seen
	// Candidate is what the policies were given for it.
	Candidate *policy.Candidate
	// Explanation is every rule's verdict (policy.Explain, over the same
	// input as the plan).
	Explanation policy.Explanation
	// BytesByStep is what each step would free of it now: the caches and
	// dependencies its backend selects, and the whole runtime for archive
	// and delete; a step it cannot have is absent.
	BytesByStep map[backend.Step]int64
	// SizeBytes is the runtime's size on disk (-1 when there is nothing
	// to measure: a remote sandbox).
	SizeBytes int64
}

// Plan observes the world and returns what a pass would do. It changes
// nothing but the ledger's record of what it saw.
func (e *Engine) Plan(ctx context.Context, opts PlanOptions) (*plan.Plan, *World, error) {
	only := opts.Only
	for _, r := range opts.Requests {
		if len(only) > 0 && !containsKey(only, r.Key) {
			only = append(only, r.Key)
		}
	}
	w, err := e.Observe(ctx, ObserveOptions{Only: only, Record: true, Light: true, DeferBusy: true})
	if err != nil {
		return nil, nil, err
	}
	var explained *Seen
	if opts.Explain != (backend.Key{}) {
		if explained = w.Find(opts.Explain); explained != nil {
			if err := e.ObserveFully(ctx, []*Seen{explained}); err != nil {
				return nil, nil, err
			}
			if err := e.busy(ctx, []*Seen{explained}); err != nil {
				return nil, nil, fmt.Errorf("plan: scan for busy runtimes: %w", err)
			}
		}
	}
	cands := e.candidates(ctx, w, opts.Steps)
	in := policy.Input{Now: w.Now, Candidates: cands, Filesystems: w.Filesystems,
		Requests: opts.Requests, Steps: opts.Steps, Only: opts.Only}
	// Scan /proc only for the runtimes a decision would touch, then decide
	// again: a busy one drops out and the budget may reach the next, which
	// is scanned in turn. Busy only takes actions away, so this ends with
	// every acted-on runtime scanned.
	candIndex := make(map[backend.Key]int, len(cands))
	for i := range cands {
		candIndex[cands[i].Runtime.Key] = i
	}
	out := policy.Decide(in)
	for {
		var scan []*Seen
		for _, a := range out.Actions {
			if s := w.Find(a.Key); s != nil && s.unscanned {
				scan = append(scan, s)
			}
		}
		if len(scan) == 0 {
			break
		}
		if err := e.busy(ctx, scan); err != nil {
			return nil, nil, fmt.Errorf("plan: scan for busy runtimes: %w", err)
		}
		for _, s := range scan {
			cands[candIndex[s.Runtime.Key]].Runtime.Busy = s.Runtime.Busy
		}
		out = policy.Decide(in)
	}

	// What the plan acts on is observed fully: apply compares with it.
	var acted []*Seen
	for _, a := range out.Actions {
		if s := w.Find(a.Key); s != nil {
			acted = append(acted, s)
		}
	}
	if err := e.ObserveFully(ctx, acted); err != nil {
		return nil, nil, err
	}
	p := &plan.Plan{ID: plan.NewID(w.Now), CreatedAt: w.Now, Note: plan.Disclaimer,
		Usage: []plan.Usage{}, Actions: []plan.Action{}, Skipped: []plan.Skipped{}, Problems: []plan.Problem{}}
	for _, fs := range w.Filesystems {
		p.Usage = append(p.Usage, plan.Usage{Path: fs.Path, Fraction: fs.Fraction, High: fs.High, Low: fs.Low})
	}
	p.Seen = map[string]map[string]int{}
	for _, s := range w.Runtimes {
		byState := p.Seen[s.Runtime.Backend]
		if byState == nil {
			byState = map[string]int{}
			p.Seen[s.Runtime.Backend] = byState
		}
		byState[string(s.Runtime.State)]++
	}
	for _, a := range out.Actions {
		s := w.Find(a.Key)
		act := plan.Action{Runtime: a.Key.ID, Backend: a.Key.Backend, Source: a.Key.Source, Step: a.Step, Paths: a.Paths,
			Bytes: a.Bytes, Code: a.Code, Reason: a.Reason, Filesystem: a.Filesystem,
			Observed: plan.Observed{State: s.Runtime.State, LastActivity: s.LastActive(), Fingerprint: s.Runtime.Fingerprint}}
		if act.Paths == nil {
			act.Paths = []string{}
		}
		if a.Step.Destructive() && act.Bytes == 0 && (s.Runtime.Path != "" || s.Runtime.Root != "" || s.Runtime.StorageBytes > 0) {
			act.Bytes = max(e.Size(ctx, *s.Runtime), 0)
		}
		act.NotKept = e.notKept(s, a.Step)
		p.Actions = append(p.Actions, act)
	}
	p.Problems = append(p.Problems, w.Problems...)
	for _, s := range out.Skipped {
		p.Skipped = append(p.Skipped, plan.Skipped{Runtime: s.Key.ID, Backend: s.Key.Backend, Source: s.Key.Source, Step: s.Step,
			Code: s.Code, Reason: s.Reason})
	}
	notice := func(n policy.Notice) plan.Notice {
		return plan.Notice{Runtime: n.Key.ID, Backend: n.Key.Backend, Source: n.Key.Source, Step: n.Step, Due: n.Due, Code: n.Code, Reason: n.Reason}
	}
	for _, n := range out.Schedule {
		pn := notice(n)
		if s := w.Find(n.Key); s != nil {
			pn.NotKept = e.notKept(s, n.Step)
		}
		p.Scheduled = append(p.Scheduled, pn)
	}
	for _, n := range out.Cancel {
		p.Canceled = append(p.Canceled, notice(n))
	}
	p.Messages = out.Messages
	if opts.Explain != (backend.Key{}) {
		w.Explained = e.explain(ctx, in, opts.Explain, explained, cands, candIndex)
	}
	return p, w, nil
}

// explain explains what in decides for k, and measures what each step
// would free of it.
func (e *Engine) explain(ctx context.Context, in policy.Input, k backend.Key, s *Seen, cands []policy.Candidate, index map[backend.Key]int) *Explained {
	x := &Explained{Seen: s, Explanation: policy.Explain(in, k), BytesByStep: map[backend.Step]int64{}, SizeBytes: -1}
	if s == nil {
		return x
	}
	c := &cands[index[k]]
	x.Candidate = c
	if !s.Runtime.State.Present() {
		return x
	}
	if fr, ok := backend.As[backend.FileReclaimer](s.Source.Backend); ok {
		// What the pass selected, else a selection now, for the figures
		// only: the pass selects only what a rule could act on.
		files := func(step backend.Step, have []backend.File, need bool) int64 {
			if have == nil && need {
				have, _ = fr.ReclaimFiles(ctx, *s.Runtime, backend.FileOptions{Step: step, CacheDirs: s.Source.Settings.CacheDirs,
					Rebuildable: s.Source.Settings.Rebuildable, Keep: s.Source.Settings.Keep})
			}
			if step == backend.StepDependencies {
				have = backend.Shed(have)
			}
			var n int64
			for _, f := range have {
				n += max(f.Bytes, 0)
			}
			return n
		}
		if len(s.Source.Settings.CacheDirs) > 0 && s.Runtime.Home != "" {
			x.BytesByStep[backend.StepCaches] = files(backend.StepCaches, c.Caches, true)
		}
		x.BytesByStep[backend.StepDependencies] = files(backend.StepDependencies, c.Dependencies, true)
	}
	size := c.SizeBytes
	if size < 0 && (s.Runtime.Path != "" || s.Runtime.Root != "" || s.Runtime.StorageBytes > 0) {
		size = e.Size(ctx, *s.Runtime)
	}
	x.SizeBytes = size
	if size >= 0 {
		if c.Can.Delete {
			x.BytesByStep[backend.StepArchive] = size
			x.BytesByStep[backend.StepDelete] = size
		}
	}
	return x
}

// notKept is what an archive written before step on s would not keep
// (backend.Discloser), when step archives first.
func (e *Engine) notKept(s *Seen, step backend.Step) []string {
	d, ok := backend.As[backend.Discloser](s.Source.Backend)
	if !ok || !(step == backend.StepArchive || (step == backend.StepDelete && s.Runtime.Unsaved != "")) {
		return nil
	}
	return d.NotKept(*s.Runtime, e.exportOptions(s))
}

func containsKey(keys []backend.Key, k backend.Key) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// candidates builds the policy input, selecting caches of stopped runtimes
// and, on filesystems over their high watermark, dependencies.
func (e *Engine) candidates(ctx context.Context, w *World, steps []backend.Step) []policy.Candidate {
	over := map[string]bool{}
	for _, fs := range w.Filesystems {
		over[fs.ID] = fs.High > 0 && fs.Fraction > fs.High
	}
	wants := func(st backend.Step) bool {
		if len(steps) == 0 {
			return true
		}
		for _, s := range steps {
			if s == st {
				return true
			}
		}
		return false
	}
	cands := make([]policy.Candidate, len(w.Runtimes))
	// What each runtime needs selected; the selection runs on a bounded
	// pool, not a goroutine each (100,000 of those cost a third of a pass).
	type job struct {
		i            int
		fr           backend.FileReclaimer
		caches, deps bool
	}
	var jobs []job
	for i, s := range w.Runtimes {
		c := &cands[i]
		*c = policy.Candidate{Runtime: s.Runtime, Record: s.PolicyRecord(), Settings: s.Source.Settings,
			Filesystem: s.Filesystem, SizeBytes: -1}
		b := s.Source.Backend
		_, c.Can.Suspend = backend.As[backend.Suspender](b)
		_, c.Can.Delete = backend.As[backend.Deleter](b)
		_, c.Can.Export = backend.As[backend.Exporter](b)
		_, c.Can.IdleArchive = backend.As[backend.IdleLosesFiles](b)
		fr, ok := backend.As[backend.FileReclaimer](b)
		c.Can.Files = ok
		if s.HasRecord && s.Record.SizeBytes >= 0 {
			c.SizeBytes = s.Record.SizeBytes
		}
		if !ok || !idleAndFree(s, w) {
			continue
		}
		needCaches := wants(backend.StepCaches) && s.Runtime.Home != "" && len(s.Source.Settings.CacheDirs) > 0
		needDeps := wants(backend.StepDependencies) && over[s.Filesystem]
		if needCaches || needDeps {
			jobs = append(jobs, job{i, fr, needCaches, needDeps})
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var next atomic.Int64
	for range min(len(jobs), e.opts.Concurrency) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1) - 1)
				if n >= len(jobs) || ctx.Err() != nil {
					return
				}
				j := jobs[n]
				s, c := w.Runtimes[j.i], &cands[j.i]
				var problems []string
				if j.caches {
					files, err := j.fr.ReclaimFiles(ctx, *s.Runtime, backend.FileOptions{Step: backend.StepCaches, CacheDirs: s.Source.Settings.CacheDirs})
					if err != nil {
						problems = append(problems, "select caches: "+err.Error())
					}
					c.Caches = files
				}
				if j.deps {
					files, err := j.fr.ReclaimFiles(ctx, *s.Runtime, backend.FileOptions{Step: backend.StepDependencies,
						Rebuildable: s.Source.Settings.Rebuildable, Keep: s.Source.Settings.Keep})
					if err != nil {
						problems = append(problems, "select dependencies: "+err.Error())
					}
					c.Dependencies = files
				}
				if len(problems) > 0 {
					mu.Lock()
					w.Problems = append(w.Problems, plan.Problem{Code: plan.SelectionFailed, Source: s.Source.Name, Label: s.Source.Label,
						Backend: s.Runtime.Backend, Runtime: s.Runtime.ID, Message: strings.Join(problems, "; ")})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return cands
}

// idleAndFree tells whether selecting files for s is worth the I/O: no
// policy would act on a running, busy, pinned, leased or held runtime.
func idleAndFree(s *Seen, w *World) bool {
	r := s.Record
	return !s.Runtime.State.Active() && s.Runtime.State.Present() && s.Runtime.Busy == "" &&
		s.Runtime.Pinned == "" && !r.Pinned && !r.LeaseUntil.After(w.Now) && s.HeldBy == ""
}

// Size measures a runtime's folder, or, for a runtime without one (a
// container), its home and workspaces inside its root, plus what it keeps
// in its storage (a writable layer), as reclaimer deletes: allocated
// blocks, hard links once, no link followed, no mount point entered. It
// is -1 when there is nothing to measure (a remote sandbox).
func (e *Engine) Size(ctx context.Context, rt backend.Runtime) int64 {
	dirs := []string{rt.Path}
	if rt.Path == "" {
		dirs = append([]string{rt.Home}, rt.Workspaces...)
	}
	total := max(rt.StorageBytes, 0)
	measured := rt.StorageBytes > 0
	seen := map[string]bool{}
	for _, d := range dirs {
		rel, err := filepath.Rel(rt.Root, d)
		if d == "" || seen[d] || err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		seen[d] = true
		res, err := treesize.Measure(ctx, rt.Root, rel, treesize.Options{})
		if err != nil && !errors.Is(err, context.Canceled) {
			e.log.Warn("measure runtime", "runtime", rt.Key.String(), "err", err)
		}
		total += res.AllocBytes
		measured = true
	}
	if !measured {
		return -1
	}
	return total
}
