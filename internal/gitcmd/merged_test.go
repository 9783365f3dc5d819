package gitcmd_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// mergeRepo is a repository on main with a file of ten lines, and a
// branch feat holding two commits the test then integrates (or not).
type mergeRepo struct {
	t          *testing.T
	dir        string
	feat, base string // feat's tip and its fork point
}

const tenLines = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n"

func newMergeRepo(t *testing.T) *mergeRepo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	write(t, filepath.Join(dir, "lines.txt"), tenLines)
	write(t, filepath.Join(dir, "other.txt"), "other\n")
	git(t, filepath.Dir(dir), "init", "-q", "-b", "main", dir)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "base")
	m := &mergeRepo{t: t, dir: dir, base: trim(git(t, dir, "rev-parse", "HEAD"))}
	git(t, dir, "checkout", "-q", "-b", "feat")
	m.edit("lines.txt", "two\n", "TWO\n")
	git(t, dir, "commit", "-q", "-am", "feat: two")
	write(t, filepath.Join(dir, "new.txt"), "new file\n")
	git(t, dir, "add", "new.txt")
	git(t, dir, "commit", "-q", "-m", "feat: new file")
	m.feat = trim(git(t, dir, "rev-parse", "HEAD"))
	git(t, dir, "checkout", "-q", "main")
	return m
}

func trim(s string) string { return strings.TrimSpace(s) }

// edit replaces old by new in the repository's file name.
func (m *mergeRepo) edit(name, old, new string) {
	m.t.Helper()
	p := filepath.Join(m.dir, name)
	data, err := os.ReadFile(p)
	if err != nil {
		m.t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		m.t.Fatalf("%s does not hold %q", name, old)
	}
	write(m.t, p, strings.Replace(string(data), old, new, 1))
}

// commitOnMain edits a file on main and commits.
func (m *mergeRepo) commitOnMain(name, old, new, msg string) {
	m.t.Helper()
	git(m.t, m.dir, "checkout", "-q", "main")
	m.edit(name, old, new)
	git(m.t, m.dir, "commit", "-q", "-am", msg)
}

func (m *mergeRepo) integrated(opts gitcmd.IntegrationOptions) (gitcmd.Integration, bool, error) {
	m.t.Helper()
	if opts.Scratch == "" {
		opts.Scratch = m.t.TempDir()
	}
	if opts.Branch == "" {
		opts.Branch = "feat"
	}
	return gitcmd.Runner{}.Integrated(ctx(m.t), m.dir, m.feat, opts)
}

func (m *mergeRepo) want(wantOK bool, wantHow string) {
	m.t.Helper()
	in, ok, err := m.integrated(gitcmd.IntegrationOptions{})
	if err != nil {
		m.t.Fatalf("Integrated: %v", err)
	}
	if ok != wantOK || (ok && (in.How != wantHow || in.Into != "main")) {
		m.t.Fatalf("Integrated = %+v, %v; want ok=%v how=%q into main", in, ok, wantOK, wantHow)
	}
}

