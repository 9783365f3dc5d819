package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

type stepsFlag []backend.Step

func (s *stepsFlag) String() string { return fmt.Sprint(*s) }
func (s *stepsFlag) Set(v string) error {
	st := backend.Step(v)
	if !st.Valid() {
		return fmt.Errorf("unknown step %q (caches, dependencies, suspend, archive, delete)", v)
	}
	*s = append(*s, st)
	return nil
}

// passFlags are the flags plan and apply share.
type passFlags struct {
	asJSON *bool
	only   multi
	steps  stepsFlag
	src    sourceFlags
}

func (f *passFlags) register(fs *flag.FlagSet) {
	f.asJSON = fs.Bool("json", false, "print JSON")
	fs.Var(&f.only, "runtime", "only this runtime (repeatable)")
	fs.Var(&f.steps, "step", "only this step (repeatable)")
	f.src.register(fs)
}

// newPlan opens the configuration and plans a pass narrowed by the flags.
func (c *command) newPlan(ctx context.Context, f *passFlags) (*session, *plan.Plan, *engine.World, error) {
	s, err := c.open(ctx, &f.src)
	if err != nil {
		return nil, nil, nil, err
	}
	keys, err := s.resolveAll(ctx, f.only)
	if err == nil {
		p, w, err := s.engine.Plan(ctx, engine.PlanOptions{Steps: f.steps, Only: keys})
		if err == nil {
			return s, p, w, nil
		}
	}
	s.close()
	return nil, nil, nil, err
}

func (c *command) plan(ctx context.Context, args []string) error {
	fs := newFlags("plan", c.env)
	out := fs.String("out", "", "also save the plan to FILE, for apply --plan")
	var f passFlags
	f.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	s, p, _, err := c.newPlan(ctx, &f)
	if err != nil {
		return err
	}
	defer s.close()
	if *out != "" {
		if err := plan.Write(*out, p); err != nil {
			return err
		}
	}
	if *f.asJSON {
		return printJSON(c.env.Stdout, p)
	}
	printPlan(c.env.Stdout, p)
	if *out != "" {
		fmt.Fprintf(c.env.Stdout, "\nSaved to %s; apply it with: reclaimer apply --plan %s\n", *out, *out)
	}
	return nil
}

func (c *command) apply(ctx context.Context, args []string) error {
	fs := newFlags("apply", c.env)
	planFile := fs.String("plan", "", "apply exactly this saved plan")
	var f passFlags
	f.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *planFile == "" {
		s, p, w, err := c.newPlan(ctx, &f)
		if err != nil {
			return err
		}
		defer s.close()
		if len(f.only) > 0 {
			w = nil // narrowed: observe everything once for the trash leftovers
		}
		return c.runApply(ctx, s, p, w, *f.asJSON)
	}
	if len(f.only) > 0 || len(f.steps) > 0 {
		return usagef("--plan cannot be combined with --runtime or --step: a saved plan is applied as it is")
	}
	p, err := plan.Read(*planFile)
	if err != nil {
		return usageError{err}
	}
	s, err := c.open(ctx, &f.src)
	if err != nil {
		return err
	}
	defer s.close()
	return c.runApply(ctx, s, p, nil, *f.asJSON)
}

func (c *command) runApply(ctx context.Context, s *session, p *plan.Plan, w *engine.World, asJSON bool) error {
	var progress func(done, total int)
	if c.env.IsTerminal && !asJSON && len(p.Actions) > 3 {
		progress = func(done, total int) {
			const width = 30
			n := done * width / total
			fmt.Fprintf(c.env.Stderr, "\r[%s%s] %d/%d", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total)
			if done == total {
				fmt.Fprintln(c.env.Stderr)
			}
		}
	}
	res, err := s.engine.Apply(ctx, p, engine.ApplyOptions{Progress: progress, World: w})
	if err != nil {
		return err
	}
	if err := s.engine.Drain(ctx); err != nil {
		fmt.Fprintf(c.env.Stderr, "reclaimer: warning: %v\n", err)
	}
	c.failed = res.Failed()
	if asJSON {
		return printJSON(c.env.Stdout, res)
	}
	printApplied(c.env.Stdout, res)
	return nil
}

