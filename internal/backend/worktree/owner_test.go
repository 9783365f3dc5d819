package worktree

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// layout: a repository with one agent worktree under wts/, and a full
// clone elsewhere holding work its owner wants (an unpushed branch, an
// ignored .env).
type layout struct {
	repo, wts, agent, clone string
}

func newLayout(t *testing.T) layout {
	t.Helper()
	base := testtree.Real(t, t.TempDir())
	l := layout{repo: filepath.Join(base, "repo"), wts: filepath.Join(base, "wts"), clone: filepath.Join(base, "home", "clone")}
	testtree.NewRepo(t, l.repo)
	l.agent = filepath.Join(l.wts, "agent")
	testtree.Git(t, l.repo, "worktree", "add", "-q", "-b", "agent", l.agent)
	testtree.Git(t, base, "clone", "-q", l.repo, l.clone)
	testtree.Git(t, l.clone, "checkout", "-q", "-b", "unpushed")
	testtree.Write(t, filepath.Join(l.clone, "work.txt"), "mine\n")
	testtree.Git(t, l.clone, "add", "work.txt")
	testtree.Git(t, l.clone, "commit", "-q", "-m", "unpushed work")
	testtree.Write(t, filepath.Join(l.clone, ".env"), "SECRET=1\n")
	return l
}

// forge makes the repository's git list folder as one of its worktrees, the
// way an agent that writes the repository's .git can.
func forge(t *testing.T, repo, name, folder string) {
	t.Helper()
	admin := filepath.Join(repo, ".git", "worktrees", name)
	testtree.Write(t, filepath.Join(admin, "gitdir"), filepath.Join(folder, ".git")+"\n")
	testtree.Write(t, filepath.Join(admin, "HEAD"), "ref: refs/heads/main\n")
	testtree.Write(t, filepath.Join(admin, "commondir"), "../..\n")
}

func discardInto(t *testing.T, moved *[]string) func(string) error {
	return func(p string) error {
		*moved = append(*moved, p)
		return os.Rename(p, p+".trashed")
	}
}

var git = gitcmd.Runner{Timeout: time.Minute}

// TestWorktreeOwnershipProvenFromBothSides: a folder git lists only because
// the repository's admin file names it (a full clone, a linked worktree of
// another repository, a folder whose .git is a link) is reported with why,
// never given a managed root, and Delete refuses it; the real worktree is
// listed and removable, with its root derived from where git made it.
func TestWorktreeOwnershipProvenFromBothSides(t *testing.T) {
	l := newLayout(t)
	other := filepath.Join(filepath.Dir(l.repo), "other")
	testtree.NewRepo(t, other)
	otherWT := filepath.Join(filepath.Dir(l.repo), "otherwt")
	testtree.Git(t, other, "worktree", "add", "-q", "-b", "o", otherWT)
	linked := filepath.Join(filepath.Dir(l.repo), "linked")
	if err := os.MkdirAll(linked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(l.agent, ".git"), filepath.Join(linked, ".git")); err != nil {
		t.Fatal(err)
	}
	forged := map[string]string{
		"clone":         l.clone, // a full clone: its .git is a folder
		"other-wt":      otherWT, // another repository's worktree
		"linked-dotgit": linked,  // a .git that is a link to ours
	}
	for name, folder := range forged {
		forge(t, l.repo, name, folder)
	}
	b := &Backend{Repo: l.repo, Git: git}
	ctx := testtree.Context(t)
	rts, err := b.List(ctx, backend.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]backend.Runtime{}
	for _, rt := range rts {
		byPath[rt.Path] = rt
	}
	for name, folder := range forged {
		rt, ok := byPath[folder]
		if !ok {
			t.Errorf("%s (%s) not reported at all", name, folder)
			continue
		}
		if rt.Root != "" || !strings.Contains(rt.Pinned, "not proven") {
			t.Errorf("%s: root %q, pinned %q: want no root and a 'not proven' pin", name, rt.Root, rt.Pinned)
		}
		var moved []string
		rt.Root = filepath.Dir(folder) // even a plan that claims a root
		if err := b.Delete(ctx, rt, backend.DeleteOptions{Discard: discardInto(t, &moved)}); err == nil || len(moved) > 0 {
			t.Errorf("%s: Delete = %v, moved %v: want refused, nothing moved", name, err, moved)
		}
	}
	if _, err := os.Stat(filepath.Join(l.clone, ".env")); err != nil {
		t.Fatalf("the clone lost its .env: %v", err)
	}
	rt, ok := byPath[l.agent]
	if !ok || rt.Root != l.wts || rt.Pinned != "" {
		t.Fatalf("the agent's worktree: %+v, want root %s and no pin", rt, l.wts)
	}
	var moved []string
	if err := b.Delete(ctx, rt, backend.DeleteOptions{Discard: discardInto(t, &moved)}); err != nil || len(moved) != 1 {
		t.Fatalf("Delete of the real worktree = %v, moved %v", err, moved)
	}
}

