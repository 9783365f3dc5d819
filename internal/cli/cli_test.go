package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/testtree"
)

// coreDump writes a minimal ELF core file header.
func coreDump(t *testing.T, path string) { testtree.CoreDump(t, path) }

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	write(t, bad, "[policy]\ndisk_hihg = 0.9\n")
	_, errOut, code := run(t, "--config", bad, "plan")
	if code != 2 || !strings.Contains(errOut, ":2") || !strings.Contains(errOut, "disk_hihg") {
		t.Fatalf("unknown key: exit %d, %q; want 2 and the line number", code, errOut)
	}
	if _, _, code := run(t, "frobnicate"); code != 2 {
		t.Fatalf("unknown command: exit %d, want 2", code)
	}
	if _, _, code := run(t, "plan", "--step", "explode"); code != 2 {
		t.Fatalf("unknown step: exit %d, want 2", code)
	}
	cfg := config(t, dir, "[[dirs]]\nroot = \""+filepath.Join(dir, "runs")+"\"\n")
	if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Not found is exit 1 (bad usage is 2).
	if _, errOut, code := run(t, "--config", cfg, "pin", "no-such-runtime"); code != 1 || !strings.Contains(errOut, "no-such-runtime") {
		t.Fatalf("unknown runtime: exit %d, %q", code, errOut)
	}
}

// TestCachesOfStoppedRunFolders: caches and core dumps of a stopped run
// folder go; a planted .cache link is unlinked, not followed; sources,
// workspaces and a text file that happens to be named core stay.
func TestCachesOfStoppedRunFolders(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	outside := filepath.Join(dir, "outside")
	write(t, filepath.Join(outside, "precious.txt"), "never follow links")
	// run1: real caches and a core dump.
	write(t, filepath.Join(runs, "run1", "persistence", ".cache", "uv", "wheel.whl"), strings.Repeat("w", 100<<10))
	write(t, filepath.Join(runs, "run1", "persistence", ".npm", "_cacache", "x"), strings.Repeat("n", 50<<10))
	write(t, filepath.Join(runs, "run1", "persistence", ".bashrc"), "keep")
	write(t, filepath.Join(runs, "run1", "workspace", "notes.md"), "keep")
	coreDump(t, filepath.Join(runs, "run1", "workspace", "core.1234"))
	write(t, filepath.Join(runs, "run1", "workspace", "core"), "a source file named core\n")
	// run2: the sandbox planted a .cache link to the host.
	write(t, filepath.Join(runs, "run2", "persistence", ".bashrc"), "keep")
	if err := os.Symlink(outside, filepath.Join(runs, "run2", "persistence", ".cache")); err != nil {
		t.Fatal(err)
	}
	before := testtree.Fingerprint(t, outside)
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nhome = \"persistence\"\nworkspaces = [\"workspace\"]\n")

	var p planJSON
	runJSON(t, &p, "--config", cfg, "plan")
	if p.PlanID == "" || p.CreatedAt == "" {
		t.Fatalf("plan without id or time: %+v", p)
	}
	if got := p.steps("run1"); !slices.Equal(got, []string{"caches"}) {
		t.Fatalf("run1 steps %v, want [caches]", got)
	}
	for _, a := range p.Actions {
		for _, path := range a.Paths {
			if !filepath.IsAbs(path) {
				t.Errorf("path %q is not absolute", path)
			}
		}
		if a.Runtime == "run1" && (len(a.Paths) != 3 || a.Bytes < 150<<10) {
			t.Errorf("run1 caches: %v, %d bytes; want .cache, .npm and core.1234", a.Paths, a.Bytes)
		}
	}
	// The dry run changed nothing, not even a trash folder.
	if !exists(filepath.Join(runs, "run1", "persistence", ".cache", "uv", "wheel.whl")) {
		t.Fatal("plan deleted something")
	}
	if exists(filepath.Join(runs, ".reclaimer-trash")) {
		t.Fatal("plan created the trash folder")
	}

	var res applyJSON
	runJSON(t, &res, "--config", cfg, "apply")
	for _, r := range res.Results {
		if r.Outcome != "done" {
			t.Errorf("%s %s: %s (%s)", r.Runtime, r.Step, r.Outcome, r.Reason)
		}
	}
	if res.FreedBytes < 150<<10 {
		t.Errorf("freed %d bytes, want at least 150 KiB", res.FreedBytes)
	}
	for _, gone := range []string{"run1/persistence/.cache", "run1/persistence/.npm", "run1/workspace/core.1234", "run2/persistence/.cache"} {
		if exists(filepath.Join(runs, gone)) {
			t.Errorf("%s still there", gone)
		}
	}
	for _, kept := range []string{"run1/persistence/.bashrc", "run1/workspace/notes.md", "run1/workspace/core", "run2/persistence/.bashrc"} {
		if !exists(filepath.Join(runs, kept)) {
			t.Errorf("%s was removed", kept)
		}
	}
	if got := testtree.Fingerprint(t, outside); got != before {
		t.Fatal("the target of the planted link changed")
	}
	// A second pass finds nothing left.
	var again planJSON
	runJSON(t, &again, "--config", cfg, "plan")
	if len(again.Actions) != 0 {
		t.Fatalf("second plan still has %v", again.Actions)
	}
	// The journal has both actions.
	log := runOK(t, "--config", cfg, "log")
	if strings.Count(log, "caches") < 2 || !strings.Contains(log, "done") {
		t.Fatalf("journal:\n%s", log)
	}
}

