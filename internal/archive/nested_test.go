package archive

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// TestNestedRepositorySurvivesTheArchive: untracked nested clones inside a
// worktree (one with an unpushed commit, a branch, staged and untracked
// work of its own; one with no commit at all) are archived whole and come
// back exactly: in each, git status --porcelain=v2 and the refs are the
// same before and after, and diff -r of the whole worktree finds nothing.
func TestNestedRepositorySurvivesTheArchive(t *testing.T) {
	ctx := context.Background()
	var r gitcmd.Runner
	f := newRepo(t)
	nested := filepath.Join(f.wt, "vendor", "clone")
	git(t, f.wt, "init", "-q", "-b", "trunk", "vendor/clone")
	write(t, filepath.Join(nested, "n.txt"), "nested\n", 0o644)
	git(t, nested, "add", "n.txt")
	git(t, nested, "commit", "-q", "-m", "nested work, on no remote")
	git(t, nested, "branch", "side")
	write(t, filepath.Join(nested, "staged.txt"), "staged\n", 0o644)
	git(t, nested, "add", "staged.txt")
	write(t, filepath.Join(nested, "loose.txt"), "untracked in the clone\n", 0o644)
	git(t, f.wt, "init", "-q", "empty-clone")
	write(t, filepath.Join(f.wt, "u.txt"), "u\n", 0o644)

	type state struct{ status, refs, emptyStatus string }
	capture := func() state {
		return state{
			status:      git(t, nested, "status", "--porcelain=v2", "--branch", "--untracked-files=all"),
			refs:        git(t, nested, "for-each-ref", "--format=%(refname) %(objectname)"),
			emptyStatus: git(t, filepath.Join(f.wt, "empty-clone"), "status", "--porcelain=v2", "--branch"),
		}
	}
	before := capture()
	saved := filepath.Join(f.base, "saved")
	must(t, exec.Command("cp", "-a", f.wt, saved).Run())

	sc := localSink(t)
	m, err := ExportWorktree(ctx, r, request(sc.sink, "worktree/x/20260102T030405Z"),
		Worktree{Path: f.wt, Repo: f.repo, Ref: SnapshotRefPrefix + "x/1"})
	must(t, err)
	if len(m.Folders) != 2 {
		t.Fatalf("folders %+v, want the two nested repositories", m.Folders)
	}
	git(t, f.repo, "worktree", "remove", "--force", "--force", f.wt)
	if _, err := RestoreWorktreeFrom(ctx, r, sc.sink, m, "", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if after := capture(); after != before {
		t.Fatalf("nested repositories differ:\nbefore %+v\nafter  %+v", before, after)
	}
	if out, err := exec.Command("diff", "-r", "--exclude=.git", saved, f.wt).CombinedOutput(); err != nil {
		t.Fatalf("diff -r: %v\n%s", err, out)
	}
	// Its .git byte for byte, but for the index: git status above
	// refreshed the stat data it caches (inode numbers, ctimes), which a
	// restore changes by nature; status proved the entries the same.
	if out, err := exec.Command("diff", "-r", "--exclude=index", filepath.Join(saved, "vendor", "clone", ".git"), filepath.Join(nested, ".git")).CombinedOutput(); err != nil {
		t.Fatalf("diff -r of the nested .git: %v\n%s", err, out)
	}
}
