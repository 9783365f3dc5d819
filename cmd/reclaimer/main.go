// Command reclaimer reclaims the disk space and money that AI coding agents'
// runtimes leave behind. It only wires the process to package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/reclaimer/reclaimer/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Env{
		Stdout: os.Stdout, Stderr: os.Stderr, Version: version,
		IsTerminal: isTerminal(os.Stderr),
	})
	stop()
	os.Exit(code)
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
