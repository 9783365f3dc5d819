package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/views"
)

// Every command is parse, call one operation of the service (local or a
// daemon's: ops.Service), print its view. Nothing else happens here.

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

// with opens the service, runs f with it, and closes it; a local one first
// waits for what the command freed to be really gone.
func (c *command) with(ctx context.Context, f func(s ops.Service) error) error {
	var s ops.Service
	var err error
	if c.discovering() {
		s, err = c.discoveredService(ctx)
	} else {
		s, err = c.service(ctx)
	}
	if err != nil {
		return err
	}
	err = f(s)
	if derr := s.Drain(ctx); derr != nil && err == nil && ctx.Err() == nil {
		fmt.Fprintf(c.env.Stderr, "reclaimer: warning: %v\n", derr)
	}
	return errors.Join(err, s.Close())
}

// problems prints what an observation could not look at on standard
// error, once each, and makes the exit 1 (2 when nothing is configured).
func (c *command) problems(ps []views.Problem) {
	for _, p := range ps {
		fmt.Fprintf(c.env.Stderr, "reclaimer: problem: %s\n", plan.OneLine(p.String()))
		c.failed = true
		if p.Code == plan.NoSources {
			c.configError = true
		}
	}
}

func noArgs(name string, args []string) error {
	if len(args) > 0 {
		return usagef("%s: unexpected %q", name, args[0])
	}
	return nil
}

func needIDs(name string, args []string) error {
	if len(args) == 0 {
		return usagef("%s: which runtime? (an ID, backend/ID, or its path)", name)
	}
	return nil
}

var planCmd = spec{name: "plan", args: "", summary: "the dry run: what a pass would do, and why (without --config: over what a discovery finds)", sources: true, readOnly: true, discovers: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		out := fs.String("out", "", "also save the plan to `FILE`, for apply --plan")
		var only multi
		var st stepsFlag
		fs.Var(&only, "runtime", "only this runtime `ID` (repeatable)")
		fs.Var(&st, "step", "only this `STEP` (repeatable)")
		return func(ctx context.Context, c *command, args []string) error {
			if err := noArgs("plan", args); err != nil {
				return err
			}
			c.jsonOut = *asJSON
			return c.with(ctx, func(s ops.Service) error {
				p, err := s.Plan(ctx, ops.PlanRequest{Steps: st, Runtimes: refsOf(only)})
				if err != nil {
					return err
				}
				c.problems(p.Problems)
				if *out != "" {
					if err := plan.Write(*out, p); err != nil {
						return err
					}
				}
				if *asJSON {
					return printJSON(c.env.Stdout, p)
				}
				printPlan(c.env.Stdout, p)
				if *out != "" {
					fmt.Fprintf(c.env.Stdout, "\nSaved to %s; apply it with: reclaimer apply --plan %s\n", *out, *out)
				}
				return nil
			})
		}
	}}

var applyCmd = spec{name: "apply", summary: "one pass now, or exactly a saved plan (never more)", sources: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		planArg := fs.String("plan", "", "apply exactly this plan: a `FILE` saved by plan --out, or a plan id the daemon made")
		var only multi
		var st stepsFlag
		fs.Var(&only, "runtime", "only this runtime `ID` (repeatable)")
		fs.Var(&st, "step", "only this `STEP` (repeatable)")
		announced := fs.Bool("announced", false, "carry out the archive or delete announced for each --runtime now, not at its due time")
		return func(ctx context.Context, c *command, args []string) error {
			if err := noArgs("apply", args); err != nil {
				return err
			}
			if c.unconfigured() {
				return usagef("apply acts only on configured sources, never on a discovery: write the configuration of what is found with \"reclaimer init --write reclaimer.toml\", review it, then run \"reclaimer --config reclaimer.toml apply\" (or give --repo PATH, --dir PATH)")
			}
			req := ops.ApplyRequest{Steps: st, Runtimes: refsOf(only), Announced: *announced, Trigger: "cli"}
			if *announced && (len(only) == 0 || len(st) > 0) {
				return usagef("--announced carries out what was announced for named runtimes: give --runtime, and no --step")
			}
			if *planArg != "" {
				if len(only) > 0 || len(st) > 0 || *announced {
					return usagef("--plan cannot be combined with --runtime, --step or --announced: a saved plan is applied as it is")
				}
				if _, err := os.Stat(*planArg); err == nil || strings.ContainsRune(*planArg, '/') {
					p, err := plan.Read(*planArg)
					if err != nil {
						return usageError{err}
					}
					req.Plan = p
				} else {
					req.PlanID = *planArg
				}
			}
			return c.runPass(ctx, req, *asJSON)
		}
	}}

