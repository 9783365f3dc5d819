// Command fsbench runs reclaimer's deleter or sizer once on a path, for the
// comparison script next to it (bench/compare.sh). It is not part of the
// product: it exists so that whole-process timings compare like with like
// against rm -rf and du -s.
//
//	fsbench rm PATH    delete PATH (its parent is the trusted base)
//	fsbench du PATH    measure PATH
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/reclaimer/reclaimer/internal/deletion"
	"github.com/reclaimer/reclaimer/internal/dirwalk"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

func main() {
	workers := flag.Int("workers", 0, "worker goroutines (0: default)")
	quiet := flag.Bool("q", false, "print nothing")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: fsbench [-workers N] rm|du PATH")
		os.Exit(2)
	}
	path, err := filepath.Abs(flag.Arg(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	walk := dirwalk.Options{Workers: *workers}
	base, rel := filepath.Dir(path), filepath.Base(path)
	ctx := context.Background()
	switch flag.Arg(0) {
	case "rm":
		res, err := deletion.Delete(ctx, base, rel, deletion.Options{Walk: walk})
		if err == nil {
			err = res.Err()
		}
		if !*quiet {
			fmt.Printf("removed %d entries, freed %d bytes, skipped %d\n", res.Removed, res.FreedBytes, res.SkippedCount)
		}
		exitOn(err)
	case "du":
		res, err := treesize.Measure(ctx, base, rel, treesize.Options{Walk: walk})
		if err == nil {
			err = res.Err()
		}
		if !*quiet {
			fmt.Printf("%d\t%d\t%d\t%s\n", res.AllocBytes/1024, res.ApparentBytes, res.Entries, path)
		}
		exitOn(err)
	default:
		fmt.Fprintln(os.Stderr, "usage: fsbench [-workers N] rm|du PATH")
		os.Exit(2)
	}
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
