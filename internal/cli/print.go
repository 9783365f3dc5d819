package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/humanize"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/views"
)

// The printers of the views: the text the CLI shows for the values its
// --json prints (and the API answers). Every cell is one line.

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// cell is a table cell: one line, "-" when empty, at most max runes (0:
// no bound), cut with an ellipsis.
func cell(s string, max int) string {
	s = plan.OneLine(s)
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		return string(r[:max-1]) + "…"
	}
	return s
}

func printPlan(w io.Writer, p *views.Plan) {
	fmt.Fprintf(w, "plan %s (%s)\n", p.ID, p.CreatedAt.Local().Format(time.RFC3339))
	for _, u := range p.Usage {
		marks := "no disk budget"
		if u.High > 0 {
			marks = fmt.Sprintf("high %s, low %s", policy.Percent(u.High), policy.Percent(u.Low))
		}
		fmt.Fprintf(w, "  %s: %.1f%% used (%s)\n", u.Path, u.Fraction*100, marks)
	}
	fmt.Fprintf(w, "  seen: %s\n", seenText(p.Seen))
	if len(p.Actions) == 0 {
		fmt.Fprintln(w, "\nnothing to do")
	} else {
		fmt.Fprintln(w)
		tw := newTable(w)
		fmt.Fprintln(tw, "RUNTIME\tBACKEND\tSTEP\tFREES\tREASON")
		for _, a := range p.Actions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Runtime, a.Backend, a.Step, sizeText(a.Bytes), cell(a.Reason, 0))
			for _, path := range a.Paths {
				fmt.Fprintf(tw, "\t\t\t\t  %s\n", path)
			}
			for _, n := range a.NotKept {
				fmt.Fprintf(tw, "\t\t\t\t  not kept: %s\n", n)
			}
		}
		tw.Flush()
		fmt.Fprintf(w, "\n%d %s would free %s\n", len(p.Actions), plural(len(p.Actions), "action", "actions"), sizeText(p.Bytes()))
	}
	for _, n := range p.Scheduled {
		fmt.Fprintf(w, "would announce: %s of %s/%s at %s (%s)\n", n.Step, n.Backend, n.Runtime, n.Due.Local().Format(time.RFC3339), cell(n.Reason, 0))
		for _, k := range n.NotKept {
			fmt.Fprintf(w, "  not kept: %s\n", k)
		}
	}
	for _, n := range p.Canceled {
		fmt.Fprintf(w, "would cancel: %s of %s/%s (%s)\n", n.Step, n.Backend, n.Runtime, cell(n.Reason, 0))
	}
	for _, s := range p.Skipped {
		step := ""
		if s.Step != "" {
			step = " " + string(s.Step)
		}
		fmt.Fprintf(w, "skipped%s: %s/%s: %s\n", step, s.Backend, s.Runtime, cell(s.Reason, 0))
	}
	for _, m := range p.Messages {
		fmt.Fprintln(w, plan.OneLine(m))
	}
	fmt.Fprintf(w, "\n%s\n", p.Note)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// printApplied prints the results; a removal also says which archive it
// wrote and what that archive does not keep.
func printApplied(w io.Writer, a *views.Applied) {
	for _, m := range a.Messages {
		fmt.Fprintln(w, plan.OneLine(m))
	}
	if len(a.Results) == 0 {
		fmt.Fprintln(w, "nothing to do")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "RUNTIME\tBACKEND\tSTEP\tOUTCOME\tFREED\tREASON")
	for _, r := range a.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Runtime, r.Backend, r.Step, r.Outcome, sizeText(r.FreedBytes), cell(r.Reason, 0))
	}
	tw.Flush()
	for _, r := range a.Results {
		if r.ArchiveID == "" {
			continue
		}
		fmt.Fprintf(w, "%s/%s: archived as %s (reclaimer restore %s/%s --archive %s)\n", r.Backend, r.Runtime, r.ArchiveID,
			r.Backend, r.Runtime, r.ArchiveID)
		for _, k := range r.Kept {
			fmt.Fprintf(w, "  kept: %s\n", k)
		}
		for _, n := range r.NotKept {
			fmt.Fprintf(w, "  not kept: %s\n", strings.Replace(n, " NOT kept", "", 1))
		}
	}
	fmt.Fprintf(w, "freed %s\n", sizeText(a.FreedBytes))
}

