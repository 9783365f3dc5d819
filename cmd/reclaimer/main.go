// Command reclaimer reclaims the disk space and money that AI coding agents'
// runtimes leave behind. It only wires the process to package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/reclaimer/reclaimer/internal/cli"
)

// version, commit and date may be set at build time, for builds without
// VCS stamping (-buildvcs=false, a source tarball):
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD) -X main.date=$(date -u +%FT%TZ)"
//
// Left empty, `reclaimer --version` reads the build info.
var version, commit, date = "dev", "", ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// RECLAIMER_CPUPROFILE=FILE writes a CPU profile of the whole command,
	// for measuring a pass the way an operator runs it.
	if path := os.Getenv("RECLAIMER_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	code := cli.Run(ctx, os.Args[1:], cli.Env{
		Stdout: os.Stdout, Stderr: os.Stderr, Version: version, Commit: commit, BuildTime: date,
		IsTerminal: isTerminal(os.Stderr),
	})
	stop()
	// RECLAIMER_MEMPROFILE=FILE writes where the command allocated.
	if path := os.Getenv("RECLAIMER_MEMPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	if code != 0 {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
