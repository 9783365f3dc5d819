package archive

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// git runs the real git for test setup and checks, as a user would, with
// a fixed identity and no global config.
func git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := gitCmd(dir, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("git %q in %s: %v\n%s", args, dir, err, stderr.String())
	}
	return strings.TrimSuffix(string(out), "\n")
}

// gitFails runs git and returns whether it failed.
func gitFails(dir string, args ...string) bool {
	return gitCmd(dir, args...).Run() != nil
}

func gitCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com")
	return cmd
}

type repoFixture struct {
	base, repo, remote, wt string
}

// newRepo makes a repository with one pushed commit on main and a linked
// worktree on branch feature with two commits that are on no remote.
func newRepo(t *testing.T) repoFixture {
	t.Helper()
	base := t.TempDir()
	f := repoFixture{
		base:   base,
		repo:   filepath.Join(base, "repo"),
		remote: filepath.Join(base, "remote.git"),
		wt:     filepath.Join(base, "wt"),
	}
	git(t, base, "init", "-q", "--bare", f.remote)
	git(t, base, "init", "-q", "-b", "main", f.repo)
	write(t, filepath.Join(f.repo, "a.txt"), "a\n", 0o644)
	write(t, filepath.Join(f.repo, "b.txt"), "b\n", 0o644)
	write(t, filepath.Join(f.repo, "del.txt"), "delete me\n", 0o644)
	write(t, filepath.Join(f.repo, "sub/c.txt"), "c\n", 0o644)
	write(t, filepath.Join(f.repo, ".gitignore"), ".env\nnode_modules/\n", 0o644)
	git(t, f.repo, "add", "-A")
	git(t, f.repo, "commit", "-q", "-m", "initial")
	git(t, f.repo, "remote", "add", "origin", f.remote)
	git(t, f.repo, "push", "-q", "-u", "origin", "main")
	git(t, f.repo, "worktree", "add", "-q", "-b", "feature", f.wt, "main")
	for i, name := range []string{"one.txt", "two.txt"} {
		write(t, filepath.Join(f.wt, name), strings.Repeat("x", i+1)+"\n", 0o644)
		git(t, f.wt, "add", name)
		git(t, f.wt, "commit", "-q", "-m", "add "+name)
	}
	return f
}

// dirty leaves every kind of unsaved work in the worktree, and ignored
// files that must not be saved.
func dirty(t *testing.T, wt string) {
	t.Helper()
	write(t, filepath.Join(wt, "a.txt"), "a changed\n", 0o644) // modified, unstaged
	write(t, filepath.Join(wt, "b.txt"), "b staged\n", 0o644)  // staged, then changed again
	git(t, wt, "add", "b.txt")
	write(t, filepath.Join(wt, "b.txt"), "b staged and changed\n", 0o644)
	write(t, filepath.Join(wt, "staged.txt"), "new and staged\n", 0o644) // new, staged
	git(t, wt, "add", "staged.txt")
	must(t, os.Remove(filepath.Join(wt, "del.txt")))                                // deleted, unstaged
	write(t, filepath.Join(wt, "untracked.txt"), "untracked\n", 0o644)              // untracked
	write(t, filepath.Join(wt, "newdir/deep/file.txt"), "in a new folder\n", 0o644) // untracked, new folder
	write(t, filepath.Join(wt, "bad\xff\xfe.txt"), "non-utf-8 name\n", 0o644)       // untracked, odd name
	write(t, filepath.Join(wt, "run.sh"), "#!/bin/sh\n", 0o755)                     // untracked, executable
	must(t, os.Symlink("a.txt", filepath.Join(wt, "link")))                         // untracked symlink
	write(t, filepath.Join(wt, ".env"), "SECRET=1\n", 0o600)                        // ignored
	write(t, filepath.Join(wt, "node_modules/pkg/index.js"), "x\n", 0o644)          // ignored
}

// userState is what Snapshot must leave alone.
type userState struct {
	head, staged, status string
	index                []byte
}

func stateOf(t *testing.T, wt string) userState {
	t.Helper()
	index, err := os.ReadFile(git(t, wt, "rev-parse", "--path-format=absolute", "--git-path", "index"))
	must(t, err)
	return userState{
		head:   git(t, wt, "rev-parse", "HEAD"),
		staged: git(t, wt, "diff", "--cached", "--name-only"),
		status: statusOf(t, wt),
		index:  index,
	}
}