// runPass applies and prints the results.
func (c *command) runPass(ctx context.Context, req ops.ApplyRequest, asJSON bool) error {
	if c.env.IsTerminal && !asJSON {
		pl := &progressLine{w: c.env.Stderr, start: time.Now()}
		req.Progress, req.Step = pl.actions, pl.longStep
		defer pl.end()
	}
	return c.with(ctx, func(s ops.Service) error {
		pass, err := s.Apply(ctx, req)
		if err != nil {
			return err
		}
		res := pass.Applied
		if res == nil {
			res = &plan.Applied{PlanID: pass.Plan.ID, Results: []plan.Result{}, Problems: []plan.Problem{}}
		}
		if req.Plan == nil && req.PlanID == "" {
			// The pass's own observation: its problems are the plan's.
			res.Problems = append(slices.Clone(pass.Plan.Problems), res.Problems...)
		}
		c.problems(res.Problems)
		c.failed = c.failed || res.Failed() || (req.Delete && !allDone(res))
		if req.Delete {
			for _, r := range res.Results {
				if r.Outcome != plan.Done {
					fmt.Fprintf(c.env.Stderr, "reclaimer: not deleting %s/%s: %s\n", r.Backend, r.Runtime, plan.OneLine(r.Reason))
				}
			}
		}
		if asJSON {
			return printJSON(c.env.Stdout, res)
		}
		if req.Delete {
			// What the archive written first leaves out, as the plan said
			// before acting.
			for _, a := range pass.Plan.Actions {
				for _, n := range a.NotKept {
					fmt.Fprintf(c.env.Stdout, "%s/%s: the archive will not keep %s\n", a.Backend, a.Runtime, n)
				}
			}
		}
		printApplied(c.env.Stdout, res)
		return nil
	})
}

func allDone(res *plan.Applied) bool {
	for _, r := range res.Results {
		if r.Outcome != plan.Done {
			return false
		}
	}
	return len(res.Results) > 0
}

// progressLine is the line of how far an apply is, on a terminal: the
// actions done, and for a long step (one big archive or removal) the
// bytes stored or the entries and bytes purged so far. It is rewritten in
// place at most five times a second.
type progressLine struct {
	w     io.Writer
	start time.Time

	mu          sync.Mutex
	done, total int
	step, kind  string
	printed     time.Time
	shown       bool
}

func (p *progressLine) actions(done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done, p.total, p.step, p.kind = done, total, "", ""
	p.print(true)
}

func (p *progressLine) longStep(s engine.StepProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kind := p.kind
	switch {
	case s.Stored > 0:
		p.step, p.kind = fmt.Sprintf("archive of %s: %s stored", s.Action.Key(), sizeText(s.Stored)), "archive"
	case s.Removed > 0:
		p.step, p.kind = fmt.Sprintf("removing: %d entries, %s freed", s.Removed, sizeText(s.Freed)), "purge"
	}
	p.print(kind != p.kind)
}

// print rewrites the line (always when force, else at most every 200 ms).
func (p *progressLine) print(force bool) {
	now := time.Now()
	if !force && now.Sub(p.printed) < 200*time.Millisecond {
		return
	}
	var parts []string
	if p.total > 1 {
		const width = 30
		n := p.done * width / p.total
		parts = append(parts, fmt.Sprintf("[%s%s] %d/%d actions", strings.Repeat("#", n), strings.Repeat(".", width-n), p.done, p.total))
	}
	if p.step != "" {
		parts = append(parts, p.step)
	}
	if len(parts) == 0 {
		return
	}
	parts = append(parts, now.Sub(p.start).Round(time.Second).String())
	fmt.Fprintf(p.w, "\r%-100s", strings.Join(parts, ", "))
	p.printed, p.shown = now, true
}

// end ends the line, if one was printed.
func (p *progressLine) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprintln(p.w)
	}
}

