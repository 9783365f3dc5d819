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

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/plan"
)

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printPlan(w io.Writer, p *plan.Plan) {
	fmt.Fprintf(w, "plan %s (%s)\n", p.ID, p.CreatedAt.Local().Format(time.RFC3339))
	for _, u := range p.Usage {
		marks := "no disk budget"
		if u.High > 0 {
			marks = fmt.Sprintf("high %.0f%%, low %.0f%%", u.High*100, u.Low*100)
		}
		fmt.Fprintf(w, "  %s: %.1f%% used (%s)\n", u.Path, u.Fraction*100, marks)
	}
	fmt.Fprintf(w, "  seen: %s\n", seenText(p.Seen))
	if len(p.Actions) == 0 {
		fmt.Fprintln(w, "\nnothing to do")
	} else {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RUNTIME\tBACKEND\tSTEP\tFREES\tREASON")
		for _, a := range p.Actions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Runtime, a.Backend, a.Step, sizeText(a.Bytes), a.Reason)
			for _, path := range a.Paths {
				fmt.Fprintf(tw, "\t\t\t\t  %s\n", path)
			}
		}
		tw.Flush()
		noun := "actions"
		if len(p.Actions) == 1 {
			noun = "action"
		}
		fmt.Fprintf(w, "\n%d %s would free %s\n", len(p.Actions), noun, sizeText(p.Bytes()))
	}
	for _, n := range p.Scheduled {
		fmt.Fprintf(w, "would announce: %s of %s at %s (%s)\n", n.Step, n.Runtime, n.Due.Local().Format(time.RFC3339), n.Reason)
	}
	for _, n := range p.Canceled {
		fmt.Fprintf(w, "would cancel: %s of %s (%s)\n", n.Step, n.Runtime, n.Reason)
	}
	for _, s := range p.Skipped {
		step := ""
		if s.Step != "" {
			step = " " + string(s.Step)
		}
		fmt.Fprintf(w, "skipped%s: %s: %s\n", step, s.Runtime, s.Reason)
	}
	for _, m := range p.Messages {
		fmt.Fprintln(w, m)
	}
	fmt.Fprintf(w, "\n%s\n", p.Note)
}

func printApplied(w io.Writer, a *plan.Applied) {
	for _, m := range a.Messages {
		fmt.Fprintln(w, m)
	}
	if len(a.Results) == 0 {
		fmt.Fprintln(w, "nothing to do")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNTIME\tSTEP\tOUTCOME\tFREED\tREASON")
	for _, r := range a.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Runtime, r.Step, r.Outcome, sizeText(r.FreedBytes), r.Reason)
	}
	tw.Flush()
	fmt.Fprintf(w, "freed %s\n", sizeText(a.FreedBytes))
}

func sizeText(n int64) string {
	if n < 0 {
		return "-"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func durationText(d time.Duration) string {
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

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
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

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

func timeOrDash(t time.Time) string {
	if t.IsZero() || t.Before(time.Now()) {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04")
}

// printStatusHead prints what local and daemon status share: usage,
// runtimes, what is reclaimable now and what is scheduled.
func printStatusHead(out io.Writer, st *Status) {
	for _, f := range st.Filesystems {
		marks := "no disk budget"
		if f.High > 0 {
			marks = fmt.Sprintf("disk_high %.0f%%, disk_low %.0f%%", f.High*100, f.Low*100)
		}
		fmt.Fprintf(out, "%s: %.1f%% used, %s free (%s)\n", f.Path, f.Fraction*100, sizeText(int64(f.AvailBytes)), marks)
	}
	fmt.Fprintf(out, "runtimes: %s\n", countsText(st.ByState))
	fmt.Fprintf(out, "by backend: %s\n", countsText(st.ByBackend))
	var parts []string
	for _, step := range backend.Steps {
		if b := st.Reclaimable[step]; b > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", step, sizeText(b)))
		}
	}
	if len(parts) == 0 {
		parts = []string{"nothing"}
	}
	fmt.Fprintf(out, "reclaimable now: %s\n", strings.Join(parts, ", "))
	for _, n := range st.Scheduled {
		fmt.Fprintf(out, "scheduled: %s of %s at %s\n", n.Step, n.Runtime, n.Due.Local().Format(time.RFC3339))
	}
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

// printProblems prints what a pass could not look at.
func printProblems(out io.Writer, problems []plan.Skipped) {
	for _, pr := range problems {
		fmt.Fprintf(out, "problem: %s: %s\n", pr.Runtime, pr.Reason)
	}
}

// printRuntimeRows prints ls's table, local or from the daemon.
func printRuntimeRows(w io.Writer, rows []RuntimeRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBACKEND\tSTATE\tLAST ACTIVE\tSIZE\tPINNED\tLEASE\tRETENTION\tSCHEDULED")
	for _, r := range rows {
		sched := "-"
		if r.ScheduledStep != "" {
			sched = fmt.Sprintf("%s at %s", r.ScheduledStep, r.ScheduledDue.Local().Format("2006-01-02 15:04"))
		}
		state := string(r.State)
		if r.Busy != "" {
			state += " (busy)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Backend, state, ago(r.LastActive),
			sizeText(r.SizeBytes), orDash(r.Pinned), timeOrDash(r.LeaseUntil), r.Retention, sched)
	}
	return tw.Flush()
}
