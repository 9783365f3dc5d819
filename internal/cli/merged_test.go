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
	if len(rows) != 1 || rows[0].Unsaved != "" || !strings.HasPrefix(rows[0].Merged, "merged into main") {
		t.Fatalf("ls --json: %+v", rows)
	}
}
