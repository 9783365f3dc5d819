package archive

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// TestIndexFlagsSurviveTheArchive: edits hidden from git status by
// assume-unchanged and skip-worktree, and a skip-worktree file absent from
// the work tree (a sparse checkout), are counted as unsaved, archived with
// their real content, and come back with their flags: git status
// --porcelain=v2, git ls-files -v -s, the refs and diff -r of the files are
// the same before and after.
func TestIndexFlagsSurviveTheArchive(t *testing.T) {
	ctx := context.Background()
	var r gitcmd.Runner
	f := newRepo(t)
	write(t, filepath.Join(f.wt, "a.txt"), "a edited under assume-unchanged\n", 0o644)
	git(t, f.wt, "update-index", "--assume-unchanged", "a.txt")
	write(t, filepath.Join(f.wt, "b.txt"), "b edited under skip-worktree\n", 0o644)
	git(t, f.wt, "update-index", "--skip-worktree", "b.txt")
	git(t, f.wt, "update-index", "--skip-worktree", "sub/c.txt")
	must(t, os.Remove(filepath.Join(f.wt, "sub", "c.txt"))) // sparse: absent, no change
	if out := git(t, f.wt, "status", "--porcelain"); out != "" {
		t.Fatalf("the flags should hide the edits from status, got %q", out)
	}
	s, err := Inspect(ctx, r, f.wt)
	must(t, err)
	if s.Changed != 2 || s.CannotArchive() != "" {
		t.Fatalf("Inspect = %+v; want the two hidden edits counted and nothing unarchivable", s)
	}

	type state struct{ status, flags, refs, files string }
	capture := func(wt string) state {
		return state{
			status: git(t, wt, "status", "--porcelain=v2", "--untracked-files=all"),
			flags:  git(t, wt, "ls-files", "-v", "-s"),
			refs:   git(t, f.repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/"),
			files:  contentOf(t, wt),
		}
	}
	before := capture(f.wt)
	saved := filepath.Join(f.base, "saved")
	must(t, exec.Command("cp", "-a", f.wt, saved).Run())

	sc := localSink(t)
	m, err := ExportWorktree(ctx, r, request(sc.sink, "worktree/x/20260102T030405Z"),
		Worktree{Path: f.wt, Repo: f.repo, Ref: SnapshotRefPrefix + "x/1"})
	must(t, err)
	git(t, f.repo, "worktree", "remove", "--force", f.wt)
	got, err := RestoreWorktreeFrom(ctx, r, sc.sink, m, "", t.TempDir())
	must(t, err)
	if got != f.wt {
		t.Fatalf("restored into %s", got)
	}
	after := capture(f.wt)
	if after != before {
		t.Fatalf("round trip differs:\nbefore %+v\nafter  %+v", before, after)
	}
	if out, err := exec.Command("diff", "-r", "--exclude=.git", saved, f.wt).CombinedOutput(); err != nil {
		t.Fatalf("diff -r: %v\n%s", err, out)
	}
	if strings.Contains(git(t, f.wt, "show", "HEAD:b.txt"), "edited") {
		t.Fatal("the snapshot was committed to the branch")
	}
}
