package server_test

import (
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/server"
)

// passLines are the daemon's "pass" log lines.
func passLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, " msg=pass ") {
			out = append(out, l)
		}
	}
	return out
}

// TestEveryPassLoggedOnce: every pass is one log line, a first pass that
// did nothing too, with its trigger, what it saw, its actions, what it
// freed and how long it took; an error is logged only when there is one.
func TestEveryPassLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1", "r2")
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n"), server.Options{})
	h.waitPass("start")
	lines := passLines(h.logs.String())
	if len(lines) != 1 {
		t.Fatalf("after the start pass, %d pass lines:\n%s", len(lines), h.logs.String())
	}
	for _, want := range []string{"level=INFO", "trigger=start", "seen=2", "actions=0", "done=0", "failed=0", "freed_bytes=0", "took="} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the start pass's line lacks %s: %s", want, lines[0])
		}
	}
	if strings.Contains(lines[0], "err=") {
		t.Errorf("a pass without error logs one: %s", lines[0])
	}
	h.pass(openapi.PassRequest{})
	if lines := passLines(h.logs.String()); len(lines) != 2 || strings.Contains(lines[1], "err=") || !strings.Contains(lines[1], "seen=2") {
		t.Fatalf("after a requested pass:\n%s", strings.Join(lines, "\n"))
	}
}
