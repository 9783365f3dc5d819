package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestDiskBudgetShedsOldestFirst fills a small tmpfs with run folders
// whose workspaces are git repositories holding node_modules and .venv,
// and checks that over disk_high the least recently active ones shed their
// ignored folders, keeping sources, .gitignore, untracked notes and the
// ignored .env, and that the pass stops once usage is under disk_low.
func TestDiskBudgetShedsOldestFirst(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	testtree.MountTmpfs(t, runs, "size=64m")
	now := time.Now()
	const depsMB = 12
	for i, name := range []string{"old", "middle", "new"} {
		ws := newRepo(t, filepath.Join(runs, name, "workspace"))
		write(t, filepath.Join(ws, "node_modules", "big", "index.js"), strings.Repeat("x", depsMB<<20))
		write(t, filepath.Join(ws, ".venv", "lib", "site.py"), "venv")
		write(t, filepath.Join(ws, ".env"), "SECRET=1")
		write(t, filepath.Join(ws, "NOTES.md"), "untracked notes")
		age(t, now.Add(-time.Duration(3-i)*24*time.Hour), filepath.Join(runs, name))
	}
	// An untouched folder that is not a git repository sheds nothing.
	write(t, filepath.Join(runs, "plain", "workspace", "node_modules", "x.js"), strings.Repeat("p", 1<<20))
	age(t, now.Add(-10*24*time.Hour), filepath.Join(runs, "plain"))

	var st syscall.Statfs_t
	if err := syscall.Statfs(runs, &st); err != nil {
		t.Fatal(err)
	}
	used := float64(st.Blocks-st.Bfree) / float64(st.Blocks-st.Bfree+st.Bavail)
	// High just under today's usage; low reachable by shedding two of the
	// three repositories but not one.
	high := used - 0.01
	low := used - float64(depsMB+depsMB/2)/64
	cfg := config(t, dir, fmt.Sprintf("[[dirs]]\nroot = %q\nworkspaces = [\"workspace\"]\ndisk_high = %.4f\ndisk_low = %.4f\n", runs, high, low))

	var p planJSON
	runJSON(t, &p, "--config", cfg, "plan")
	var order []string
	for _, a := range p.Actions {
		if a.Step == "dependencies" {
			order = append(order, a.Runtime)
		}
	}
	if strings.Join(order, ",") != "old,middle" {
		t.Fatalf("dependency actions %v, want old then middle (least recently active first)", order)
	}
	var res applyJSON
	runJSON(t, &res, "--config", cfg, "apply")
	for _, r := range res.Results {
		if r.Outcome != "done" {
			t.Errorf("%s: %s %s", r.Runtime, r.Outcome, r.Reason)
		}
	}
	for _, name := range []string{"old", "middle"} {
		ws := filepath.Join(runs, name, "workspace")
		for _, gone := range []string{"node_modules", ".venv"} {
			if exists(filepath.Join(ws, gone)) {
				t.Errorf("%s/%s still there", name, gone)
			}
		}
		for _, kept := range []string{".gitignore", "src/main.go", "NOTES.md", ".env", ".git/HEAD"} {
			if !exists(filepath.Join(ws, kept)) {
				t.Errorf("%s/%s was removed", name, kept)
			}
		}
	}
	if !exists(filepath.Join(runs, "new", "workspace", "node_modules")) {
		t.Error("the most recently active runtime was shed although the budget was met")
	}
	if !exists(filepath.Join(runs, "plain", "workspace", "node_modules", "x.js")) {
		t.Error("a folder that is not a git repository was shed")
	}
	if err := syscall.Statfs(runs, &st); err != nil {
		t.Fatal(err)
	}
	if after := float64(st.Blocks-st.Bfree) / float64(st.Blocks-st.Bfree+st.Bavail); after > low {
		t.Errorf("usage %.3f after apply, want at or under disk_low %.3f", after, low)
	}
	if entries, _ := os.ReadDir(filepath.Join(runs, ".reclaimer-trash")); len(entries) != 0 {
		t.Errorf("trash not empty after apply: %d entries", len(entries))
	}
}

// TestBudgetSaysWhenNothingIsLeft: over budget with nothing to shed, the
// plan says so once.
func TestBudgetSaysWhenNothingIsLeft(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	testtree.MountTmpfs(t, runs, "size=8m")
	write(t, filepath.Join(runs, "r1", "data.bin"), strings.Repeat("d", 6<<20))
	cfg := config(t, dir, fmt.Sprintf("[[dirs]]\nroot = %q\ndisk_high = 0.5\ndisk_low = 0.4\n", runs))
	out := runOK(t, "--config", cfg, "plan")
	if strings.Count(out, "nothing more to shed") != 1 {
		t.Fatalf("plan output:\n%s", out)
	}
}