// TestBusyPinnedLeasedRuntimesAreUntouched: a process inside keeps a run
// folder; a pin and a lease keep theirs.
func TestBusyPinnedLeasedRuntimesAreUntouched(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	for _, r := range []string{"busy", "pinned", "leased", "free"} {
		write(t, filepath.Join(runs, r, "home", ".cache", "blob"), strings.Repeat("c", 8<<10))
	}
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nhome = \"home\"\n")
	sleep := exec.Command("sleep", "300")
	sleep.Dir = filepath.Join(runs, "busy")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	runOK(t, "--config", cfg, "pin", "pinned", "--reason", "demo tomorrow")
	runOK(t, "--config", cfg, "lease", filepath.Join(runs, "leased"), "--for", "2h") // by path

	var p planJSON
	runJSON(t, &p, "--config", cfg, "plan")
	if got := p.steps("free"); !slices.Equal(got, []string{"caches"}) {
		t.Fatalf("free: %v", got)
	}
	for r, want := range map[string]string{"busy": "busy", "pinned": "pinned: demo tomorrow", "leased": "leased until"} {
		if len(p.steps(r)) != 0 {
			t.Errorf("%s got actions %v", r, p.steps(r))
		}
		if got := p.skipReason(r); !strings.Contains(got, want) {
			t.Errorf("%s skipped for %q, want %q", r, got, want)
		}
	}
	runOK(t, "--config", cfg, "apply")
	for _, r := range []string{"busy", "pinned", "leased"} {
		if !exists(filepath.Join(runs, r, "home", ".cache", "blob")) {
			t.Errorf("%s lost its cache", r)
		}
	}
	if exists(filepath.Join(runs, "free", "home", ".cache")) {
		t.Error("free kept its cache")
	}
	ls := runOK(t, "--config", cfg, "ls", "-o", "wide")
	if !strings.Contains(ls, "demo tomorrow") || !strings.Contains(ls, "(busy)") {
		t.Fatalf("ls does not show the pin and the busy state:\n%s", ls)
	}
}

// TestChangedSincePlan: activity between plan and apply makes apply skip,
// and apply --plan never does more than the saved plan.
func TestChangedSincePlan(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	for _, r := range []string{"a", "b"} {
		write(t, filepath.Join(runs, r, "home", ".cache", "blob"), "cache")
		age(t, time.Now().Add(-time.Hour), filepath.Join(runs, r))
	}
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nhome = \"home\"\n")
	saved := filepath.Join(dir, "plan.json")
	runOK(t, "--config", cfg, "plan", "--out", saved, "--runtime", "a")
	// b gets a cache after the plan; a sees activity.
	write(t, filepath.Join(runs, "a", "home", "work.txt"), "new work")
	var res applyJSON
	runJSON(t, &res, "--config", cfg, "apply", "--plan", saved)
	if len(res.Results) != 1 || res.Results[0].Outcome != "skipped" || !strings.Contains(res.Results[0].Reason, "changed since plan") {
		t.Fatalf("results %+v, want a skipped with changed since plan", res.Results)
	}
	if !exists(filepath.Join(runs, "a", "home", ".cache", "blob")) || !exists(filepath.Join(runs, "b", "home", ".cache", "blob")) {
		t.Fatal("apply --plan touched something")
	}
	// touch (recorded activity) works the same way.
	runOK(t, "--config", cfg, "plan", "--out", saved, "--runtime", "b")
	runOK(t, "--config", cfg, "touch", "b")
	runJSON(t, &res, "--config", cfg, "apply", "--plan", saved)
	if len(res.Results) != 1 || res.Results[0].Outcome != "skipped" {
		t.Fatalf("after touch: %+v", res.Results)
	}
}

// TestLinkedHomeAndWorkspaceAreNotLookedInto: a run folder whose home and
// workspace are links to folders outside the managed root (a caller's own
// checkout) plans nothing for them, and apply touches nothing there.
func TestLinkedHomeAndWorkspaceAreNotLookedInto(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	outsideHome := filepath.Join(dir, "outside-home")
	write(t, filepath.Join(outsideHome, ".cache", "big"), strings.Repeat("c", 64<<10))
	checkout := newRepo(t, filepath.Join(dir, "checkout"))
	write(t, filepath.Join(checkout, "node_modules", "dep.js"), strings.Repeat("d", 64<<10))
	if err := os.MkdirAll(filepath.Join(runs, "r1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outsideHome, filepath.Join(runs, "r1", "home")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(checkout, filepath.Join(runs, "r1", "workspace")); err != nil {
		t.Fatal(err)
	}
	before := testtree.Fingerprint(t, outsideHome) + testtree.Fingerprint(t, checkout)
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nhome = \"home\"\nworkspaces = [\"workspace\"]\ndisk_high = 0.01\ndisk_low = 0.005\n")
	var p planJSON
	runJSON(t, &p, "--config", cfg, "plan")
	if len(p.Actions) != 0 {
		t.Fatalf("actions on linked folders: %+v", p.Actions)
	}
	runOK(t, "--config", cfg, "apply")
	if after := testtree.Fingerprint(t, outsideHome) + testtree.Fingerprint(t, checkout); after != before {
		t.Fatal("something outside the managed root changed")
	}
}