// TestIntegratedEachKindOfMerge: work merged plainly (fast-forward or a
// merge commit), rebased onto a main that moved, or squashed (a squash
// commit, also after main changed the same lines since) is merged; the
// text says so.
func TestIntegratedEachKindOfMerge(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		do   func(m *mergeRepo)
		how  string
	}{
		{"fast-forward", func(m *mergeRepo) { git(m.t, m.dir, "merge", "-q", "--ff-only", "feat") }, gitcmd.MergedPlainly},
		{"merge commit", func(m *mergeRepo) {
			m.commitOnMain("other.txt", "other\n", "other changed\n", "main moves")
			git(m.t, m.dir, "merge", "-q", "--no-ff", "-m", "merge feat", "feat")
		}, gitcmd.MergedPlainly},
		{"rebased, then main moved on", func(m *mergeRepo) {
			m.commitOnMain("other.txt", "other\n", "other changed\n", "main moves")
			git(m.t, m.dir, "cherry-pick", m.base+".."+m.feat)
			m.commitOnMain("other.txt", "other changed\n", "other changed again\n", "main moves on")
		}, gitcmd.MergedIntegrated},
		{"rebased past nearby changes", func(m *mergeRepo) {
			// Context lines differ: patch ids do not match, the simulated
			// merge adds nothing.
			m.commitOnMain("lines.txt", "four\n", "FOUR\n", "main edits near")
			git(m.t, m.dir, "cherry-pick", m.base+".."+m.feat)
		}, gitcmd.MergedIntegrated},
		{"rebased, then the same lines changed on main", func(m *mergeRepo) {
			// The simulated merge conflicts; the patch ids match.
			m.commitOnMain("other.txt", "other\n", "other changed\n", "main moves")
			git(m.t, m.dir, "cherry-pick", m.base+".."+m.feat)
			m.commitOnMain("lines.txt", "TWO\n", "two, reworded later\n", "main rewords")
		}, gitcmd.MergedRebased},
		{"squashed", func(m *mergeRepo) {
			m.commitOnMain("other.txt", "other\n", "other changed\n", "main moves")
			git(m.t, m.dir, "merge", "-q", "--squash", "feat")
			git(m.t, m.dir, "commit", "-q", "-m", "squash feat")
		}, gitcmd.MergedIntegrated},
		{"squashed, then the same lines changed on main", func(m *mergeRepo) {
			git(m.t, m.dir, "merge", "-q", "--squash", "feat")
			git(m.t, m.dir, "commit", "-q", "-m", "squash feat")
			m.commitOnMain("lines.txt", "TWO\n", "two, reworded later\n", "main rewords")
			git(m.t, m.dir, "rm", "-q", "new.txt")
			git(m.t, m.dir, "commit", "-q", "-m", "main drops the new file")
		}, gitcmd.MergedSquashed}, // its patch id is the work's
		{"squashed next to main's own change, then the same lines changed", func(m *mergeRepo) {
			// Its context differs, so only its tree tells.
			m.commitOnMain("lines.txt", "four\n", "FOUR\n", "main edits near")
			git(m.t, m.dir, "merge", "-q", "--squash", "feat")
			git(m.t, m.dir, "commit", "-q", "-m", "squash feat")
			m.commitOnMain("lines.txt", "TWO\n", "two, reworded later\n", "main rewords")
		}, gitcmd.MergedSquashed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := newMergeRepo(t)
			c.do(m)
			m.want(true, c.how)
			in, _, _ := m.integrated(gitcmd.IntegrationOptions{})
			if want := "merged into main"; !strings.HasPrefix(in.String(), want) {
				t.Errorf("String() = %q, want it to start with %q", in.String(), want)
			}
		})
	}
}

// TestIntegratedNearMisses: work of which anything is not in main is not
// merged: one commit left out, a conflict resolved differently, a squash
// of part of the branch, a rebased commit whose indentation changed, work
// merged into another branch only, or nothing done at all.
func TestIntegratedNearMisses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		do   func(m *mergeRepo)
		left int // commits main lacks
	}{
		{"nothing merged", func(m *mergeRepo) {}, 2},
		{"one commit not merged", func(m *mergeRepo) {
			git(m.t, m.dir, "cherry-pick", m.feat) // the second only
		}, 2},
		{"one commit not merged, the other merged plainly", func(m *mergeRepo) {
			git(m.t, m.dir, "merge", "-q", "--ff-only", m.feat+"^")
		}, 1},
		{"a conflict resolved differently", func(m *mergeRepo) {
			m.commitOnMain("lines.txt", "two\n", "deux\n", "main changes the same line")
			if _, err := gitErr(m.t, m.dir, "merge", "--squash", "feat"); err == nil {
				m.t.Fatal("the squash merge did not conflict")
			}
			write(m.t, filepath.Join(m.dir, "lines.txt"), strings.Replace(tenLines, "two\n", "deux\n", 1))
			git(m.t, m.dir, "add", "-A")
			git(m.t, m.dir, "commit", "-q", "-m", "squash feat, ours kept")
		}, 2},
		{"a squash of part of the branch", func(m *mergeRepo) {
			git(m.t, m.dir, "checkout", "-q", m.feat+"^", "--", "lines.txt")
			git(m.t, m.dir, "commit", "-q", "-m", "squash of the first commit only")
		}, 2},
		{"rebased with its indentation changed", func(m *mergeRepo) {
			m.edit("lines.txt", "two\n", "  TWO\n")
			write(m.t, filepath.Join(m.dir, "new.txt"), "new file\n")
			git(m.t, m.dir, "add", "-A")
			git(m.t, m.dir, "commit", "-q", "-m", "the same, indented")
		}, 2},
		{"merged into another branch", func(m *mergeRepo) {
			git(m.t, m.dir, "checkout", "-q", "-b", "release")
			git(m.t, m.dir, "merge", "-q", "--no-ff", "-m", "merge", "feat")
			git(m.t, m.dir, "checkout", "-q", "main")
		}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := newMergeRepo(t)
			c.do(m)
			m.want(false, "")
			if in, _, _ := m.integrated(gitcmd.IntegrationOptions{}); in.Remaining != c.left {
				t.Errorf("Remaining = %d, want %d", in.Remaining, c.left)
			}
		})
	}
}