// RuntimeRow is one line of ls.
type RuntimeRow struct {
	ID            string        `json:"id"`
	Backend       string        `json:"backend"`
	State         backend.State `json:"state"`
	Path          string        `json:"path,omitempty"`
	LastActive    time.Time     `json:"last_active,omitzero"`
	SizeBytes     int64         `json:"size_bytes"`
	Pinned        string        `json:"pinned,omitempty"`
	LeaseUntil    time.Time     `json:"lease_until,omitzero"`
	Retention     string        `json:"retention"`
	ScheduledStep backend.Step  `json:"scheduled_step,omitempty"`
	ScheduledDue  time.Time     `json:"scheduled_due,omitzero"`
	Busy          string        `json:"busy,omitempty"`
	Unsaved       string        `json:"unsaved,omitempty"`
	ArchiveID     string        `json:"archive_id,omitempty"`
}

// openReport parses the flags of a report command ([--json] and the
// source flags) and opens the configuration.
func (c *command) openReport(ctx context.Context, name string, args []string) (*session, *bool, error) {
	fs := newFlags(name, c.env)
	asJSON := fs.Bool("json", false, "print JSON")
	var src sourceFlags
	src.register(fs)
	if err := parse(fs, args); err != nil {
		return nil, nil, err
	}
	s, err := c.open(ctx, &src)
	return s, asJSON, err
}

func (c *command) ls(ctx context.Context, args []string) error {
	s, asJSON, err := c.openReport(ctx, "ls", args)
	if err != nil {
		return err
	}
	defer s.close()
	w, err := s.engine.Observe(ctx, engine.ObserveOptions{Record: true})
	if err != nil {
		return err
	}
	rows := []RuntimeRow{}
	for _, seen := range w.Runtimes {
		rows = append(rows, rowOf(seen))
	}
	measureRows(ctx, w, rows)
	for _, r := range w.Gone {
		rows = append(rows, RuntimeRow{ID: r.Key.ID, Backend: r.Key.Backend, State: backend.State(r.State),
			SizeBytes: r.SizeBytes, ArchiveID: r.ArchiveID, Retention: "-"})
	}
	if *asJSON {
		return printJSON(c.env.Stdout, rows)
	}
	return printRuntimeRows(c.env.Stdout, rows)
}

// measureRows sizes the local runtimes of rows in parallel (a few at a
// time: each walk is parallel already). A runtime without a folder of its
// own (a container) is sized by its home and workspaces inside its root,
// plus what its backend counted outside it (a writable layer).
func measureRows(ctx context.Context, w *engine.World, rows []RuntimeRow) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, seen := range w.Runtimes {
		rt := seen.Runtime
		dirs := []string{rt.Path}
		if rt.Path == "" {
			dirs = append([]string{rt.Home}, rt.Workspaces...)
		}
		if rt.Root == "" {
			if rt.StorageBytes > 0 {
				rows[i].SizeBytes = rt.StorageBytes
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			total, measured := rt.StorageBytes, false
			seen := map[string]bool{}
			for _, d := range dirs {
				rel, err := filepath.Rel(rt.Root, d)
				if d == "" || seen[d] || err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
					continue
				}
				seen[d] = true
				if res, err := treesize.Measure(ctx, rt.Root, rel, treesize.Options{}); err == nil {
					total += res.AllocBytes
					measured = true
				}
			}
			if measured || total > 0 {
				rows[i].SizeBytes = total
			}
		}()
	}
	wg.Wait()
}