var lsCmd = spec{name: "ls", summary: "the runtimes and what is known of them", sources: true, readOnly: true, discovers: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		output := fs.String("o", "", "output `FORMAT`: wide (every column: source, path, retention, lease, archive)")
		backendName := fs.String("backend", "", "only this `BACKEND`'s runtimes")
		state := fs.String("state", "", "only runtimes in this `STATE` (running, stopped, archived, ...)")
		search := fs.String("search", "", "only runtimes whose ID, path, label, owner or pin reason contains `TEXT`")
		sched := fs.Bool("scheduled", false, "only runtimes with an archive or delete announced")
		sortBy := fs.String("sort", "", "order by `KEY`: size (largest first), activity (newest first), due (soonest first)")
		desc := fs.Bool("desc", false, "reverse --sort")
		return func(ctx context.Context, c *command, args []string) error {
			if err := noArgs("ls", args); err != nil {
				return err
			}
			c.jsonOut = *asJSON
			if *output != "" && *output != "wide" {
				return usagef("ls: -o %q: the only format is wide", *output)
			}
			if *sortBy != "" && !slices.Contains(ops.RuntimeSorts, *sortBy) {
				return usagef("ls: --sort %q: one of %s", *sortBy, strings.Join(ops.RuntimeSorts, ", "))
			}
			if *desc && *sortBy == "" {
				return usagef("ls: --desc reverses --sort: give --sort too")
			}
			return c.with(ctx, func(s ops.Service) error {
				list, err := s.Runtimes(ctx, ops.RuntimeQuery{Backend: *backendName, State: *state, Observe: true, Sizes: true,
					Search: *search, Scheduled: *sched, Sort: *sortBy, Desc: *desc})
				if err != nil {
					return err
				}
				c.problems(list.Problems)
				if *asJSON {
					return printJSON(c.env.Stdout, list.Runtimes)
				}
				return printRuntimes(c.env.Stdout, list.Runtimes, *output == "wide", time.Now())
			})
		}
	}}

var statusCmd = spec{name: "status", summary: "filesystems, sources, runtimes by state, what is reclaimable, the last pass", sources: true, readOnly: true, discovers: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, c *command, args []string) error {
			if err := noArgs("status", args); err != nil {
				return err
			}
			c.jsonOut = *asJSON
			return c.with(ctx, func(s ops.Service) error {
				st, err := s.Status(ctx)
				if err != nil {
					return err
				}
				c.problems(st.Problems)
				if *asJSON {
					return printJSON(c.env.Stdout, st)
				}
				printStatus(c.env.Stdout, st)
				return nil
			})
		}
	}}

var explainCmd = spec{name: "explain", args: "ID", summary: "why a runtime is where it is: every policy's verdict, the next pass, the next step", sources: true, readOnly: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, c *command, args []string) error {
			if err := needIDs("explain", args); err != nil {
				return err
			}
			if len(args) > 1 {
				return usagef("explain: one runtime at a time (unexpected %q)", args[1])
			}
			return c.with(ctx, func(s ops.Service) error {
				ex, err := s.Explain(ctx, refsOf(args)[0])
				if err != nil {
					return err
				}
				c.problems(ex.Problems)
				if *asJSON {
					return printJSON(c.env.Stdout, ex)
				}
				printExplain(c.env.Stdout, ex)
				return nil
			})
		}
	}}

// mark runs one change on every runtime named: all, or none.
func (c *command) mark(ctx context.Context, name string, args []string, req ops.MarkRequest) error {
	if err := needIDs(name, args); err != nil {
		return err
	}
	req.Runtimes = refsOf(args)
	return c.with(ctx, func(s ops.Service) error {
		marked, err := s.Mark(ctx, req)
		for _, m := range marked {
			fmt.Fprintf(c.env.Stdout, "%s/%s: %s\n", m.Runtime.Backend, m.Runtime.ID, m.Message)
		}
		return err
	})
}

var touchCmd = spec{name: "touch", args: "ID...", summary: "record activity now", sources: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		return func(ctx context.Context, c *command, args []string) error {
			return c.mark(ctx, "touch", args, ops.MarkRequest{Touch: true})
		}
	}}

var pinCmd = spec{name: "pin", args: "ID...", summary: "never touch these runtimes until unpinned", sources: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		reason := fs.String("reason", "", "why, in `TEXT` (shown by ls and in plans)")
		return func(ctx context.Context, c *command, args []string) error {
			return c.mark(ctx, "pin", args, ops.MarkRequest{PinSet: true, Pin: *reason})
		}
	}}