// statusOf is git status as a user sees it, paths sorted.
func statusOf(t *testing.T, wt string) string {
	t.Helper()
	recs := strings.Split(strings.TrimSuffix(git(t, wt, "status", "--porcelain=v1", "-z", "--untracked-files=all"), "\x00"), "\x00")
	sort.Strings(recs)
	return strings.Join(recs, "\n")
}

// contentOf fingerprints the worktree's files (not .git, nor ignored ones).
func contentOf(t *testing.T, wt string) string {
	return dropLines(testtree.Fingerprint(t, wt), ".git", ".env", "node_modules")
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	for _, variant := range []string{"branch kept", "branch deleted"} {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			var r gitcmd.Runner
			f := newRepo(t)
			dirty(t, f.wt)
			before := stateOf(t, f.wt)
			content := contentOf(t, f.wt)
			t.Logf("status before archiving:\n%s", before.status)

			in, err := Inspect(ctx, r, f.wt)
			must(t, err)
			if in.Changed != 4 || in.Untracked != 5 || in.Unpushed != 2 || in.Branch != "feature" || in.Head != before.head || in.Commit != "" {
				t.Errorf("Inspect = %+v; want 4 changed, 5 untracked, 2 unpushed on feature at %s", in, before.head)
			}
			if after := stateOf(t, f.wt); !bytes.Equal(after.index, before.index) {
				t.Errorf("Inspect changed the index file")
			}

			const ref = "refs/reclaimer/wt-1"
			s, err := SnapshotWorktree(ctx, r, f.wt, ref)
			must(t, err)
			if s.Commit == "" || s.Ref != ref || s.Head != before.head || s.Branch != "feature" || s.Remote != f.remote {
				t.Fatalf("Snapshot = %+v", s)
			}
			if got, want := s.Unsaved(), "uncommitted changes to 4 files; 5 untracked files; 2 commits not on any remote"; got != want {
				t.Errorf("Unsaved() = %q, want %q", got, want)
			}
			if got := git(t, f.repo, "rev-parse", ref); got != s.Commit {
				t.Errorf("%s = %s, want %s", ref, got, s.Commit)
			}
			// The user's branch, index and working tree are untouched.
			after := stateOf(t, f.wt)
			if after.head != before.head || after.staged != before.staged || after.status != before.status {
				t.Errorf("user state changed:\n%+v\n%+v", before, after)
			}
			if !bytes.Equal(after.index, before.index) {
				t.Errorf("Snapshot changed the index file")
			}
			if got := contentOf(t, f.wt); got != content {
				t.Errorf("Snapshot changed the working tree")
			}
			// What is in the snapshot: untracked files yes, ignored no.
			files := strings.Split(git(t, f.repo, "ls-tree", "-r", "-z", "--name-only", s.Commit), "\x00")
			for _, p := range []string{"untracked.txt", "newdir/deep/file.txt", "bad\xff\xfe.txt", "run.sh", "link", "staged.txt", "a.txt", "one.txt"} {
				if !slices.Contains(files, p) {
					t.Errorf("snapshot lacks %q: %q", p, files)
				}
			}
			for _, p := range []string{".env", "node_modules/pkg/index.js", "del.txt"} {
				if slices.Contains(files, p) {
					t.Errorf("snapshot holds %q", p)
				}
			}
			if mode := git(t, f.repo, "ls-tree", s.Commit, "link"); !strings.HasPrefix(mode, "120000 ") {
				t.Errorf("link stored as %q, want a symlink", mode)
			}
			if got := git(t, f.repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%P", s.Commit); !strings.HasPrefix(got, "reclaimer <reclaimer@localhost>|reclaimer <reclaimer@localhost>|"+before.head+" ") {
				t.Errorf("snapshot commit %q", got)
			}
			// Again, with nothing changed: the same commit.
			again, err := SnapshotWorktree(ctx, r, f.wt, ref)
			must(t, err)
			if again.Commit != s.Commit {
				t.Errorf("second snapshot %s, want the same %s", again.Commit, s.Commit)
			}

			bundle := filepath.Join(f.base, "archive", "wt-1.bundle")
			must(t, os.MkdirAll(filepath.Dir(bundle), 0o755))
			obj, err := WriteBundle(ctx, r, f.repo, bundle, []string{"refs/heads/feature", ref})
			must(t, err)
			must(t, obj.Verify(ctx))
			if obj.Kind != KindBundle || obj.Path != bundle {
				t.Errorf("bundle object %+v", obj)
			}
			if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(bundle), ".*")); len(leftovers) > 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}

			// The worktree goes away.
			must(t, os.RemoveAll(f.wt))
			git(t, f.repo, "worktree", "prune")
			if variant == "branch deleted" {
				git(t, f.repo, "branch", "-q", "-D", "feature")
				git(t, f.repo, "update-ref", "-d", ref)
				git(t, f.repo, "reflog", "expire", "--expire=now", "--all")
				git(t, f.repo, "gc", "-q", "--prune=now")
				if !gitFails(f.repo, "cat-file", "-e", s.Commit) || !gitFails(f.repo, "cat-file", "-e", before.head) {
					t.Fatal("the repository still has the commits; the test would not exercise the bundle")
				}
			}

			dest := filepath.Join(f.base, "restored")
			must(t, RestoreWorktree(ctx, r, f.repo, bundle, dest, "feature", ref))
			if got := git(t, dest, "rev-parse", "HEAD"); got != before.head {
				t.Errorf("restored HEAD %s, want %s", got, before.head)
			}
			if got := git(t, dest, "symbolic-ref", "--short", "HEAD"); got != "feature" {
				t.Errorf("restored branch %q, want feature", got)
			}
			if got := statusOf(t, dest); got != before.status {
				t.Errorf("restored status:\n%s\nwant:\n%s", got, before.status)
			}
			if got := git(t, dest, "diff", "--cached", "--name-only"); got != before.staged {
				t.Errorf("restored staged %q, want %q", got, before.staged)
			}
			if got := contentOf(t, dest); got != content {
				t.Errorf("restored content:\n%s\nwant:\n%s", got, content)
			}
			for _, p := range []string{".env", "node_modules"} {
				if _, err := os.Lstat(filepath.Join(dest, p)); !os.IsNotExist(err) {
					t.Errorf("ignored %s restored", p)
				}
			}
			// A second restore into the same place is refused.
			if err := RestoreWorktree(ctx, r, f.repo, bundle, dest, "feature", ref); !errors.Is(err, os.ErrExist) {
				t.Errorf("restore over an existing folder: %v", err)
			}
		})
	}
}

