// Command helper is the one program of the test image: a static binary
// that writes files and sleeps, so tests can play an agent's sandbox
// without pulling anything.
//
//	helper [PATH=CONTENT | sleep]...
//
// Each PATH=CONTENT writes CONTENT to PATH (parents made); "sleep" waits
// for SIGTERM or SIGINT (it runs as PID 1, which has no default handlers)
// and then exits 0.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	for _, arg := range os.Args[1:] {
		if arg == "sleep" {
			ch := make(chan os.Signal, 1)
			signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
			<-ch
			continue
		}
		path, content, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "helper: %q is neither PATH=CONTENT nor sleep\n", arg)
			os.Exit(2)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
	}
}
