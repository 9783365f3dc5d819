package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRetentionArchivesAndRestoresWorktree: an inactive worktree with
// uncommitted and untracked work is announced, then archived (snapshot +
// verified bundle), removed through the trash and pruned; the branch and
// its commits stay; restore brings the work back as uncommitted.
func TestRetentionArchivesAndRestoresWorktree(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, filepath.Join(dir, "repo"))
	wts := filepath.Join(dir, "worktrees")
	wt := filepath.Join(wts, "conv1", "repo")
	if err := os.MkdirAll(filepath.Dir(wt), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "worktree", "add", "-q", "-b", "agent/conv1", wt)
	write(t, filepath.Join(wt, "feature.go"), "package main // committed on the branch\n")
	git(t, wt, "add", "feature.go")
	git(t, wt, "commit", "-q", "-m", "agent work")
	write(t, filepath.Join(wt, "src", "main.go"), "package main // changed, not committed\n")
	write(t, filepath.Join(wt, "scratch", "idea.txt"), "untracked\n")
	write(t, filepath.Join(wt, "node_modules", "dep.js"), "rebuildable")
	write(t, filepath.Join(wt, ".env"), "SECRET=1")
	statusBefore := git(t, wt, "status", "--porcelain")
	gitDir := git(t, wt, "rev-parse", "--absolute-git-dir")
	old := time.Now().Add(-30 * 24 * time.Hour)
	age(t, old, wt, gitDir)

	// A second, active worktree stays.
	active := filepath.Join(wts, "conv2", "repo")
	if err := os.MkdirAll(filepath.Dir(active), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "worktree", "add", "-q", "-b", "agent/conv2", active)

	cfg := config(t, dir, "[[worktrees]]\nroot = \""+wts+"\"\nretention = \"14d\"\ngrace = \"0s\"\n")
	var p planJSON
	runJSON(t, &p, "--config", cfg, "plan")
	if len(p.Scheduled) != 1 || p.Scheduled[0].Runtime != "conv1:repo" || p.Scheduled[0].Step != "archive" {
		t.Fatalf("first plan should announce the archive of conv1:repo: %+v", p)
	}
	if len(p.Actions) != 0 {
		t.Fatalf("nothing may be archived before it was announced: %+v", p.Actions)
	}
	runOK(t, "--config", cfg, "apply") // records the notice
	ls := runOK(t, "--config", cfg, "ls", "-o", "wide")
	if !strings.Contains(ls, "archive at") {
		t.Fatalf("ls does not show the schedule:\n%s", ls)
	}

	var res applyJSON
	runJSON(t, &res, "--config", cfg, "apply")
	if len(res.Results) != 1 || res.Results[0].Outcome != "done" || res.Results[0].Step != "archive" {
		t.Fatalf("second pass: %+v", res.Results)
	}
	if exists(wt) {
		t.Fatal("the worktree folder is still there")
	}
	if !exists(active) {
		t.Fatal("the active worktree was removed")
	}
	if branches := git(t, repo, "branch", "--list", "agent/conv1"); !strings.Contains(branches, "agent/conv1") {
		t.Fatal("the branch was deleted")
	}
	if list := git(t, repo, "worktree", "list"); strings.Contains(list, "conv1") {
		t.Fatalf("git still lists the worktree:\n%s", list)
	}
	ls = runOK(t, "--config", cfg, "ls")
	if !strings.Contains(ls, "archived") {
		t.Fatalf("ls does not show the archived runtime:\n%s", ls)
	}

	runOK(t, "--config", cfg, "restore", "conv1:repo")
	if got := git(t, wt, "status", "--porcelain"); got != statusBefore {
		t.Fatalf("status after restore:\n%s\nbefore:\n%s", got, statusBefore)
	}
	for path, want := range map[string]string{
		"src/main.go": "package main // changed, not committed\n", "scratch/idea.txt": "untracked\n",
		"feature.go": "package main // committed on the branch\n",
	} {
		b, err := os.ReadFile(filepath.Join(wt, path))
		if err != nil || string(b) != want {
			t.Errorf("%s after restore: %q, %v", path, b, err)
		}
	}
	// The ignored .env is what a user wants back; the rebuildable
	// node_modules is left out.
	if b, err := os.ReadFile(filepath.Join(wt, ".env")); err != nil || string(b) != "SECRET=1" {
		t.Errorf(".env after restore: %q, %v", b, err)
	}
	if exists(filepath.Join(wt, "node_modules")) {
		t.Error("node_modules came back; it is rebuildable and not part of the archive")
	}
}

// TestDeleteOnRequestArchivesUnsavedWork: delete of a worktree with
// uncommitted work writes a verified archive first; a locked worktree is
// never deleted.
func TestDeleteOnRequestArchivesUnsavedWork(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, filepath.Join(dir, "repo"))
	wt := filepath.Join(dir, "wt", "feature")
	locked := filepath.Join(dir, "wt", "locked")
	git(t, repo, "worktree", "add", "-q", "-b", "feature", wt)
	git(t, repo, "worktree", "add", "-q", "-b", "locked", locked)
	git(t, repo, "worktree", "lock", "--reason", "in review", locked)
	write(t, filepath.Join(wt, "wip.txt"), "work in progress")
	cfg := config(t, dir, "[[worktrees]]\nrepo = \""+repo+"\"\n")

	var p planJSON
	runJSON(t, &p, "--config", cfg, "plan")
	if got := p.skipReason("repo:locked"); got != "" && !strings.Contains(got, "in review") {
		t.Fatalf("locked worktree: %q", got)
	}
	_, errOut, code := run(t, "--config", cfg, "delete", "repo:locked")
	if code != 1 || !strings.Contains(errOut, "git worktree lock: in review") {
		t.Fatalf("delete of a locked worktree: exit %d, %q", code, errOut)
	}
	if !exists(locked) {
		t.Fatal("the locked worktree was removed")
	}
	var res applyJSON
	runJSON(t, &res, "--config", cfg, "delete", wt)
	if len(res.Results) != 1 || res.Results[0].Outcome != "done" {
		t.Fatalf("delete: %+v", res.Results)
	}
	if exists(wt) {
		t.Fatal("still there")
	}
	archives, err := filepath.Glob(filepath.Join(dir, "archives", "worktree", "*", "*.bundle"))
	if err != nil || len(archives) != 1 {
		t.Fatalf("archives: %v %v", archives, err)
	}
	heads := git(t, repo, "bundle", "list-heads", archives[0])
	if !strings.Contains(heads, "refs/heads/feature") || !strings.Contains(heads, "refs/reclaimer/") {
		t.Fatalf("bundle heads:\n%s", heads)
	}
	if !slices.Contains(strings.Fields(git(t, repo, "for-each-ref", "--format=%(refname)")), "refs/heads/feature") {
		t.Fatal("the branch is gone")
	}
}