// printRuntimes prints ls's table: within 120 columns, or every column
// (wide).
func printRuntimes(w io.Writer, list []views.Runtime, wide bool, now time.Time) error {
	tw := newTable(w)
	if wide {
		fmt.Fprintln(tw, "ID\tBACKEND\tSOURCE\tSTATE\tLAST ACTIVE\tFROM\tSIZE\tUNSAVED\tPROTECTED\tLEASE UNTIL\tRETENTION\tIDLE SUSPEND\tSCHEDULED\tARCHIVE\tPATH")
	} else {
		fmt.Fprintln(tw, "ID\tBACKEND\tSTATE\tLAST ACTIVE\tSIZE\tUNSAVED\tPROTECTED\tSCHEDULED")
	}
	for _, r := range list {
		state := r.State
		if r.Busy != "" {
			state += " (busy)"
		}
		protected := ""
		if r.Protection != nil {
			protected = string(r.Protection.Code)
			if wide {
				protected = r.Protection.Reason
			}
		}
		sched := ""
		if r.ScheduledStep != "" {
			sched = r.ScheduledStep + " " + until(r.ScheduledDue, now)
			if wide {
				sched = r.ScheduledStep + " at " + r.ScheduledDue.Local().Format("2006-01-02 15:04")
			}
		}
		if !wide {
			unsaved := ""
			if r.Unsaved != "" {
				unsaved = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(r.ID, 28), cell(r.Backend, 8), cell(state, 16),
				ago(r.LastActivity, now), sizeText(r.SizeBytes), cell(unsaved, 3), cell(protected, 12), cell(sched, 16))
			continue
		}
		retention := r.Retention
		if r.RetentionSet {
			retention += " (own)"
		}
		lease := ""
		if !r.LeaseUntil.IsZero() {
			lease = r.LeaseUntil.Local().Format("2006-01-02 15:04")
		}
		source := r.SourceLabel
		if source == "" {
			source = r.Source
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Backend, cell(source, 0), state,
			ago(r.LastActivity, now), cell(r.LastActivityFrom, 0), sizeText(r.SizeBytes), cell(unsavedText(r), 0), cell(protected, 0),
			cell(lease, 0), retention, cell(r.IdleSuspend, 0), cell(sched, 0), cell(r.ArchiveID, 0), cell(r.Path, 0))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !wide {
		// The narrow table has no room for it: say once per backend
		// that idle suspend is not offered, where it is not.
		said := map[string]bool{}
		for _, r := range list {
			if strings.HasPrefix(r.IdleSuspend, "not offered") && !said[r.Backend] {
				said[r.Backend] = true
				fmt.Fprintf(w, "note: idle suspend is %s\n", r.IdleSuspend)
			}
		}
	}
	return nil
}

// unsavedText is the wide listing's unsaved work, with what of it is
// already merged: "1 untracked file; its commits merged into main".
func unsavedText(r views.Runtime) string {
	switch {
	case r.Merged != "" && r.Unsaved != "":
		return r.Unsaved + "; its commits " + r.Merged
	case r.Merged != "":
		return "none: its commits " + r.Merged
	}
	return r.Unsaved
}

// printStatus prints the filesystems, the sources, the runtimes, what is
// reclaimable and scheduled, the last and next pass, the last action.
func printStatus(out io.Writer, st *views.Status) {
	if len(st.Filesystems) > 0 {
		tw := newTable(out)
		fmt.Fprintln(tw, "FILESYSTEM\tUSED\tFREE\tUSE%\tHIGH\tLOW\tRUNTIMES\tRECLAIMABLE NOW")
		for _, f := range st.Filesystems {
			high, low := "-", "-"
			if f.High > 0 {
				high, low = policy.Percent(f.High), policy.Percent(f.Low)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f%%\t%s\t%s\t%d\t%s\n", f.Path, sizeText(f.UsedBytes), sizeText(f.AvailBytes), f.Fraction*100,
				high, low, f.Runtimes, reclaimableText(f.ReclaimableBytesByStep))
		}
		tw.Flush()
	}
	for _, f := range st.Filesystems {
		if f.Forecast != nil {
			fmt.Fprintf(out, "forecast %s: %s\n", f.Path, f.Forecast.Text)
		}
	}
	for _, s := range st.Sources {
		state := fmt.Sprintf("%d %s", s.Runtimes, plural(s.Runtimes, "runtime", "runtimes"))
		if !s.Listed {
			state = "could not be listed (see problems)"
		}
		fmt.Fprintf(out, "source %s: %s\n", s.Label, state)
	}
	fmt.Fprintf(out, "runtimes: %s\n", countsText(st.RuntimesByState))
	fmt.Fprintf(out, "by backend: %s\n", countsText(st.RuntimesByBackend))
	fmt.Fprintf(out, "reclaimable now: %s\n", reclaimableText(st.ReclaimableBytesByStep))
	for _, n := range st.Scheduled {
		fmt.Fprintf(out, "scheduled: %s of %s/%s at %s\n", n.Step, n.Backend, n.Runtime, n.Due.Local().Format(time.RFC3339))
	}
	if lp := st.LastPass; lp != nil {
		fmt.Fprintf(out, "last pass: %s (%s), %d actions, freed %s, %d failed\n", lp.FinishedAt.Local().Format(time.RFC3339),
			lp.Trigger, lp.Actions, sizeText(lp.FreedBytes), lp.Failed)
	}
	if !st.NextPassAt.IsZero() {
		fmt.Fprintf(out, "next pass: %s\n", st.NextPassAt.Local().Format(time.RFC3339))
	}
	if e := st.LastAction; e != nil {
		outcome := "unfinished"
		if e.Outcome != nil {
			outcome = e.Outcome.Result
		}
		fmt.Fprintf(out, "last action: %s %s of %s/%s, %s\n", e.At.Local().Format(time.RFC3339), e.Step, e.Backend, e.Runtime, outcome)
	}
	if f := st.Fleet; f != nil {
		printFleet(out, f)
	}
}

// printFleet shows the replicas of a fleet and who leads.
func printFleet(out io.Writer, f *views.Fleet) {
	switch {
	case f.Leader == "":
		fmt.Fprintf(out, "leader: none right now (an election is due); this is %s\n", f.Replica)
	default:
		me := ""
		if f.Leading {
			me = " (this replica)"
		}
		fmt.Fprintf(out, "leader: %s%s since %s, generation %d, lease until %s\n", f.Leader, me,
			f.LeaderSince.Local().Format(time.RFC3339), f.Generation, f.LeaseExpiresAt.Local().Format(time.RFC3339))
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "REPLICA\tVERSION\tLAST HEARTBEAT\tSTARTED\tAPI\tROLE")
	for _, r := range f.Replicas {
		role := "follower"
		switch {
		case r.Leader:
			role = "leader"
		case !r.Alive:
			role = "silent"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Version, r.LastHeartbeat.Local().Format(time.RFC3339),
			r.StartedAt.Local().Format(time.RFC3339), r.API, role)
	}
	tw.Flush()
}

func reclaimableText(by map[string]int64) string {
	var parts []string
	for _, step := range backend.Steps {
		if b := by[string(step)]; b > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", step, sizeText(b)))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func countsText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

func printJournal(w io.Writer, entries []views.JournalEntry) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "TIME\tRUNTIME\tSTEP\tOUTCOME\tFREED\tREASON")
	for _, e := range entries {
		outcome, freed, reason := "unfinished", "-", e.Reason
		if e.Outcome != nil {
			outcome, freed = e.Outcome.Result, sizeText(e.Outcome.FreedBytes)
			if e.Outcome.Reason != "" {
				reason = e.Outcome.Reason
			}
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\n", e.At.Local().Format("2006-01-02 15:04:05"),
			e.Backend, e.Runtime, e.Step, outcome, freed, cell(reason, 0))
	}
	return tw.Flush()
}

func printArchives(w io.Writer, list []views.Archive) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no archives")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ARCHIVE\tRUNTIME\tCREATED\tFORMATS\tSIZE\tSURVIVES")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\n", e.ID, e.Backend, e.Runtime, e.CreatedAt.Local().Format("2006-01-02 15:04"),
			strings.Join(e.Formats, "+"), sizeText(e.Bytes), cell(strings.Join(e.Survives, "; "), 0))
	}
	tw.Flush()
}