// TestWorktreeOwnershipRootSourceChecksTheOtherSide: under a root = source,
// a folder whose .git file names an admin folder that does not name it back
// is not a runtime, and the forged entries of a repository found there are
// reported, not acted on.
func TestWorktreeOwnershipRootSourceChecksTheOtherSide(t *testing.T) {
	l := newLayout(t)
	// A copy of the agent's .git file in another folder under the root: it
	// names the agent's admin folder, which names the agent's folder only.
	copied := filepath.Join(l.wts, "copy")
	data, err := os.ReadFile(filepath.Join(l.agent, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, filepath.Join(copied, ".git"), string(data))
	// And a forged entry naming a clone inside the root.
	inRoot := filepath.Join(l.wts, "clone")
	testtree.Git(t, l.wts, "clone", "-q", l.repo, inRoot)
	forge(t, l.repo, "evil", inRoot)
	b := &Backend{Root: l.wts, Git: git}
	rts, err := b.List(testtree.Context(t), backend.ListOptions{Light: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range rts {
		switch rt.Path {
		case l.agent:
			if rt.Root != l.wts || rt.Pinned != "" {
				t.Errorf("agent: root %q pin %q", rt.Root, rt.Pinned)
			}
		case inRoot:
			if rt.Root != "" || !strings.Contains(rt.Pinned, "not proven") {
				t.Errorf("forged clone in root: root %q pin %q, want reported only", rt.Root, rt.Pinned)
			}
		default:
			t.Errorf("unexpected runtime %s (root %q, pin %q)", rt.Path, rt.Root, rt.Pinned)
		}
	}
}

// TestWorktreeDeleteRemovesOnlyItsOwnEntry: removing one worktree removes
// exactly its admin folder; another worktree whose folder is absent at that
// moment (an unplugged disk, moved aside) keeps its HEAD, index and
// detached commits.
func TestWorktreeDeleteRemovesOnlyItsOwnEntry(t *testing.T) {
	l := newLayout(t)
	away := filepath.Join(l.wts, "away")
	testtree.Git(t, l.repo, "worktree", "add", "-q", "--detach", away)
	testtree.Write(t, filepath.Join(away, "f"), "detached work\n")
	testtree.Git(t, away, "add", "f")
	testtree.Git(t, away, "commit", "-q", "-m", "detached")
	head := strings.TrimSpace(testtree.Git(t, away, "rev-parse", "HEAD"))
	aside := away + ".aside"
	if err := os.Rename(away, aside); err != nil {
		t.Fatal(err)
	}
	b := &Backend{Repo: l.repo, Git: git}
	ctx := testtree.Context(t)
	rts, err := b.List(ctx, backend.ListOptions{Light: true})
	if err != nil {
		t.Fatal(err)
	}
	var agent *backend.Runtime
	for i := range rts {
		if rts[i].Path == l.agent {
			agent = &rts[i]
		}
	}
	if agent == nil {
		t.Fatalf("agent worktree not listed: %+v", rts)
	}
	var moved []string
	if err := b.Delete(ctx, *agent, backend.DeleteOptions{Discard: discardInto(t, &moved)}); err != nil {
		t.Fatal(err)
	}
	admins := testtree.Names(t, filepath.Join(l.repo, ".git", "worktrees"))
	if len(admins) != 1 || admins[0] != "away" {
		t.Fatalf("admin folders after delete: %v, want only away's", admins)
	}
	if err := os.Rename(aside, away); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(testtree.Git(t, away, "rev-parse", "HEAD")); got != head {
		t.Fatalf("the absent worktree's HEAD is %s after coming back, want %s", got, head)
	}
	if out := testtree.Git(t, l.repo, "worktree", "list", "--porcelain"); strings.Contains(out, l.agent+"\n") {
		t.Fatalf("git still lists the removed worktree:\n%s", out)
	}
}

// TestWorktreeThatCannotBeArchivedIsKept: a worktree in the middle of a
// merge and one with a checked-out submodule are listed with that state
// named as unarchivable, so no policy removes them, and Export refuses
// them.
func TestWorktreeThatCannotBeArchivedIsKept(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		make       func(t *testing.T, l layout)
	}{
		{"merge in progress", "a merge in progress", func(t *testing.T, l layout) {
			testtree.Write(t, filepath.Join(l.repo, "src", "main.go"), "package main // main\n")
			testtree.Git(t, l.repo, "commit", "-q", "-am", "main side")
			testtree.Write(t, filepath.Join(l.agent, "src", "main.go"), "package main // agent\n")
			testtree.Git(t, l.agent, "commit", "-q", "-am", "agent side")
			if _, err := testtree.GitErr(t, l.agent, "merge", "-q", "main"); err == nil {
				t.Fatal("the merge did not conflict")
			}
		}},
		{"checked-out submodule", "submodule lib", func(t *testing.T, l layout) {
			testtree.Git(t, l.agent, "submodule", "add", "-q", l.clone, "lib")
			testtree.Write(t, filepath.Join(l.agent, "lib", "work.txt"), "edited inside the submodule\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLayout(t)
			tc.make(t, l)
			b := &Backend{Repo: l.repo, Git: git}
			rts, err := b.List(testtree.Context(t), backend.ListOptions{IDs: []string{"repo:agent"}})
			if err != nil || len(rts) != 1 {
				t.Fatalf("list: %v %+v", err, rts)
			}
			if !strings.Contains(rts[0].Unarchivable, tc.want) {
				t.Fatalf("Unarchivable = %q, want it to name %q", rts[0].Unarchivable, tc.want)
			}
			s, err := sink.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.Export(testtree.Context(t), rts[0], backend.ExportOptions{Dir: t.TempDir(), Sink: s, Name: "worktree/x/20260102T030405Z"})
			if !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("Export of a worktree that cannot be archived exactly: %v, want ErrUnsupported", err)
			}
		})
	}
}

// TestIgnoredFolderShedOnlyWhenRebuildableArchive: what the dependencies
// step would not shed is what a worktree's archive keeps: ignored secrets,
// credentials and state come back with the worktree; a rebuildable
// node_modules is left out.
func TestIgnoredFolderShedOnlyWhenRebuildableArchive(t *testing.T) {
	l := newLayout(t)
	testtree.Write(t, filepath.Join(l.agent, ".gitignore"), ".env\nsecrets/\n.aws/\nnode_modules/\n")
	testtree.Git(t, l.agent, "add", ".gitignore")
	testtree.Git(t, l.agent, "commit", "-q", "-m", "ignore")
	kept := map[string]string{
		"secrets/.env":     "TOKEN=1\n",
		".aws/credentials": "[default]\n",
		".env":             "A=1\n",
	}
	for p, c := range kept {
		testtree.Write(t, filepath.Join(l.agent, p), c)
	}
	testtree.Write(t, filepath.Join(l.agent, "node_modules", "x", "index.js"), "module.exports = 1\n")
	b := &Backend{Repo: l.repo, Git: git}
	ctx := testtree.Context(t)
	rts, err := b.List(ctx, backend.ListOptions{IDs: []string{"repo:agent"}})
	if err != nil || len(rts) != 1 {
		t.Fatalf("list: %v %+v", err, rts)
	}
	s, err := sink.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	exp, err := b.Export(ctx, rts[0], backend.ExportOptions{Dir: t.TempDir(), Sink: s, Name: "worktree/repo:agent/20260102T030405Z", CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	testtree.Git(t, l.repo, "worktree", "remove", "--force", l.agent)
	if _, err := b.Restore(ctx, rts[0].Key, backend.RestoreOptions{Manifest: exp.Manifest, Sink: s, Staging: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	for p, c := range kept {
		if got, err := os.ReadFile(filepath.Join(l.agent, p)); err != nil || string(got) != c {
			t.Errorf("%s after restore: %q %v, want %q", p, got, err, c)
		}
	}
	if _, err := os.Lstat(filepath.Join(l.agent, "node_modules")); !os.IsNotExist(err) {
		t.Errorf("node_modules came back (%v): it is rebuildable and left out", err)
	}
}
