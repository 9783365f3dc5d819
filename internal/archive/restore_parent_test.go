package archive

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// TestRestoreCreatesMissingParents: a restore into a place whose parent
// folders do not exist yet (restore --to ~/recovered/a/b) creates them, for
// run folders and for worktrees alike.
func TestRestoreCreatesMissingParents(t *testing.T) {
	sc := localSink(t)
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "run")
	layTree(t, src, 4<<10)
	want := restorable(t, src)
	m, err := ExportFolders(ctx, request(sc.sink, "dir/run-1/20260102T030405Z"), []Folder{{Name: "run", Path: src}})
	must(t, err)
	dest := filepath.Join(t.TempDir(), "missing", "deeper", "run")
	must(t, RestoreFolders(ctx, sc.sink, m, map[string]string{"run": dest}))
	if got := restorable(t, dest); got != want {
		t.Fatalf("restored tree differs:\n%s\nwant:\n%s", got, want)
	}

	f := newRepo(t)
	dirty(t, f.wt)
	r := gitcmd.Runner{}
	wm, err := ExportWorktree(ctx, r, request(sc.sink, "worktree/x/20260102T030405Z"),
		Worktree{Path: f.wt, Repo: f.repo, Ref: SnapshotRefPrefix + "x/1"})
	must(t, err)
	git(t, f.repo, "worktree", "remove", "--force", f.wt)
	to := filepath.Join(t.TempDir(), "a", "b", "wt")
	got, err := RestoreWorktreeFrom(ctx, r, sc.sink, wm, to, t.TempDir())
	must(t, err)
	if got != to {
		t.Fatalf("restored into %s, want %s", got, to)
	}
}
