package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/reclaimer/reclaimer/internal/diskusage"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

// SizeRow is one line of size.
type SizeRow struct {
	Path string `json:"path"`
	treesize.Size
	Skipped []string `json:"skipped_mounts,omitempty"`
	Error   string   `json:"error,omitempty"`
}

var sizeCmd = spec{name: "size", args: "PATH...", summary: "measure trees as reclaimer deletes them (on this host)", local: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, c *command, args []string) error { return c.size(ctx, args, *asJSON) }
	}}

var usageCmd = spec{name: "usage", args: "PATH...", summary: "how full each path's filesystem is (on this host)", local: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, c *command, args []string) error { return c.diskUsage(args, *asJSON) }
	}}

func (c *command) size(ctx context.Context, args []string, asJSON bool) error {
	if len(args) == 0 {
		return usagef("size: which paths?")
	}
	rows := []SizeRow{}
	for _, p := range args {
		abs := absPath(p)
		// A folder is measured from itself, so that a folder that is a
		// mount point (a tmpfs, a volume) is measured and only mounts
		// nested inside it are skipped; anything else (a file, a link,
		// measured as the link) from its parent.
		base, rel := filepath.Dir(abs), filepath.Base(abs)
		if fi, err := os.Lstat(abs); abs == "/" || (err == nil && fi.IsDir()) {
			base, rel = abs, ""
		}
		res, err := treesize.Measure(ctx, base, rel, treesize.Options{})
		if err == nil {
			err = res.Err()
		}
		r := SizeRow{Path: abs, Size: res.Size}
		for _, s := range res.Skipped {
			r.Skipped = append(r.Skipped, filepath.Join(base, s.Path))
		}
		if err != nil {
			r.Error = err.Error()
			c.failed = true
		}
		rows = append(rows, r)
	}
	if asJSON {
		return printJSON(c.env.Stdout, rows)
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tALLOCATED\tAPPARENT\tENTRIES\tNOTE")
	for _, r := range rows {
		note := ""
		if len(r.Skipped) > 0 {
			note = fmt.Sprintf("%d mount points not entered", len(r.Skipped))
			if len(r.Skipped) == 1 {
				note = "1 mount point not entered: " + r.Skipped[0]
			}
		}
		if r.SharedBytes > 0 {
			note = strings.TrimPrefix(note+"; ", "; ") + sizeText(r.SharedBytes) + " hard-linked from outside, not counted"
		}
		if r.Error != "" {
			note = r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.Path, sizeText(r.AllocBytes), sizeText(r.ApparentBytes), r.Entries, note)
	}
	return tw.Flush()
}

func (c *command) diskUsage(args []string, asJSON bool) error {
	if len(args) == 0 {
		return usagef("usage: which paths?")
	}
	rows := []diskusage.Usage{}
	for _, p := range args {
		u, err := diskusage.Of(p)
		if err != nil {
			return err
		}
		rows = append(rows, u)
	}
	if asJSON {
		return printJSON(c.env.Stdout, rows)
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSIZE\tUSED\tAVAIL\tUSE%\tINODES USED")
	for _, u := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d%%\t%.0f%%\n", u.Path, sizeText(int64(u.TotalBytes)), sizeText(int64(u.UsedBytes)),
			sizeText(int64(u.AvailBytes)), u.Percent(), u.InodeFraction*100)
	}
	return tw.Flush()
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