func TestSnapshotNothingUnsaved(t *testing.T) {
	ctx := context.Background()
	var r gitcmd.Runner
	f := newRepo(t)
	git(t, f.wt, "push", "-q", "-u", "origin", "feature")
	write(t, filepath.Join(f.wt, ".env"), "ignored\n", 0o600)
	before := stateOf(t, f.wt)
	s, err := SnapshotWorktree(ctx, r, f.wt, "refs/reclaimer/clean")
	must(t, err)
	if s.Commit != "" || s.Ref != "" || s.Changed != 0 || s.Untracked != 0 || s.Unpushed != 0 {
		t.Errorf("Snapshot = %+v, want nothing", s)
	}
	if got := s.Unsaved(); got != "" {
		t.Errorf("Unsaved() = %q, want \"\"", got)
	}
	if s.Remote != f.remote {
		t.Errorf("Remote = %q, want %q", s.Remote, f.remote)
	}
	if !gitFails(f.repo, "rev-parse", "--verify", "-q", "refs/reclaimer/clean") {
		t.Errorf("ref written with nothing to snapshot")
	}
	if after := stateOf(t, f.wt); after.head != before.head || !bytes.Equal(after.index, before.index) {
		t.Errorf("user state changed")
	}
}

// A detached worktree with local commits and nothing uncommitted: no
// snapshot commit, but the ref keeps the commits, and restore brings the
// detached worktree back.
func TestSnapshotDetachedHead(t *testing.T) {
	ctx := context.Background()
	var r gitcmd.Runner
	f := newRepo(t)
	wt := filepath.Join(f.base, "detached")
	git(t, f.repo, "worktree", "add", "-q", "--detach", wt, "main")
	write(t, filepath.Join(wt, "local.txt"), "only here\n", 0o644)
	git(t, wt, "add", "local.txt")
	git(t, wt, "commit", "-q", "-m", "detached work")
	head := git(t, wt, "rev-parse", "HEAD")

	const ref = "refs/reclaimer/detached"
	s, err := SnapshotWorktree(ctx, r, wt, ref)
	must(t, err)
	if s.Commit != "" || s.Ref != ref || s.Branch != "" || s.Head != head || s.Unpushed != 1 {
		t.Fatalf("Snapshot = %+v", s)
	}
	if got := s.Unsaved(); got != "1 commit not on any remote" {
		t.Errorf("Unsaved() = %q", got)
	}
	bundle := filepath.Join(f.base, "d.bundle")
	_, err = WriteBundle(ctx, r, f.repo, bundle, []string{ref})
	must(t, err)
	must(t, os.RemoveAll(wt))
	git(t, f.repo, "worktree", "prune")
	git(t, f.repo, "update-ref", "-d", ref)
	git(t, f.repo, "gc", "-q", "--prune=now")
	if !gitFails(f.repo, "cat-file", "-e", head) {
		t.Fatal("commit still in the repository")
	}
	dest := filepath.Join(f.base, "back")
	must(t, RestoreWorktree(ctx, r, f.repo, bundle, dest, s.Head, ref))
	if got := git(t, dest, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD %s, want %s", got, head)
	}
	if !gitFails(dest, "symbolic-ref", "-q", "HEAD") {
		t.Errorf("restored worktree is on a branch, want detached")
	}
	if got := statusOf(t, dest); got != "" {
		t.Errorf("status %q, want clean", got)
	}
}

