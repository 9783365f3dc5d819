package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/catalog"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/sink"
)

// sinkFor opens the sink holding a recorded archive (catalog.SinkOf).
func (s *session) sinkFor(a ledger.Archive) (sink.Sink, error) { return catalog.SinkOf(s.cfg, a) }

func (c *command) archives(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "prune" {
		return c.prune(ctx, args[1:])
	}
	fs := newFlags("archives", c.env)
	asJSON := fs.Bool("json", false, "print JSON")
	var src sourceFlags
	src.register(fs)
	id, rest := splitID(args)
	if err := parse(fs, rest); err != nil {
		return err
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return usagef("archives: one ID at most")
	}
	s, err := c.open(ctx, &src)
	if err != nil {
		return err
	}
	defer s.close()
	if id != "" {
		if a, err := s.store.Archive(ctx, id); err == nil {
			e := catalog.EntryOf(a)
			if *asJSON {
				return printJSON(c.env.Stdout, e)
			}
			printArchive(c, e)
			return nil
		} else if !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
	}
	all, err := s.store.ListArchives(ctx, ledger.Key{})
	if err != nil {
		return err
	}
	entries := []catalog.Entry{}
	for _, a := range all {
		if id == "" || a.Key.ID == id || a.Key.String() == id {
			entries = append(entries, catalog.EntryOf(a))
		}
	}
	if id != "" && len(entries) == 0 {
		return usagef("archives: %q is neither an archive ID nor a runtime with archives: %w", id, backend.ErrNotFound)
	}
	if *asJSON {
		return printJSON(c.env.Stdout, entries)
	}
	if len(entries) == 0 {
		fmt.Fprintln(c.env.Stdout, "no archives")
		return nil
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ARCHIVE\tRUNTIME\tCREATED\tFORMATS\tSIZE\tSURVIVES")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\n", e.ID, e.Backend, e.Runtime, e.CreatedAt.Local().Format("2006-01-02 15:04"),
			strings.Join(e.Formats, "+"), sizeText(e.Bytes), orDash(strings.Join(e.Survives, "; ")))
	}
	return tw.Flush()
}

func printArchive(c *command, e catalog.Entry) {
	w := c.env.Stdout
	fmt.Fprintf(w, "archive   %s\nruntime   %s/%s\ncreated   %s\nlocation  %s\nformats   %s\nsize      %s\n",
		e.ID, e.Backend, e.Runtime, e.CreatedAt.Local().Format(time.RFC3339), e.Location, strings.Join(e.Formats, ", "), sizeText(e.Bytes))
	for _, kv := range [][2]string{{"conversations", strings.Join(e.Conversations, ", ")}, {"branch", e.Branch},
		{"head", e.Head}, {"base", e.Base}, {"remote", e.Remote}} {
		if kv[1] != "" {
			fmt.Fprintf(w, "%-9s %s\n", kv[0], kv[1])
		}
	}
	fmt.Fprintln(w, "\nsurvives:")
	for _, s := range e.Survives {
		fmt.Fprintf(w, "  - %s\n", s)
	}
	if len(e.Dependencies) > 0 {
		fmt.Fprintln(w, "\ndependencies (rebuildable):")
		for _, d := range e.Dependencies {
			p := d.Path
			if d.Folder != "" {
				p = d.Folder + "/" + d.Path
			}
			kept := "not kept"
			if d.Kept {
				kept = "kept"
			}
			fmt.Fprintf(w, "  - %s (%s; lock files: %s)\n", p, kept, orDash(strings.Join(d.LockFiles, ", ")))
		}
	}
	for _, x := range e.Excluded {
		fmt.Fprintf(w, "left out: %s\n", x)
	}
	fmt.Fprintln(w, "\nobjects:")
	for _, o := range e.Objects {
		fmt.Fprintf(w, "  %s  %s  sha256:%s\n", o.Name, sizeText(o.Bytes), o.SHA256)
	}
	fmt.Fprintf(w, "\nrestore with: %s\n", e.Restore)
}

func (c *command) prune(ctx context.Context, args []string) error {
	fs := newFlags("archives prune", c.env)
	olderThan := fs.String("older-than", "", "remove archives created longer ago than this (\"30d\")")
	dryRun := fs.Bool("dry-run", false, "only show what would be removed")
	asJSON := fs.Bool("json", false, "print JSON")
	var src sourceFlags
	src.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("archives prune: unexpected %q", fs.Arg(0))
	}
	if *olderThan == "" {
		return usagef("archives prune: --older-than DURATION is required")
	}
	d, err := config.ParseDuration(*olderThan)
	if err != nil || d <= 0 {
		return usagef("archives prune: --older-than %q: not a positive duration", *olderThan)
	}
	s, err := c.open(ctx, &src)
	if err != nil {
		return err
	}
	defer s.close()
	p, err := catalog.PlanPrune(ctx, s.store, time.Duration(d), time.Now())
	if err != nil {
		return err
	}
	p.OlderThan = *olderThan
	if *dryRun {
		if *asJSON {
			return printJSON(c.env.Stdout, p)
		}
		printPrunePlan(c, p)
		return nil
	}
	res, err := catalog.ApplyPrune(ctx, s.store, s.sinkFor, p, time.Now)
	if err != nil {
		return err
	}
	c.failed = res.Failed()
	if *asJSON {
		return printJSON(c.env.Stdout, res)
	}
	if len(res.Results) == 0 {
		fmt.Fprintln(c.env.Stdout, "nothing to prune")
		return nil
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ARCHIVE\tRUNTIME\tOUTCOME\tFREED\tREASON")
	for _, r := range res.Results {
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\n", r.ArchiveID, r.Backend, r.Runtime, r.Outcome, sizeText(r.FreedBytes), r.Reason)
	}
	tw.Flush()
	fmt.Fprintf(c.env.Stdout, "freed %s\n", sizeText(res.FreedBytes))
	return nil
}

func printPrunePlan(c *command, p *catalog.PrunePlan) {
	w := c.env.Stdout
	fmt.Fprintf(w, "prune plan %s: archives created before %s (older than %s)\n", p.ID, p.Cutoff.Local().Format(time.RFC3339), p.OlderThan)
	if len(p.Actions) == 0 {
		fmt.Fprintln(w, "\nnothing to prune")
	} else {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ARCHIVE\tRUNTIME\tCREATED\tSIZE\tLOCATION")
		for _, a := range p.Actions {
			fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\n", a.ArchiveID, a.Backend, a.Runtime, a.CreatedAt.Local().Format("2006-01-02 15:04"),
				sizeText(a.Bytes), a.Location)
		}
		tw.Flush()
		noun := "archives"
		if len(p.Actions) == 1 {
			noun = "archive"
		}
		fmt.Fprintf(w, "\n%d %s would free %s\n", len(p.Actions), noun, sizeText(p.Bytes()))
	}
	for _, sk := range p.Skipped {
		fmt.Fprintf(w, "kept: %s of %s/%s: %s\n", sk.ArchiveID, sk.Backend, sk.Runtime, sk.Reason)
	}
	fmt.Fprintf(w, "\n%s\n", p.Note)
}

// stagingDir is a private folder for the temporary files of a restore.
func (s *session) stagingDir() (string, error) {
	if err := os.MkdirAll(s.cfg.Archive.Dir, 0o700); err != nil {
		return "", err
	}
	return os.MkdirTemp(s.cfg.Archive.Dir, ".staging-")
}
