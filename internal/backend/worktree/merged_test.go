package worktree_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/worktree"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// agentWorktree adds a worktree on a new branch with one commit of its own.
func agentWorktree(t *testing.T, repo, wts, name string) string {
	t.Helper()
	wt := filepath.Join(wts, name)
	testtree.Git(t, repo, "worktree", "add", "-q", "-b", name, wt)
	testtree.Write(t, filepath.Join(wt, name+".txt"), "work of "+name+"\n")
	testtree.Git(t, wt, "add", name+".txt")
	testtree.Git(t, wt, "commit", "-q", "-m", name)
	return wt
}

// TestMergedWorkIsNotUnsaved: a worktree whose commit main took as a
// squash merge has no unsaved work and says "merged into main"; one with
// an untracked file besides still counts that file; one whose commit main
// lacks counts the commit. A delete request removes the merged one without
// an archive and archives the other first.
func TestMergedWorkIsNotUnsaved(t *testing.T) {
	base := testtree.Real(t, t.TempDir())
	repo := testtree.NewRepo(t, filepath.Join(base, "repo"))
	wts := filepath.Join(base, "wts")
	merged := agentWorktree(t, repo, wts, "merged")
	dirty := agentWorktree(t, repo, wts, "dirty")
	open := agentWorktree(t, repo, wts, "open")
	for _, b := range []string{"merged", "dirty"} {
		testtree.Git(t, repo, "merge", "-q", "--squash", b)
		testtree.Git(t, repo, "commit", "-q", "-m", "squash "+b)
	}
	testtree.Write(t, filepath.Join(dirty, "notes.txt"), "not committed\n")

	b := &worktree.Backend{Root: wts, Git: gitcmd.Runner{Timeout: time.Minute}}
	ctx := testtree.Context(t)
	rts, err := b.List(ctx, backend.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]backend.Runtime{}
	for _, rt := range rts {
		byPath[rt.Path] = rt
	}
	if rt := byPath[merged]; rt.Unsaved != "" || !strings.HasPrefix(rt.Merged, "merged into main") {
		t.Errorf("merged: unsaved %q, merged %q", rt.Unsaved, rt.Merged)
	}
	if rt := byPath[dirty]; rt.Unsaved != "1 untracked file" || rt.Merged == "" {
		t.Errorf("merged with an untracked file: unsaved %q, merged %q", rt.Unsaved, rt.Merged)
	}
	if rt := byPath[open]; rt.Unsaved != "1 commit not on any remote" || rt.Merged != "" {
		t.Errorf("not merged: unsaved %q, merged %q", rt.Unsaved, rt.Merged)
	}

	state := filepath.Join(base, "state")
	store, err := sqlite.Open(ctx, filepath.Join(state, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	archives := filepath.Join(base, "archives")
	local, err := sink.NewLocal(archives)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{Ledger: store, StateDir: state, ArchiveDir: archives, Sink: local,
		Sources: []engine.Source{{Name: "worktrees[0]", Backend: b}}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var reqs []policy.Request
	keys := map[string]backend.Key{}
	for _, p := range []string{merged, open} {
		k := byPath[p].Key
		k.Source = "worktrees[0]" // the engine's key carries its source
		keys[p] = k
		reqs = append(reqs, policy.Request{Key: k, Step: backend.StepDelete})
	}
	p, _, err := eng.Plan(ctx, engine.PlanOptions{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Apply(ctx, p, engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Results {
		if r.Outcome != plan.Done {
			t.Fatalf("result %+v", r)
		}
	}
	for path, wantArchive := range map[string]bool{merged: false, open: true} {
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("%s is still there", path)
		}
		got, err := store.ListArchives(ctx, keys[path])
		if err != nil {
			t.Fatal(err)
		}
		if (len(got) > 0) != wantArchive {
			t.Errorf("%s: %d archives recorded, want archive %v", filepath.Base(path), len(got), wantArchive)
		}
	}
	// The squash merge is the merged worktree's work: main has it.
	if out := testtree.Git(t, repo, "show", "main:merged.txt"); !strings.Contains(out, "work of merged") {
		t.Fatalf("main lacks the merged work: %q", out)
	}
}