// TestUnarchivableStateIsNeverSnapshotted: a merge in progress
// (MERGE_HEAD, the unmerged stages) cannot be held by a snapshot commit:
// Inspect names it, SnapshotWorktree refuses with ErrUnsupported, writes
// no ref and changes nothing.
func TestUnarchivableStateIsNeverSnapshotted(t *testing.T) {
	ctx := context.Background()
	var r gitcmd.Runner
	t.Run("merge in progress", func(t *testing.T) {
		f := newRepo(t)
		write(t, filepath.Join(f.repo, "a.txt"), "main side\n", 0o644)
		git(t, f.repo, "commit", "-q", "-am", "main side")
		write(t, filepath.Join(f.wt, "a.txt"), "feature side\n", 0o644)
		git(t, f.wt, "commit", "-q", "-am", "feature side")
		if !gitFails(f.wt, "merge", "-q", "main") {
			t.Fatal("merge did not conflict")
		}
		before := stateOf(t, f.wt)
		s, err := Inspect(ctx, r, f.wt)
		must(t, err)
		if why := s.CannotArchive(); !strings.Contains(why, "a merge in progress") || !strings.Contains(why, "unmerged path (a.txt)") {
			t.Fatalf("CannotArchive() = %q", why)
		}
		if _, err := SnapshotWorktree(ctx, r, f.wt, "refs/reclaimer/conflict"); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("snapshot in a merge: %v, want ErrUnsupported", err)
		}
		if after := stateOf(t, f.wt); !bytes.Equal(after.index, before.index) || after.status != before.status {
			t.Errorf("user state changed")
		}
		if refs := git(t, f.repo, "for-each-ref", "refs/reclaimer/"); refs != "" {
			t.Fatalf("refs written: %s", refs)
		}
	})
}

// The agent controls the repository: its config names an fsmonitor, a
// clean and smudge filter and hooks that would each leave a marker file.
// None may run during Inspect, Snapshot, WriteBundle or RestoreWorktree.
func TestSnapshotRunsNothingFromTheRepository(t *testing.T) {
	ctx := context.Background()
	var r gitcmd.Runner
	f := newRepo(t)
	markers := filepath.Join(f.base, "markers")
	must(t, os.Mkdir(markers, 0o755))
	script := func(name string) string {
		p := filepath.Join(f.base, "bin", name)
		write(t, p, "#!/bin/sh\ntouch "+filepath.Join(markers, name)+"\ncat\n", 0o755)
		return p
	}
	write(t, filepath.Join(f.wt, ".gitattributes"), "* filter=evil\n", 0o644)
	git(t, f.wt, "add", ".gitattributes")
	git(t, f.wt, "commit", "-q", "-m", "attributes")
	git(t, f.repo, "config", "core.fsmonitor", script("fsmonitor"))
	git(t, f.repo, "config", "filter.evil.clean", script("clean"))
	git(t, f.repo, "config", "filter.evil.smudge", script("smudge"))
	git(t, f.repo, "config", "filter.evil.required", "true")
	hooks := filepath.Join(f.base, "hooks")
	for _, h := range []string{"post-index-change", "reference-transaction", "post-checkout", "pre-commit", "post-commit"} {
		write(t, filepath.Join(hooks, h), "#!/bin/sh\ntouch "+filepath.Join(markers, h)+"\n", 0o755)
		write(t, filepath.Join(f.repo, ".git/hooks", h), "#!/bin/sh\ntouch "+filepath.Join(markers, "default-"+h)+"\n", 0o755)
	}
	git(t, f.repo, "config", "core.hooksPath", hooks)
	// Bring the index's stat data out of date so status must hash.
	write(t, filepath.Join(f.wt, "a.txt"), "changed\n", 0o644)
	write(t, filepath.Join(f.wt, "b.txt"), "b\n", 0o644) // same content, new mtime
	write(t, filepath.Join(f.wt, "new.txt"), "new\n", 0o644)

	s, err := SnapshotWorktree(ctx, r, f.wt, "refs/reclaimer/evil")
	must(t, err)
	if s.Commit == "" {
		t.Fatalf("Snapshot = %+v", s)
	}
	bundle := filepath.Join(f.base, "evil.bundle")
	_, err = WriteBundle(ctx, r, f.repo, bundle, []string{"refs/heads/feature", s.Ref})
	must(t, err)
	must(t, os.RemoveAll(f.wt))
	git(t, f.repo, "worktree", "prune")
	dest := filepath.Join(f.base, "restored")
	must(t, RestoreWorktree(ctx, r, f.repo, bundle, dest, "feature", s.Ref))
	if data, err := os.ReadFile(filepath.Join(dest, "new.txt")); err != nil || string(data) != "new\n" {
		t.Errorf("restored new.txt = %q, %v", data, err)
	}
	if names, _ := os.ReadDir(markers); len(names) > 0 {
		var ran []string
		for _, n := range names {
			ran = append(ran, n.Name())
		}
		t.Errorf("programs named by the repository ran: %v", ran)
	}
}