// TestIntegratedOnTheRemote: a pull request squash-merged on the server
// and fetched, with the local main behind, is merged into origin/main;
// the default branch comes from origin/HEAD (here "develop").
func TestIntegratedOnTheRemote(t *testing.T) {
	t.Parallel()
	m := newMergeRepo(t)
	git(t, m.dir, "branch", "-m", "main", "develop")
	server := filepath.Join(t.TempDir(), "server.git")
	git(t, m.dir, "clone", "-q", "--bare", m.dir, server)
	git(t, m.dir, "remote", "add", "origin", server)
	git(t, m.dir, "fetch", "-q", "origin")
	git(t, m.dir, "remote", "set-head", "origin", "develop")
	// The server squash-merges feat into its develop.
	work := filepath.Join(t.TempDir(), "work")
	git(t, filepath.Dir(work), "clone", "-q", "-b", "develop", server, work)
	git(t, work, "merge", "-q", "--squash", "origin/feat")
	git(t, work, "commit", "-q", "-m", "squash feat (#1)")
	git(t, work, "push", "-q", "origin", "develop")
	git(t, m.dir, "fetch", "-q", "origin")
	git(t, m.dir, "branch", "-q", "-D", "feat") // only the worktree's HEAD has it now
	git(t, m.dir, "push", "-q", "origin", "--delete", "feat")
	git(t, m.dir, "fetch", "-q", "--prune", "origin")

	refs, err := gitcmd.Runner{}.IntegrationBranches(ctx(t), m.dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"refs/heads/develop", "refs/remotes/origin/develop"}; !slices.Equal(refs, want) {
		t.Fatalf("IntegrationBranches = %q, want %q", refs, want)
	}
	in, ok, err := gitcmd.Runner{}.Integrated(ctx(t), m.dir, m.feat, gitcmd.IntegrationOptions{Scratch: t.TempDir()})
	if err != nil || !ok || in.Into != "origin/develop" || in.How != gitcmd.MergedIntegrated {
		t.Fatalf("Integrated = %+v, %v, %v; want integrated into origin/develop", in, ok, err)
	}
}

// TestIntegrationBranchesChoice: origin/HEAD first, then the repository's
// own init.defaultBranch, then main, then master; never the worktree's own
// branch; a local upstream of the branch is one too.
func TestIntegrationBranchesChoice(t *testing.T) {
	t.Parallel()
	r := gitcmd.Runner{}
	m := newMergeRepo(t)
	got := func(branch string) []string {
		t.Helper()
		refs, err := r.IntegrationBranches(ctx(t), m.dir, branch)
		if err != nil {
			t.Fatal(err)
		}
		return refs
	}
	if g := got("feat"); !slices.Equal(g, []string{"refs/heads/main"}) {
		t.Errorf("plain repository: %q", g)
	}
	if g := got("main"); len(g) != 0 {
		t.Errorf("main's own worktree: %q, want nothing", g)
	}
	git(t, m.dir, "branch", "-m", "main", "master")
	if g := got("feat"); !slices.Equal(g, []string{"refs/heads/master"}) {
		t.Errorf("master: %q", g)
	}
	git(t, m.dir, "branch", "trunk", "master")
	git(t, m.dir, "config", "init.defaultBranch", "trunk")
	if g := got("feat"); !slices.Equal(g, []string{"refs/heads/trunk"}) {
		t.Errorf("init.defaultBranch=trunk: %q", g)
	}
	git(t, m.dir, "config", "init.defaultBranch", "*")
	if g := got("feat"); !slices.Equal(g, []string{"refs/heads/master"}) {
		t.Errorf("init.defaultBranch=* (refused): %q", g)
	}
	git(t, m.dir, "branch", "--set-upstream-to=trunk", "feat")
	if g := got("feat"); !slices.Equal(g, []string{"refs/heads/master", "refs/heads/trunk"}) {
		t.Errorf("with a local upstream: %q", g)
	}
}

// TestIntegratedLeavesTheRepositoryAlone: the simulated merges write into
// the quarantine only: the repository's objects and refs are the same
// after, and the quarantine is gone.
func TestIntegratedLeavesTheRepositoryAlone(t *testing.T) {
	t.Parallel()
	m := newMergeRepo(t)
	m.commitOnMain("lines.txt", "nine\n", "NINE\n", "main moves")
	objects := func() string {
		out := git(t, m.dir, "count-objects", "-v")
		refs := git(t, m.dir, "for-each-ref")
		return out + refs
	}
	before := objects()
	scratch := t.TempDir()
	if _, ok, err := m.integrated(gitcmd.IntegrationOptions{Scratch: scratch}); err != nil || ok {
		t.Fatalf("Integrated = %v, %v; want not merged", ok, err)
	}
	if after := objects(); after != before {
		t.Errorf("the repository changed:\nbefore %s\nafter %s", before, after)
	}
	if names := markers(t, scratch); len(names) != 0 {
		t.Errorf("quarantine left behind: %v", names)
	}
}

