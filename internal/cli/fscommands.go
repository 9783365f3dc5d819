package cli

import (
	"context"
	"fmt"
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

func (c *command) size(ctx context.Context, args []string) error {
	fs := newFlags("size", c.env)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("size: which paths?")
	}
	rows := []SizeRow{}
	for _, p := range fs.Args() {
		abs := absPath(p)
		base, rel := filepath.Dir(abs), filepath.Base(abs)
		if abs == "/" {
			base, rel = "/", ""
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
	if *asJSON {
		return printJSON(c.env.Stdout, rows)
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tALLOCATED\tAPPARENT\tENTRIES\tNOTE")
	for _, r := range rows {
		note := ""
		if len(r.Skipped) > 0 {
			note = fmt.Sprintf("%d mount points not entered", len(r.Skipped))
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

func (c *command) usage(args []string) error {
	fs := newFlags("usage", c.env)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("usage: which paths?")
	}
	rows := []diskusage.Usage{}
	for _, p := range fs.Args() {
		u, err := diskusage.Of(p)
		if err != nil {
			return err
		}
		rows = append(rows, u)
	}
	if *asJSON {
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