func TestRestoreRefusesMovedBranch(t *testing.T) {
	ctx := context.Background()
	var r gitcmd.Runner
	f := newRepo(t)
	dirty(t, f.wt)
	s, err := SnapshotWorktree(ctx, r, f.wt, "refs/reclaimer/moved")
	must(t, err)
	bundle := filepath.Join(f.base, "m.bundle")
	_, err = WriteBundle(ctx, r, f.repo, bundle, []string{"refs/heads/feature", s.Ref})
	must(t, err)
	must(t, os.RemoveAll(f.wt))
	git(t, f.repo, "worktree", "prune")
	git(t, f.repo, "branch", "-q", "-f", "feature", "main")
	err = RestoreWorktree(ctx, r, f.repo, bundle, filepath.Join(f.base, "x"), "feature", s.Ref)
	if !errors.Is(err, backend.ErrConflict) {
		t.Errorf("restore onto a moved branch: %v, want ErrConflict", err)
	}
	if _, err := os.Lstat(filepath.Join(f.base, "x")); !os.IsNotExist(err) {
		t.Errorf("a worktree was made")
	}
}

func TestSnapshotRejectsForeignRef(t *testing.T) {
	f := newRepo(t)
	if _, err := SnapshotWorktree(context.Background(), gitcmd.Runner{}, f.wt, "refs/heads/main"); err == nil {
		t.Errorf("snapshot into refs/heads/main accepted")
	}
}

func TestManifestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := Manifest{
		Runtime: "wt-1", Backend: "worktree",
		Objects: []Object{
			{Kind: KindBundle, Path: filepath.Join(dir, "wt-1.bundle"), Bytes: 10, SHA256: "ab"},
			{Kind: KindTar, Path: "/elsewhere/ws.tar.zst", Bytes: 20, SHA256: "cd", Root: "/ws"},
		},
		Head: "1234", Branch: "feature", Snapshot: "refs/reclaimer/wt-1", Remote: "git@example.com:x.git",
		Survives: []string{"branch feature", "uncommitted changes"},
		Excluded: []string{"node_modules"},
	}
	path := ManifestPath(dir, "wt-1")
	must(t, WriteManifest(path, m))
	raw, err := os.ReadFile(path)
	must(t, err)
	if !bytes.Contains(raw, []byte(`"path": "wt-1.bundle"`)) {
		t.Errorf("object beside the manifest not stored relative:\n%s", raw)
	}
	got, err := ReadManifest(path)
	must(t, err)
	if got.Objects[0].Path != m.Objects[0].Path || got.Objects[1].Path != "/elsewhere/ws.tar.zst" ||
		got.Branch != "feature" || got.Snapshot != m.Snapshot || !slices.Equal(got.Excluded, m.Excluded) {
		t.Errorf("ReadManifest = %+v, want %+v", got, m)
	}
}
