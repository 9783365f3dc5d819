package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/reclaimer/reclaimer/internal/native"
)

// nativeCmd runs "native plan" and "native sync".
func (c *command) nativeCmd(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "plan" && args[0] != "sync") {
		return usagef("native: want plan or sync")
	}
	verb := args[0]
	s, asJSON, err := c.openReport(ctx, "native "+verb, args[1:])
	if err != nil {
		return err
	}
	defer s.close()
	opts := native.Options{Sources: s.sources, Ledger: s.store}
	run := native.Plan
	if verb == "sync" {
		run = native.Sync
	}
	rep, err := run(ctx, opts)
	if err != nil {
		return err
	}
	c.failed = rep.Failed > 0 || len(rep.Problems) > 0
	if *asJSON {
		return printJSON(c.env.Stdout, rep)
	}
	printNative(c.env.Stdout, rep)
	return nil
}

func printNative(w io.Writer, rep *native.Report) {
	if len(rep.Rows) == 0 && len(rep.Problems) == 0 {
		fmt.Fprintln(w, "no runtime with native settings")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNTIME\tBACKEND\tSTATE\tSETTING\tPROVIDER\tPOLICY\tDRIFT\tACTION")
	for _, r := range rep.Rows {
		if len(r.Settings) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t-\n", r.Runtime, r.Backend, r.State)
		}
		for _, st := range r.Settings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Runtime, r.Backend, r.State, st.Name, st.Provider, st.Policy,
				orDash(st.Drift), orDash(st.Action))
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
			fmt.Fprintf(tw, "\t\t\t  note: %s\n", strings.Join(notes, "; "))
		}
	}
	tw.Flush()
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	if rep.Applied {
		fmt.Fprintf(w, "\n%d runtimes changed, %d failed, %d drifted before the sync\n", rep.Written, rep.Failed, rep.Drifted)
		return
	}
	fmt.Fprintf(w, "\n%d runtimes drift from the policy; \"reclaimer native sync\" writes what the providers allow.\n", rep.Drifted)
	fmt.Fprintln(w, "This is a preview: providers and users may change settings before the sync.")
}