var unpinCmd = spec{name: "unpin", args: "ID...", summary: "undo pin", sources: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		return func(ctx context.Context, c *command, args []string) error {
			return c.mark(ctx, "unpin", args, ops.MarkRequest{Unpin: true})
		}
	}}

var leaseCmd = spec{name: "lease", args: "ID... --for DURATION", summary: "do not touch these runtimes until then (never past their lifetime cap)", sources: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		forDur := fs.String("for", "", "how long: a `DURATION` such as 2h or 3d (required)")
		return func(ctx context.Context, c *command, args []string) error {
			if *forDur == "" {
				return usagef("lease: --for DURATION is required")
			}
			d, err := config.ParseDuration(*forDur)
			if err != nil || d <= 0 {
				return usagef("lease: --for %q: not a positive duration", *forDur)
			}
			return c.mark(ctx, "lease", args, ops.MarkRequest{LeaseFor: time.Duration(d)})
		}
	}}

var retentionCmd = spec{name: "retention", args: "ID... (--days N | --default)", summary: "the runtimes' own retention (--days 0: never archived)", sources: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		days := fs.Int("days", -1, "retention in `N` days (0: never archive)")
		def := fs.Bool("default", false, "back to the source's retention")
		return func(ctx context.Context, c *command, args []string) error {
			switch {
			case *def && *days >= 0:
				return usagef("retention: give --days N or --default, not both")
			case *def:
				return c.mark(ctx, "retention", args, ops.MarkRequest{RetentionDefault: true})
			case *days >= 0:
				d := time.Duration(*days) * 24 * time.Hour
				return c.mark(ctx, "retention", args, ops.MarkRequest{Retention: &d})
			}
			return usagef("retention: give --days N or --default")
		}
	}}

var deleteCmd = spec{name: "delete", args: "ID...", summary: "remove these runtimes now (archived first when they hold unsaved work)", sources: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, c *command, args []string) error {
			if err := needIDs("delete", args); err != nil {
				return err
			}
			return c.runPass(ctx, ops.ApplyRequest{Runtimes: refsOf(args), Delete: true, Trigger: "cli"}, *asJSON)
		}
	}}

var restoreCmd = spec{name: "restore", args: "ID", summary: "bring an archived runtime back (its newest archive by default)", sources: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		to := fs.String("to", "", "restore a copy into the folder `DIR` (made if missing), every backend alike: each of its folders as "+
			"DIR/<its own name> (a run folder DIR/<id>, a worktree DIR/<its folder>, locked); the runtime stays archived")
		archiveID := fs.String("archive", "", "which `ARCHIVE_ID` (default: the newest)")
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, c *command, args []string) error {
			if len(args) != 1 {
				return usagef("restore: give one runtime (an ID, or its former path)")
			}
			target := *to
			if target != "" {
				target = absPath(target)
			}
			return c.with(ctx, func(s ops.Service) error {
				r, err := s.Restore(ctx, ops.RestoreRequest{Runtime: refOf(args[0]), ArchiveID: *archiveID, To: target})
				if err != nil {
					return err
				}
				if *asJSON {
					return printJSON(c.env.Stdout, r)
				}
				if r.Command != "" {
					fmt.Fprintf(c.env.Stdout, "%s/%s is not restored by reclaimer; start it from archive %s with:\n  %s\n", r.Backend, r.ID, r.ArchiveID, r.Command)
					return nil
				}
				fmt.Fprintf(c.env.Stdout, "restored %s/%s from archive %s into %s\n", r.Backend, r.ID, r.ArchiveID, r.Path)
				return nil
			})
		}
	}}

var archivesCmd = spec{name: "archives", args: "[ID | prune --older-than DURATION]", summary: "the archives, one archive or one runtime's in full; prune removes old ones (journaled)", sources: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		olderThan := fs.String("older-than", "", "prune: remove archives created longer ago than this `DURATION` (\"30d\")")
		dryRun := fs.Bool("dry-run", false, "prune: only show what would be removed")
		return func(ctx context.Context, c *command, args []string) error {
			if len(args) > 0 && args[0] == "prune" {
				return c.prune(ctx, args[1:], *olderThan, *dryRun, *asJSON)
			}
			if *olderThan != "" || *dryRun {
				return usagef("archives: --older-than and --dry-run go with archives prune")
			}
			if len(args) > 1 {
				return usagef("archives: one ID at most")
			}
			name := ""
			if len(args) == 1 {
				name = refOf(args[0]).Name
			}
			return c.with(ctx, func(s ops.Service) error {
				list, err := s.Archives(ctx, name)
				if err != nil {
					return err
				}
				if len(list) == 1 && list[0].ID == name {
					if *asJSON {
						return printJSON(c.env.Stdout, list[0])
					}
					printArchive(c.env.Stdout, list[0])
					return nil
				}
				if *asJSON {
					return printJSON(c.env.Stdout, list)
				}
				printArchives(c.env.Stdout, list)
				return nil
			})
		}
	}}