func printArchive(w io.Writer, e views.Archive) {
	fmt.Fprintf(w, "archive   %s\nruntime   %s/%s\nsource    %s\ncreated   %s\nlocation  %s\nformats   %s\nsize      %s\n",
		e.ID, e.Backend, e.Runtime, cell(e.Source, 0), e.CreatedAt.Local().Format(time.RFC3339), e.Location, strings.Join(e.Formats, ", "), sizeText(e.Bytes))
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
			fmt.Fprintf(w, "  - %s (%s; lock files: %s)\n", p, kept, cell(strings.Join(d.LockFiles, ", "), 0))
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

func printPrunePlan(w io.Writer, p *views.PrunePlan) {
	fmt.Fprintf(w, "prune plan %s: archives created before %s (older than %s)\n", p.ID, p.Cutoff.Local().Format(time.RFC3339), p.OlderThan)
	if len(p.Actions) == 0 {
		fmt.Fprintln(w, "\nnothing to prune")
	} else {
		fmt.Fprintln(w)
		tw := newTable(w)
		fmt.Fprintln(tw, "ARCHIVE\tRUNTIME\tCREATED\tSIZE\tLOCATION")
		for _, a := range p.Actions {
			fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\n", a.ArchiveID, a.Backend, a.Runtime, a.CreatedAt.Local().Format("2006-01-02 15:04"),
				sizeText(a.Bytes), a.Location)
		}
		tw.Flush()
		fmt.Fprintf(w, "\n%d %s would free %s\n", len(p.Actions), plural(len(p.Actions), "archive", "archives"), sizeText(p.Bytes()))
	}
	for _, sk := range p.Skipped {
		fmt.Fprintf(w, "kept: %s of %s/%s: %s\n", sk.ArchiveID, sk.Backend, sk.Runtime, cell(sk.Reason, 0))
	}
	fmt.Fprintf(w, "\n%s\n", p.Note)
}