func rowOf(s *engine.Seen) RuntimeRow {
	r := RuntimeRow{ID: s.Runtime.ID, Backend: s.Runtime.Backend, State: s.Runtime.State, Path: s.Runtime.Path,
		LastActive: s.LastActive(), SizeBytes: -1, Busy: s.Runtime.Busy, Unsaved: s.Runtime.Unsaved}
	rec := s.Record
	if s.HasRecord {
		r.SizeBytes = rec.SizeBytes
		r.LeaseUntil = rec.LeaseUntil
		r.ScheduledStep, r.ScheduledDue = backend.Step(rec.ScheduledStep), rec.ScheduledDue
		r.ArchiveID = rec.ArchiveID
		if rec.Pinned {
			r.Pinned = "yes"
			if rec.PinReason != "" {
				r.Pinned = rec.PinReason
			}
		}
	}
	if s.Runtime.Pinned != "" {
		r.Pinned = s.Runtime.Pinned
	}
	ret := s.Source.Settings.Retention
	if rec.RetentionOverride != nil {
		ret = *rec.RetentionOverride
	}
	r.Retention = durationText(ret)
	if rec.RetentionOverride != nil {
		r.Retention += " (set)"
	}
	return r
}

// Status is what status prints.
type Status struct {
	Filesystems []policy.Filesystem    `json:"filesystems"`
	ByState     map[backend.State]int  `json:"runtimes_by_state"`
	ByBackend   map[string]int         `json:"runtimes_by_backend"`
	Reclaimable map[backend.Step]int64 `json:"reclaimable_bytes_by_step"`
	LastPass    *ledger.JournalEntry   `json:"last_action,omitempty"`
	Problems    []plan.Skipped         `json:"problems,omitempty"`
	Scheduled   []plan.Notice          `json:"scheduled,omitempty"`
}

func (c *command) status(ctx context.Context, args []string) error {
	s, asJSON, err := c.openReport(ctx, "status", args)
	if err != nil {
		return err
	}
	defer s.close()
	p, w, err := s.engine.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		return err
	}
	st := Status{Filesystems: w.Filesystems, ByState: map[backend.State]int{}, ByBackend: map[string]int{},
		Reclaimable: map[backend.Step]int64{}, Problems: w.Problems}
	for _, r := range w.Runtimes {
		st.ByState[r.Runtime.State]++
		st.ByBackend[r.Runtime.Backend]++
		if r.HasRecord && r.Record.ScheduledStep != "" {
			st.Scheduled = append(st.Scheduled, plan.Notice{Runtime: r.Runtime.ID, Backend: r.Runtime.Backend,
				Step: backend.Step(r.Record.ScheduledStep), Due: r.Record.ScheduledDue})
		}
	}
	for _, g := range w.Gone {
		st.ByState[backend.State(g.State)]++
		st.ByBackend[g.Key.Backend]++
	}
	for _, a := range p.Actions {
		st.Reclaimable[a.Step] += a.Bytes
	}
	if j, err := s.store.ListJournal(ctx, ledger.JournalFilter{Limit: 1}); err == nil && len(j) > 0 {
		st.LastPass = &j[0]
	}
	if *asJSON {
		return printJSON(c.env.Stdout, st)
	}
	out := c.env.Stdout
	printStatusHead(out, &st)
	if st.LastPass != nil {
		e := st.LastPass
		outcome := "unfinished"
		if e.Outcome != nil {
			outcome = e.Outcome.Result
		}
		fmt.Fprintf(out, "last action: %s %s of %s/%s, %s\n", e.Intent.At.Local().Format(time.RFC3339), e.Intent.Step, e.Intent.Key.Backend, e.Intent.Key.ID, outcome)
	}
	printProblems(out, st.Problems)
	return nil
}