// TestCachesAndDependenciesInOnePass: a runtime loses its caches and, under
// disk pressure, its dependencies in the same apply (the first action does
// not make the second look "changed since plan"), and reclaiming does not
// count as activity: the runtime is as inactive afterwards as before.
func TestCachesAndDependenciesInOnePass(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	testtree.MountTmpfs(t, runs, "size=32m")
	ws := newRepo(t, filepath.Join(runs, "r1", "workspace"))
	write(t, filepath.Join(ws, "node_modules", "dep.js"), strings.Repeat("d", 8<<20))
	write(t, filepath.Join(runs, "r1", "home", ".cache", "pip", "wheel"), strings.Repeat("c", 2<<20))
	old := time.Now().Add(-5 * 24 * time.Hour).Truncate(time.Second)
	age(t, old, filepath.Join(runs, "r1"))
	cfg := config(t, dir, fmt.Sprintf("[[dirs]]\nroot = %q\nhome = \"home\"\nworkspaces = [\"workspace\"]\ndisk_high = 0.05\ndisk_low = 0.01\n", runs))

	var res applyJSON
	runJSON(t, &res, "--config", cfg, "apply")
	var steps []string
	for _, r := range res.Results {
		if r.Outcome != "done" {
			t.Errorf("%s %s: %s (%s)", r.Runtime, r.Step, r.Outcome, r.Reason)
		}
		steps = append(steps, r.Step)
	}
	if strings.Join(steps, ",") != "caches,dependencies" {
		t.Fatalf("steps %v, want caches then dependencies", steps)
	}
	if exists(filepath.Join(runs, "r1", "home", ".cache")) || exists(filepath.Join(ws, "node_modules")) {
		t.Fatal("caches or dependencies still there")
	}
	var rows []struct {
		ID         string    `json:"id"`
		LastActive time.Time `json:"last_active"`
	}
	runJSON(t, &rows, "--config", cfg, "ls")
	if len(rows) != 1 || rows[0].LastActive.After(old.Add(time.Second)) {
		t.Fatalf("after reclaiming, last active is %v; it was %v: reclaiming counted as activity", rows, old)
	}
}

// TestIgnoredFolderShedOnlyWhenRebuildablePlan: over the disk budget a
// workspace sheds its rebuildable node_modules but keeps an ignored
// secrets/ folder (its name is on the keep list, and it holds a .env), and
// the plan says so with why.
func TestIgnoredFolderShedOnlyWhenRebuildablePlan(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	testtree.MountTmpfs(t, runs, "size=32m")
	ws := newRepo(t, filepath.Join(runs, "r1", "workspace"))
	write(t, filepath.Join(ws, ".gitignore"), "node_modules/\nsecrets/\n")
	git(t, ws, "add", ".gitignore")
	git(t, ws, "commit", "-q", "-m", "ignore secrets")
	write(t, filepath.Join(ws, "node_modules", "big", "index.js"), strings.Repeat("x", 8<<20))
	write(t, filepath.Join(ws, "secrets", ".env"), "TOKEN=1")
	age(t, time.Now().Add(-48*time.Hour), filepath.Join(runs, "r1"))
	var st syscall.Statfs_t
	if err := syscall.Statfs(runs, &st); err != nil {
		t.Fatal(err)
	}
	used := float64(st.Blocks-st.Bfree) / float64(st.Blocks-st.Bfree+st.Bavail)
	cfg := config(t, dir, fmt.Sprintf("[[dirs]]\nroot = %q\nworkspaces = [\"workspace\"]\ndisk_high = %.4f\ndisk_low = %.4f\n", runs, used-0.01, used/4))
	var p planJSON
	runJSON(t, &p, "--config", cfg, "plan")
	if len(p.Actions) != 1 || len(p.Actions[0].Paths) != 1 || p.Actions[0].Paths[0] != filepath.Join(ws, "node_modules") {
		t.Fatalf("actions %+v, want node_modules shed alone", p.Actions)
	}
	reported := false
	for _, s := range p.Skipped {
		reported = reported || (s.Runtime == "r1" && strings.Contains(s.Reason, "kept "+filepath.Join(ws, "secrets")+":"))
	}
	if !reported {
		t.Fatalf("the kept secrets/ is not reported: %+v", p.Skipped)
	}
	runOK(t, "--config", cfg, "apply")
	if exists(filepath.Join(ws, "node_modules")) || !exists(filepath.Join(ws, "secrets", ".env")) {
		t.Fatal("after apply: node_modules must be gone and secrets/.env kept")
	}
}