func printPruned(w io.Writer, res *views.PruneApplied) {
	if len(res.Results) == 0 {
		fmt.Fprintln(w, "nothing to prune")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ARCHIVE\tRUNTIME\tOUTCOME\tFREED\tREASON")
	for _, r := range res.Results {
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\n", r.ArchiveID, r.Backend, r.Runtime, r.Outcome, sizeText(r.FreedBytes), cell(r.Reason, 0))
	}
	tw.Flush()
	fmt.Fprintf(w, "freed %s\n", sizeText(res.FreedBytes))
}

func printNative(w io.Writer, rep *views.NativeReport) {
	if len(rep.Rows) == 0 && len(rep.Problems) == 0 {
		fmt.Fprintln(w, "no runtime with native settings")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "RUNTIME\tBACKEND\tSTATE\tSETTING\tPROVIDER\tPOLICY\tDRIFT\tACTION")
	for _, r := range rep.Rows {
		if len(r.Settings) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t-\n", r.Runtime, r.Backend, r.State)
		}
		for _, st := range r.Settings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Runtime, r.Backend, r.State, st.Name, st.Provider, st.Policy,
				cell(st.Drift, 0), cell(st.Action, 0))
		}
		var notes []string
		if r.Touch {
			verb := "would restart"
			if rep.Applied && r.Error == "" {
				verb = "restarted"
			}
			notes = append(notes, verb+" the provider's idle timer")
		}
		notes = append(notes, r.Notes...)
		if r.Error != "" {
			notes = append(notes, "error: "+r.Error)
		}
		if len(notes) > 0 {
			fmt.Fprintf(tw, "\t\t\t  note: %s\n", plan.OneLine(strings.Join(notes, "; ")))
		}
	}
	tw.Flush()
	if rep.Applied {
		fmt.Fprintf(w, "\n%d runtimes changed, %d failed, %d drifted before the sync\n", rep.Written, rep.Failed, rep.Drifted)
		return
	}
	fmt.Fprintf(w, "\n%d runtimes drift from the policy; \"reclaimer native sync\" writes what the providers allow.\n", rep.Drifted)
	fmt.Fprintln(w, "This is a preview: providers and users may change settings before the sync.")
}

func sizeText(n int64) string {
	if n < 0 {
		return "-"
	}
	return humanize.Bytes(n)
}

