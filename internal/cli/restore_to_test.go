package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreToOneRule: `restore --to DIR` follows one rule for a worktree
// and a run folder alike: each comes back as DIR/<its own name> (DIR made
// if missing). The copy is not managed: the runtime stays archived, no
// trash is made beside the user's files, the worktree copy is locked (so
// no pass touches it); and every restore is journaled (log shows it).
func TestRestoreToOneRule(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, filepath.Join(dir, "repo"))
	wts := filepath.Join(dir, "worktrees")
	wt := filepath.Join(wts, "conv1")
	if err := os.MkdirAll(wts, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "worktree", "add", "-q", "-b", "agent/conv1", wt)
	write(t, filepath.Join(wt, "wip.txt"), "work in progress")
	runs := filepath.Join(dir, "runs")
	write(t, filepath.Join(runs, "r1", "notes.txt"), "notes")
	cfg := config(t, dir, "[[worktrees]]\nroot = \""+wts+"\"\n[[dirs]]\nroot = \""+runs+"\"\n")
	runOK(t, "--config", cfg, "delete", "conv1", "r1")
	if exists(wt) || exists(filepath.Join(runs, "r1")) {
		t.Fatal("not deleted")
	}

	// The user's folder, with their own files in it.
	home := filepath.Join(dir, "me")
	write(t, filepath.Join(home, "todo.txt"), "mine")
	target := filepath.Join(home, "restored", "here") // does not exist yet
	out := runOK(t, "--config", cfg, "restore", "conv1", "--to", target)
	if !strings.Contains(out, filepath.Join(target, "conv1")) {
		t.Fatalf("restore of the worktree: %q", out)
	}
	out = runOK(t, "--config", cfg, "restore", "r1", "--to", target)
	if !strings.Contains(out, filepath.Join(target, "r1")) {
		t.Fatalf("restore of the run folder: %q", out)
	}
	for path, want := range map[string]string{filepath.Join(target, "conv1", "wip.txt"): "work in progress",
		filepath.Join(target, "r1", "notes.txt"): "notes"} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", path, b, err)
		}
	}
	if list := git(t, repo, "worktree", "list", "--porcelain"); !strings.Contains(list, "worktree "+filepath.Join(target, "conv1")+"\n") ||
		!strings.Contains(list, "locked restored by reclaimer") {
		t.Fatalf("the worktree copy is not a locked worktree:\n%s", list)
	}

	// Passes leave the copies alone and make no trash beside them.
	runOK(t, "--config", cfg, "apply")
	if _, _, code := run(t, "--config", cfg, "delete", filepath.Join(target, "conv1")); code == 0 || !exists(filepath.Join(target, "conv1", "wip.txt")) {
		t.Fatalf("delete of the copy: exit %d", code)
	}
	// Also for a source that takes every worktree of the repository.
	repoCfg := config(t, dir, "[[worktrees]]\nrepo = \""+repo+"\"\n")
	if _, _, code := run(t, "--config", repoCfg, "delete", filepath.Join(target, "conv1")); code == 0 || !exists(filepath.Join(target, "conv1", "wip.txt")) {
		t.Fatalf("delete of the locked copy through a repository source: exit %d", code)
	}
	for _, d := range []string{home, filepath.Join(home, "restored"), target} {
		if exists(filepath.Join(d, ".reclaimer-trash")) {
			t.Errorf("a trash was made in %s", d)
		}
	}
	var list []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	runJSON(t, &list, "--config", cfg, "ls")
	for _, r := range list {
		if (r.ID == "conv1" || r.ID == "r1") && r.State != "archived" {
			t.Errorf("%s is %s after a restore elsewhere, want archived", r.ID, r.State)
		}
	}
	log := runOK(t, "--config", cfg, "log")
	if n := strings.Count(log, " restore  done "); n != 2 {
		t.Fatalf("log shows %d restores, want 2:\n%s", n, log)
	}
}
