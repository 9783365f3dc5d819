package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/cli"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestHelperApply is the child process of TestKilledApplyConverges.
func TestHelperApply(t *testing.T) {
	args := os.Getenv("RECLAIMER_HELPER_ARGS")
	if args == "" {
		t.Skip("helper process only")
	}
	os.Exit(cli.Run(context.Background(), strings.Split(args, "\x1f"), cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}))
}

// TestKilledApplyConverges kills an apply with SIGKILL in the middle and
// checks that the next apply finishes the plan and that nothing outside the
// plan was deleted.
func TestKilledApplyConverges(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	const n = 12
	for i := 0; i < n; i++ {
		run := filepath.Join(runs, fmt.Sprintf("run%02d", i))
		testtree.Synthetic(t, filepath.Join(run, "home", ".cache"), 2, 8, 30, 512)
		write(t, filepath.Join(run, "home", "keep.txt"), "keep")
		write(t, filepath.Join(run, "workspace", "main.go"), "package main")
	}
	keep := func() string { // everything but the caches
		var b strings.Builder
		for i := 0; i < n; i++ {
			run := filepath.Join(runs, fmt.Sprintf("run%02d", i))
			b.WriteString(testtree.Fingerprint(t, filepath.Join(run, "workspace")))
			b.WriteString(testtree.Fingerprint(t, filepath.Join(run, "home", "keep.txt")))
		}
		return b.String()
	}
	before := keep()
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nhome = \"home\"\nworkspaces = [\"workspace\"]\n")
	saved := filepath.Join(dir, "plan.json")
	runOK(t, "--config", cfg, "plan", "--out", saved)

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperApply$")
	cmd.Env = append(os.Environ(), "RECLAIMER_HELPER_ARGS="+strings.Join([]string{"--config", cfg, "apply", "--plan", saved}, "\x1f"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill as soon as the first cache has left its place.
	deadline := time.Now().Add(60 * time.Second)
	killed := false
	for time.Now().Before(deadline) {
		gone := 0
		for i := 0; i < n; i++ {
			if !exists(filepath.Join(runs, fmt.Sprintf("run%02d", i), "home", ".cache")) {
				gone++
			}
		}
		if gone > 0 {
			if gone < n {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	err := cmd.Wait()
	if !killed {
		t.Skipf("the apply finished (%v) before it could be killed; nothing to converge", err)
	}

	var res applyJSON
	runJSON(t, &res, "--config", cfg, "apply", "--plan", saved)
	for i := 0; i < n; i++ {
		if exists(filepath.Join(runs, fmt.Sprintf("run%02d", i), "home", ".cache")) {
			t.Errorf("run%02d still has its cache after the second apply: %+v", i, res.Results)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(runs, ".reclaimer-trash")); len(entries) != 0 {
		t.Errorf("%d entries left in the trash", len(entries))
	}
	if keep() != before {
		t.Fatal("something outside the plan was deleted")
	}
	log := runOK(t, "--config", cfg, "log", "--limit", "100")
	if strings.Contains(log, "unfinished") {
		t.Fatalf("the journal still has unfinished entries:\n%s", log)
	}
}
