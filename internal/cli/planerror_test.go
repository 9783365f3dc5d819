package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/cli"
)

// TestPlanningErrorIsAnErrorNotAPanic: a pass whose planning fails (here
// interrupted, as Ctrl-C does, before it could observe) gives plan and
// apply an error and a non-zero exit, never a nil plan printed or closed
// (the err-shadowing panic of the command layer before internal/ops).
func TestPlanningErrorIsAnErrorNotAPanic(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	if err := os.MkdirAll(filepath.Join(runs, "r1"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nretention = \"1h\"\n")
	runOK(t, "--config", cfg, "plan") // the configuration itself is fine
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{{"plan"}, {"plan", "--json"}, {"apply"}, {"apply", "--json"}} {
		var out, errb bytes.Buffer
		var code int
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("reclaimer %s panicked: %v", strings.Join(args, " "), p)
				}
			}()
			code = cli.Run(ctx, append([]string{"--config", cfg}, args...), cli.Env{Stdout: &out, Stderr: &errb, Version: "test"})
		}()
		if code == 0 || !strings.Contains(errb.String(), "context canceled") {
			t.Errorf("reclaimer %s on a failed planning: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errb.String())
		}
	}
}