// TestIntegratedIgnoresHostileMergeSettings: a merge driver the repository
// configures never runs (it would have written a marker and answered
// "merged"), and a union merge attribute cannot make a change that
// conflicts with main look merged.
func TestIntegratedIgnoresHostileMergeSettings(t *testing.T) {
	t.Parallel()
	m := newMergeRepo(t)
	marker := filepath.Join(t.TempDir(), "driver-ran")
	// ours: keep main's side, exit 0 (clean): "adds nothing".
	git(t, m.dir, "config", "merge.evil.driver", "touch "+marker+"; true")
	write(t, filepath.Join(m.dir, ".git", "info", "attributes"), "lines.txt merge=evil\n")
	m.commitOnMain("lines.txt", "two\n", "deux\n", "main changes the same line")
	// The trap is armed: plain git runs the driver, and the merge is clean.
	git(t, m.dir, "merge-tree", "--write-tree", "main", m.feat)
	if err := os.Remove(marker); err != nil {
		t.Fatalf("plain git did not run the driver: %v", err)
	}
	if _, ok, err := m.integrated(gitcmd.IntegrationOptions{}); err != nil || ok {
		t.Fatalf("with a merge driver: ok=%v err=%v, want not merged", ok, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the repository's merge driver ran")
	}
	// The branch deletes a line main changed: a union merge keeps main's
	// line and drops the deletion silently.
	u := newMergeRepo(t)
	git(t, u.dir, "checkout", "-q", "-b", "del", u.base)
	u.edit("lines.txt", "five\n", "")
	git(t, u.dir, "commit", "-q", "-am", "delete five")
	u.feat = trim(git(t, u.dir, "rev-parse", "HEAD"))
	u.commitOnMain("lines.txt", "five\n", "FIVE\n", "main changes five")
	write(t, filepath.Join(u.dir, ".git", "info", "attributes"), "* merge=union\n")
	// Armed: plain git's union merge is clean and adds nothing to main.
	tree := lines(git(t, u.dir, "merge-tree", "--write-tree", "main", u.feat))[0]
	if want := trim(git(t, u.dir, "rev-parse", "main^{tree}")); tree != want {
		t.Fatalf("plain git's union merge gave %s, want main's tree %s", tree, want)
	}
	in, ok, err := u.integrated(gitcmd.IntegrationOptions{Branch: "del"})
	if err != nil || ok {
		t.Fatalf("with merge=union: %+v ok=%v err=%v, want not merged", in, ok, err)
	}
}

// TestIntegratedBoundsHistory: more commits since the fork than allowed is
// an error wrapping ErrTooMuchHistory and never "merged".
func TestIntegratedBoundsHistory(t *testing.T) {
	t.Parallel()
	m := newMergeRepo(t)
	for i := 0; i < 3; i++ {
		m.commitOnMain("other.txt", "other\n", "other\nmore\n", "main grows")
		m.edit("other.txt", "other\nmore\n", "other\n")
		git(t, m.dir, "commit", "-q", "-am", "main shrinks")
	}
	git(t, m.dir, "cherry-pick", m.base+".."+m.feat)
	if _, ok, err := m.integrated(gitcmd.IntegrationOptions{}); err != nil || !ok {
		t.Fatalf("unbounded: ok=%v err=%v, want merged", ok, err)
	}
	_, ok, err := m.integrated(gitcmd.IntegrationOptions{MaxCommits: 4})
	if ok || !errors.Is(err, gitcmd.ErrTooMuchHistory) {
		t.Fatalf("MaxCommits 4: ok=%v err=%v, want ErrTooMuchHistory", ok, err)
	}
}

// TestIntegrationCacheAsksAgainWhenABranchMoves: a cached "not merged"
// becomes "merged" once main takes the work.
func TestIntegrationCacheAsksAgainWhenABranchMoves(t *testing.T) {
	t.Parallel()
	m := newMergeRepo(t)
	var c gitcmd.IntegrationCache
	opts := gitcmd.IntegrationOptions{Branch: "feat", Scratch: t.TempDir()}
	for i := 0; i < 2; i++ {
		if _, ok, err := c.Integrated(ctx(t), gitcmd.Runner{}, m.dir, m.feat, opts); err != nil || ok {
			t.Fatalf("before the merge: ok=%v err=%v", ok, err)
		}
	}
	git(t, m.dir, "merge", "-q", "--ff-only", "feat")
	in, ok, err := c.Integrated(ctx(t), gitcmd.Runner{}, m.dir, m.feat, opts)
	if err != nil || !ok || in.How != gitcmd.MergedPlainly {
		t.Fatalf("after the merge: %+v ok=%v err=%v", in, ok, err)
	}
}