func (c *command) prune(ctx context.Context, args []string, olderThan string, dryRun, asJSON bool) error {
	if len(args) > 0 {
		return usagef("archives prune: unexpected %q", args[0])
	}
	if olderThan == "" {
		return usagef("archives prune: --older-than DURATION is required")
	}
	d, err := config.ParseDuration(olderThan)
	if err != nil || d <= 0 {
		return usagef("archives prune: --older-than %q: not a positive duration", olderThan)
	}
	return c.with(ctx, func(s ops.Service) error {
		p, err := s.Prune(ctx, ops.PruneRequest{OlderThan: time.Duration(d), OlderThanText: olderThan, DryRun: dryRun})
		if err != nil {
			return err
		}
		switch {
		case dryRun && asJSON:
			return printJSON(c.env.Stdout, p.Plan)
		case dryRun:
			printPrunePlan(c.env.Stdout, p.Plan)
			return nil
		}
		c.failed = p.Applied.Failed()
		if asJSON {
			return printJSON(c.env.Stdout, p.Applied)
		}
		printPruned(c.env.Stdout, p.Applied)
		return nil
	})
}

var logCmd = spec{name: "log", summary: "the journal of actions, newest first", sources: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		limit := fs.Int("limit", 50, "how many entries (`N`), newest first")
		runtime := fs.String("runtime", "", "only this runtime `ID`'s entries")
		planID := fs.String("plan", "", "only this `PLAN_ID`'s entries")
		return func(ctx context.Context, c *command, args []string) error {
			if err := noArgs("log", args); err != nil {
				return err
			}
			q := ops.JournalQuery{Limit: *limit, PlanID: *planID}
			if *runtime != "" {
				r := refOf(*runtime)
				q.Runtime = &r
			}
			return c.with(ctx, func(s ops.Service) error {
				j, err := s.Journal(ctx, q)
				if err != nil {
					return err
				}
				if *asJSON {
					return printJSON(c.env.Stdout, j.Entries)
				}
				return printJournal(c.env.Stdout, j.Entries)
			})
		}
	}}

var nativeCmd = spec{name: "native", args: "plan | sync", summary: "remote sandboxes: the providers' own timers, what the policy wants, the drift; sync writes it", sources: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, c *command, args []string) error {
			if len(args) != 1 || (args[0] != "plan" && args[0] != "sync") {
				return usagef("native: want plan or sync")
			}
			return c.with(ctx, func(s ops.Service) error {
				rep, err := s.NativeReport(ctx, args[0] == "sync")
				if err != nil {
					return err
				}
				c.failed = rep.Failed > 0 || len(rep.Problems) > 0
				for _, p := range rep.Problems {
					fmt.Fprintf(c.env.Stderr, "reclaimer: problem: %s\n", p)
				}
				if *asJSON {
					return printJSON(c.env.Stdout, rep)
				}
				printNative(c.env.Stdout, rep)
				return nil
			})
		}
	}}

var serveCmd = spec{name: "serve", summary: "the daemon: passes every [server] interval, and the HTTP API", local: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		return func(ctx context.Context, c *command, args []string) error {
			if err := noArgs("serve", args); err != nil {
				return err
			}
			if c.g.server != "" {
				return usagef("serve runs the daemon here; --server asks one")
			}
			return server.Run(ctx, server.Options{ConfigPath: c.g.config, Version: versionText(c.env), Logs: c.env.Stderr, Signals: true})
		}
	}}

var versionCmd = spec{name: "version", summary: "the module version and commit", local: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		return func(ctx context.Context, c *command, args []string) error {
			fmt.Fprintln(c.env.Stdout, versionText(c.env))
			return nil
		}
	}}