func countsText[K ~string](m map[K]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

func (c *command) mark(ctx context.Context, name string, args []string) error {
	fs := newFlags(name, c.env)
	reason := fs.String("reason", "", "why (pin)")
	forDur := fs.String("for", "", "how long (lease), e.g. 2h or 3d")
	days := fs.Int("days", -1, "retention in days (0: never archive)")
	def := fs.Bool("default", false, "back to the configured retention")
	s, k, err := c.openRuntime(ctx, name, fs, args)
	if err != nil {
		return err
	}
	defer s.close()
	lk := ledger.Key{Backend: k.Backend, ID: k.ID}
	now := time.Now().UTC()
	switch name {
	case "touch":
		if err := s.ensureRecord(ctx, k); err != nil {
			return err
		}
		if err := s.store.RecordActivity(ctx, []ledger.Activity{{Key: lk, At: now}}); err != nil {
			return err
		}
		fmt.Fprintf(c.env.Stdout, "%s: activity recorded at %s\n", k, now.Local().Format(time.RFC3339))
		return nil
	case "lease":
		if *forDur == "" {
			return usagef("lease: --for DURATION is required")
		}
		d, err := config.ParseDuration(*forDur)
		if err != nil || d <= 0 {
			return usagef("lease: --for %q: not a positive duration", *forDur)
		}
		until := now.Add(time.Duration(d))
		return s.update(ctx, c, k, func(r *ledger.RuntimeRecord) string {
			r.LeaseUntil = until
			return "leased until " + until.Local().Format(time.RFC3339)
		})
	case "pin":
		return s.update(ctx, c, k, func(r *ledger.RuntimeRecord) string {
			r.Pinned, r.PinReason = true, *reason
			r.ScheduledStep, r.ScheduledAt, r.ScheduledDue = "", time.Time{}, time.Time{}
			return "pinned: never touched until unpinned"
		})
	case "unpin":
		return s.update(ctx, c, k, func(r *ledger.RuntimeRecord) string {
			r.Pinned, r.PinReason = false, ""
			return "unpinned"
		})
	case "retention":
		switch {
		case *def && *days >= 0:
			return usagef("retention: give --days N or --default, not both")
		case *def:
			return s.update(ctx, c, k, func(r *ledger.RuntimeRecord) string {
				r.RetentionOverride = nil
				return "retention back to the configured default"
			})
		case *days >= 0:
			d := time.Duration(*days) * 24 * time.Hour
			return s.update(ctx, c, k, func(r *ledger.RuntimeRecord) string {
				r.RetentionOverride = &d
				if *days == 0 {
					return "retention: never archived"
				}
				return "retention set to " + strconv.Itoa(*days) + " days"
			})
		}
		return usagef("retention: give --days N or --default")
	}
	return usagef("unknown command %q", name)
}

// openRuntime parses "ID [flags]" (or "[flags] ID"), opens the
// configuration and resolves ID: what every command about one runtime
// starts with.
func (c *command) openRuntime(ctx context.Context, name string, fs *flag.FlagSet, args []string) (*session, backend.Key, error) {
	var src sourceFlags
	src.register(fs)
	id, rest := splitID(args)
	if err := parse(fs, rest); err != nil {
		return nil, backend.Key{}, err
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	}
	if id == "" {
		return nil, backend.Key{}, usagef("%s: which runtime? (an ID or its path)", name)
	}
	s, err := c.open(ctx, &src)
	if err != nil {
		return nil, backend.Key{}, err
	}
	k, err := s.resolve(ctx, id)
	if err != nil {
		s.close()
		return nil, backend.Key{}, err
	}
	return s, k, nil
}

// splitID takes a leading positional ID so flags may follow it.
func splitID(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

func (c *command) delete(ctx context.Context, args []string) error {
	fs := newFlags("delete", c.env)
	asJSON := fs.Bool("json", false, "print JSON")
	s, k, err := c.openRuntime(ctx, "delete", fs, args)
	if err != nil {
		return err
	}
	defer s.close()
	p, _, err := s.engine.Plan(ctx, engine.PlanOptions{Only: []backend.Key{k}, Steps: []backend.Step{backend.StepDelete},
		Requests: []policy.Request{{Key: k, Step: backend.StepDelete}}})
	if err != nil {
		return err
	}
	if len(p.Actions) == 0 {
		reason := "nothing to do"
		for _, sk := range p.Skipped {
			if sk.Runtime == k.ID {
				reason = sk.Reason
			}
		}
		c.failed = true
		fmt.Fprintf(c.env.Stderr, "reclaimer: not deleting %s: %s\n", k, reason)
		return nil
	}
	return c.runApply(ctx, s, p, nil, *asJSON)
}

func (c *command) restore(ctx context.Context, args []string) error {
	fs := newFlags("restore", c.env)
	to := fs.String("to", "", "restore into this path instead of where it was")
	archiveID := fs.String("archive", "", "which archive (default: the newest)")
	s, k, err := c.openRuntime(ctx, "restore", fs, args)
	if err != nil {
		return err
	}
	defer s.close()
	archives, err := s.store.ListArchives(ctx, ledger.Key{Backend: k.Backend, ID: k.ID})
	if err != nil {
		return err
	}
	var a *ledger.Archive
	for i := range archives {
		if *archiveID == "" || archives[i].ID == *archiveID {
			a = &archives[i]
			break
		}
	}
	if a == nil {
		return fmt.Errorf("restore %s: no archive%s: %w", k, map[bool]string{true: " " + *archiveID, false: ""}[*archiveID != ""], backend.ErrNotFound)
	}
	b := s.backendNamed(k.Backend)
	r, ok := backend.As[backend.Restorer](b)
	if !ok {
		return fmt.Errorf("restore %s: its backend cannot restore: %w", k, errors.ErrUnsupported)
	}
	target := *to
	if target != "" {
		target = absPath(target)
	}
	store, err := s.sinkFor(*a)
	if err != nil {
		return fmt.Errorf("restore %s from archive %s: %w", k, a.ID, err)
	}
	staging, err := s.stagingDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(staging)
	path, err := r.Restore(ctx, k, backend.RestoreOptions{Location: a.Location, Formats: a.Formats, Manifest: a.Manifest, To: target,
		Sink: store, Staging: staging})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.env.Stdout, "restored %s from archive %s into %s\n", k, a.ID, path)
	if target != "" {
		// Elsewhere: a new runtime as far as the sources can tell; the
		// archived record stays as it is.
		return nil
	}
	lk := ledger.Key{Backend: k.Backend, ID: k.ID}
	if _, err := s.store.Update(ctx, lk, func(r *ledger.RuntimeRecord) error {
		r.State = string(backend.StateStopped)
		return nil
	}); err != nil {
		return err
	}
	// Restoring is using it: the retention clock starts again.
	return s.store.RecordActivity(ctx, []ledger.Activity{{Key: lk, At: time.Now().UTC()}})
}

func (c *command) log(ctx context.Context, args []string) error {
	fs := newFlags("log", c.env)
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 50, "how many entries, newest first")
	runtime := fs.String("runtime", "", "only this runtime")
	planID := fs.String("plan", "", "only this plan")
	var src sourceFlags
	src.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	s, err := c.open(ctx, &src)
	if err != nil {
		return err
	}
	defer s.close()
	filter := ledger.JournalFilter{Limit: *limit, PlanID: *planID}
	if *runtime != "" {
		k, err := s.resolve(ctx, *runtime)
		if err != nil {
			return err
		}
		filter.Key = ledger.Key{Backend: k.Backend, ID: k.ID}
	}
	entries, err := s.store.ListJournal(ctx, filter)
	if err != nil {
		return err
	}
	if entries == nil {
		entries = []ledger.JournalEntry{}
	}
	if *asJSON {
		return printJSON(c.env.Stdout, entries)
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tRUNTIME\tSTEP\tOUTCOME\tFREED\tREASON")
	for _, e := range entries {
		outcome, freed, reason := "unfinished", "-", e.Intent.Reason
		if e.Outcome != nil {
			outcome, freed = e.Outcome.Result, sizeText(e.Outcome.FreedBytes)
			if e.Outcome.Reason != "" {
				reason = e.Outcome.Reason
			}
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\n", e.Intent.At.Local().Format("2006-01-02 15:04:05"),
			e.Intent.Key.Backend, e.Intent.Key.ID, e.Intent.Step, outcome, freed, reason)
	}
	return tw.Flush()
}
