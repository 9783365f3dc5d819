package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListSaysMergedIntoMain: a worktree whose commit main took as a squash
// merge shows no unsaved work and says its commits are merged into main, in
// `ls -o wide` and in `ls --json`.
func TestListSaysMergedIntoMain(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, filepath.Join(dir, "repo"))
	wts := filepath.Join(dir, "worktrees")
	wt := filepath.Join(wts, "conv1", "repo")
	if err := os.MkdirAll(filepath.Dir(wt), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "worktree", "add", "-q", "-b", "agent/conv1", wt)
	write(t, filepath.Join(wt, "feature.go"), "package main // the agent's work\n")
	git(t, wt, "add", "feature.go")
	git(t, wt, "commit", "-q", "-m", "agent work")
	write(t, filepath.Join(repo, "other.go"), "package main // main moves on\n")
	git(t, repo, "add", "other.go")
	git(t, repo, "commit", "-q", "-m", "main moves on")
	git(t, repo, "merge", "-q", "--squash", "agent/conv1")
	git(t, repo, "commit", "-q", "-m", "squash the agent's work")

	// A near miss: of two commits main took only the first (cherry-picked,
	// same patch id); the second is unsaved work.
	near := filepath.Join(wts, "conv2", "repo")
	git(t, repo, "worktree", "add", "-q", "-b", "agent/conv2", near)
	write(t, filepath.Join(near, "one.go"), "package main // first\n")
	git(t, near, "add", "one.go")
	git(t, near, "commit", "-q", "-m", "first")
	first := strings.TrimSpace(git(t, near, "rev-parse", "HEAD"))
	write(t, filepath.Join(near, "two.go"), "package main // second\n")
	git(t, near, "add", "two.go")
	git(t, near, "commit", "-q", "-m", "second")
	git(t, repo, "cherry-pick", first)

	cfg := config(t, dir, "[[worktrees]]\nroot = \""+wts+"\"\n")
	if ls := runOK(t, "--config", cfg, "ls", "-o", "wide"); !strings.Contains(ls, "none: its commits merged into main") {
		t.Fatalf("ls -o wide does not say the work is merged:\n%s", ls)
	}
	var rows []struct {
		ID      string `json:"id"`
		Unsaved string `json:"unsaved"`
		Merged  string `json:"merged"`
	}
	runJSON(t, &rows, "--config", cfg, "ls")
	if len(rows) != 2 {
		t.Fatalf("ls --json: %+v", rows)
	}
	seen := 0
	for _, r := range rows {
		if strings.Contains(r.ID, "conv1") || strings.Contains(r.ID, "conv2") {
			seen++
		}
		switch {
		case strings.Contains(r.ID, "conv1") && (r.Unsaved != "" || !strings.HasPrefix(r.Merged, "merged into main")):
			t.Errorf("merged: %+v", r)
		case strings.Contains(r.ID, "conv2") && (r.Unsaved == "" || r.Merged != ""):
			t.Errorf("one commit not merged: %+v", r)
		}
	}
	if seen != 2 {
		t.Errorf("runtimes not named by their folders: %+v", rows)
	}
}
