// Command reclaimer reclaims the disk space and money that AI coding agents'
// runtimes leave behind. This file only parses the command line and maps
// errors to exit codes; the work is done in internal/.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"text/tabwriter"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/diskusage"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes: 0 done, 1 failed, 2 bad usage.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

const usage = `usage: reclaimer <command> [arguments]

commands:
  version            print the version
  size [--json] PATH...
                     measure trees the way reclaimer deletes them: no link
                     followed, no mount point entered (reported), hard links
                     counted once
  usage [--json] PATH...
                     how full the filesystem holding each path is (as df)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "version", "--version":
		fmt.Fprintf(stdout, "reclaimer %s (%s, %s/%s, openat2 %v)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, beneath.HaveOpenat2())
		return exitOK
	case "size":
		return cmdSize(ctx, args[1:], stdout, stderr)
	case "usage":
		return cmdUsage(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "reclaimer: unknown command %q\n%s", args[0], usage)
	return exitUsage
}

func cmdSize(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("size", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprint(stderr, "usage: reclaimer size [--json] PATH...\n")
		return exitUsage
	}
	type row struct {
		Path string `json:"path"`
		treesize.Size
		Skipped []string `json:"skipped_mounts,omitempty"`
		Error   string   `json:"error,omitempty"`
	}
	var rows []row
	code := exitOK
	for _, p := range fs.Args() {
		abs, err := filepath.Abs(p)
		if err != nil {
			fmt.Fprintf(stderr, "reclaimer: %v\n", err)
			return exitUsage
		}
		base, rel := filepath.Dir(abs), filepath.Base(abs)
		if abs == "/" {
			base, rel = "/", ""
		}
		res, err := treesize.Measure(ctx, base, rel, treesize.Options{})
		if err == nil {
			err = res.Err()
		}
		r := row{Path: abs, Size: res.Size}
		for _, s := range res.Skipped {
			r.Skipped = append(r.Skipped, filepath.Join(base, s.Path))
		}
		if err != nil {
			r.Error = err.Error()
			code = exitFailed
		}
		rows = append(rows, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rows)
		return code
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tALLOCATED\tAPPARENT\tENTRIES\tNOTE")
	for _, r := range rows {
		note := ""
		if len(r.Skipped) > 0 {
			note = fmt.Sprintf("%d mount points not entered", len(r.Skipped))
		}
		if r.Error != "" {
			note = r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.Path, humanBytes(r.AllocBytes), humanBytes(r.ApparentBytes), r.Entries, note)
	}
	_ = tw.Flush()
	return code
}

func cmdUsage(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("usage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprint(stderr, "usage: reclaimer usage [--json] PATH...\n")
		return exitUsage
	}
	var rows []diskusage.Usage
	for _, p := range fs.Args() {
		u, err := diskusage.Of(p)
		if err != nil {
			fmt.Fprintf(stderr, "reclaimer: %v\n", err)
			return exitFailed
		}
		rows = append(rows, u)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rows)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSIZE\tUSED\tAVAIL\tUSE%\tINODES USED")
	for _, u := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d%%\t%.0f%%\n", u.Path, humanBytes(int64(u.TotalBytes)), humanBytes(int64(u.UsedBytes)), humanBytes(int64(u.AvailBytes)), u.Percent(), u.InodeFraction*100)
	}
	_ = tw.Flush()
	return exitOK
}

func humanBytes(n int64) string {
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