func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func until(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d <= 0:
		return "due"
	case d < time.Hour:
		return fmt.Sprintf("in %dm", int(d.Minutes())+1)
	case d < 48*time.Hour:
		return fmt.Sprintf("in %dh", int(d.Hours()))
	}
	return fmt.Sprintf("in %dd", int(d.Hours()/24))
}

// seenText says what a pass observed: "worktree 3 (2 stopped, 1 running),
// dir 10 (10 stopped)", or "no runtimes".
func seenText(seen map[string]map[string]int) string {
	var parts []string
	for _, b := range slices.Sorted(maps.Keys(seen)) {
		total := 0
		var states []string
		for _, st := range slices.Sorted(maps.Keys(seen[b])) {
			total += seen[b][st]
			states = append(states, fmt.Sprintf("%d %s", seen[b][st], st))
		}
		parts = append(parts, fmt.Sprintf("%s %d (%s)", b, total, strings.Join(states, ", ")))
	}
	if len(parts) == 0 {
		return "no runtimes"
	}
	return strings.Join(parts, ", ")
}

// printExplain prints an explanation: the runtime, what was observed of
// it, each policy's verdict in order, the next pass and the next step.
func printExplain(out io.Writer, ex *views.Explain) {
	rt, o := ex.Runtime, ex.Observation
	label := rt.SourceLabel
	if label == "" {
		label = rt.Source
	}
	fmt.Fprintf(out, "runtime %s/%s (source %s): %s\n", rt.Backend, rt.ID, label, o.State)
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Local().Format(time.RFC3339)
	}
	if !o.Listed {
		fmt.Fprintln(out, "not listed by its source in this pass: no policy looked at it")
	}
	activity := "none known"
	if !o.LastActivity.IsZero() {
		activity = when(o.LastActivity) + " (" + o.LastActivityFrom + ")"
	}
	fmt.Fprintf(out, "observed %s: last activity %s", when(ex.ObservedAt), activity)
	if o.SizeBytes >= 0 {
		fmt.Fprintf(out, ", size %s", sizeText(o.SizeBytes))
	}
	fmt.Fprintln(out)
	var frees []string
	for _, step := range backend.Steps {
		if n, ok := o.BytesByStep[string(step)]; ok {
			frees = append(frees, fmt.Sprintf("%s %s", step, sizeText(n)))
		}
	}
	if len(frees) > 0 {
		fmt.Fprintf(out, "each step would free: %s\n", strings.Join(frees, ", "))
	}
	if o.Filesystem != "" {
		fmt.Fprintf(out, "filesystem: %s\n", o.Filesystem)
	}
	if o.Unsaved != "" {
		fmt.Fprintf(out, "unsaved work: %s\n", o.Unsaved)
	}
	if o.Busy != "" {
		fmt.Fprintf(out, "busy: %s\n", o.Busy)
	}
	if ex.Protection != nil {
		fmt.Fprintf(out, "protected: %s\n", ex.Protection.Reason)
	}
	if len(ex.Policies) > 0 {
		tw := newTable(out)
		fmt.Fprintln(tw, "POLICY\tSTEP\tVERDICT\tDUE\tWHY")
		for _, v := range ex.Policies {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s: %s\n", v.Policy, v.Step, v.Outcome, when(v.Due), v.Code, plan.OneLine(v.Reason))
		}
		tw.Flush()
	} else {
		fmt.Fprintln(out, "no policy is in force for it")
	}
	if len(ex.PoliciesOff) > 0 {
		off := make([]string, len(ex.PoliciesOff))
		for i, c := range ex.PoliciesOff {
			off[i] = string(c)
		}
		fmt.Fprintf(out, "not in force: %s\n", strings.Join(off, ", "))
	}
	next := "next pass"
	if !ex.NextPass.At.IsZero() {
		next += " (" + when(ex.NextPass.At) + ")"
	}
	fmt.Fprintf(out, "%s: %s\n", next, ex.NextPass.Summary)
	if s := ex.NextStep; s != nil {
		fmt.Fprintf(out, "next step if nothing changes: %s at %s (%s: %s)\n", s.Step, when(s.Due), s.Policy, plan.OneLine(s.Reason))
	} else {
		fmt.Fprintln(out, "next step if nothing changes: none")
	}
	fmt.Fprintf(out, "note: %s\n", ex.Note)
}
