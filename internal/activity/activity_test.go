package activity

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// base is the time every test tree starts at; tests move single entries
// later than it. No test reads the clock.
var base = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func hours(h float64) time.Time { return base.Add(time.Duration(h * float64(time.Hour))) }

// setTime sets the mtime (and atime) of path itself, a link included.
func setTime(tb testing.TB, path string, t time.Time) {
	tb.Helper()
	ts := unix.NsecToTimespec(t.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		tb.Fatal(err)
	}
}

// ageTree sets every entry under root, root included, to t without
// following links or entering other mounts.
func ageTree(tb testing.TB, root string, t time.Time) {
	tb.Helper()
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range paths {
		setTime(tb, p, t)
	}
}

func write(tb testing.TB, path, data string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func newest(tb testing.TB, root string, opts Options) Result {
	tb.Helper()
	r, err := Newest(context.Background(), root, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if r.Err() != nil {
		tb.Fatal(r.Err())
	}
	return r
}

func wantNewest(tb testing.TB, r Result, t time.Time, path string) {
	tb.Helper()
	if !r.Newest.Equal(t) || r.NewestPath != path {
		tb.Fatalf("newest %v at %s, want %v at %s", r.Newest.UTC(), r.NewestPath, t, path)
	}
}

func TestNewestFile(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"a/b/c.txt", "a/d.txt", "e.txt", "f/g"} {
		write(t, filepath.Join(root, p), p)
	}
	ageTree(t, root, base)
	setTime(t, filepath.Join(root, "a/b/c.txt"), hours(1))
	setTime(t, filepath.Join(root, "e.txt"), hours(0.5))

	r := newest(t, root, Options{})
	wantNewest(t, r, hours(1), filepath.Join(root, "a/b/c.txt"))
	if want := testtree.CountEntries(t, root) + 1; r.Files != want || r.Dirs != 4 || r.Partial {
		t.Fatalf("files %d dirs %d partial %v, want %d files and 4 dirs", r.Files, r.Dirs, r.Partial, want)
	}

	// Nanoseconds matter.
	setTime(t, filepath.Join(root, "f/g"), hours(1).Add(1))
	wantNewest(t, newest(t, root, Options{}), hours(1).Add(1), filepath.Join(root, "f/g"))
}

func TestDirectoryTimeShowsDeletion(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "src/old.go"), "x")
	write(t, filepath.Join(root, "src/gone.go"), "x")
	ageTree(t, root, base)
	if err := os.Remove(filepath.Join(root, "src/gone.go")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(filepath.Join(root, "src"))
	if err != nil {
		t.Fatal(err)
	}
	if !st.ModTime().After(base) {
		t.Fatal("removing a file did not move its directory's mtime")
	}
	wantNewest(t, newest(t, root, Options{}), st.ModTime(), filepath.Join(root, "src"))

	// The root's own mtime counts too.
	setTime(t, root, hours(100000))
	wantNewest(t, newest(t, root, Options{}), hours(100000), root)
}

func TestSymlinksCountByTheirOwnTime(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	write(t, filepath.Join(outside, "target"), "x")
	write(t, filepath.Join(outside, "dir/fresh"), "x")
	write(t, filepath.Join(root, "file"), "x")
	for name, target := range map[string]string{"tofile": "target", "todir": "dir"} {
		if err := os.Symlink(filepath.Join(outside, target), filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("nowhere", filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	ageTree(t, root, base)
	ageTree(t, outside, hours(50)) // much newer, and never looked at
	setTime(t, filepath.Join(root, "tofile"), hours(2))

	r := newest(t, root, Options{})
	wantNewest(t, r, hours(2), filepath.Join(root, "tofile"))
	if want := 5; r.Files != want {
		t.Fatalf("files %d, want %d (root, file, 3 links)", r.Files, want)
	}
}

func TestSkip(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"main.go", "node_modules/x/index.js", "web/node_modules/y/z.js", "web/app.js", ".env", ".git/objects/ab"} {
		write(t, filepath.Join(root, p), p)
	}
	ageTree(t, root, base)
	setTime(t, filepath.Join(root, "node_modules/x/index.js"), hours(9))
	setTime(t, filepath.Join(root, "web/node_modules/y"), hours(9))
	setTime(t, filepath.Join(root, "web/node_modules"), hours(9))
	setTime(t, filepath.Join(root, ".git/objects/ab"), hours(9))
	setTime(t, filepath.Join(root, ".env"), hours(9))
	setTime(t, filepath.Join(root, "web/app.js"), hours(1))

	var mu sync.Mutex
	var calls []string
	skipped := map[string]bool{"node_modules": true, "web/node_modules": true, ".git": true, ".env": true}
	opts := Options{Skip: func(rel string, isDir bool) bool {
		mu.Lock()
		calls = append(calls, rel+":"+strconv.FormatBool(isDir))
		mu.Unlock()
		return skipped[rel]
	}}
	r := newest(t, root, opts)
	wantNewest(t, r, hours(1), filepath.Join(root, "web/app.js"))

	slices.Sort(calls)
	want := []string{".env:false", ".git:true", "main.go:false", "node_modules:true", "web/app.js:false", "web/node_modules:true", "web:true"}
	if !slices.Equal(calls, want) {
		t.Fatalf("skip called with %v, want %v", calls, want)
	}
	// Skipped folders are not counted: root, main.go, web, web/app.js.
	if r.Files != 4 {
		t.Fatalf("files %d, want 4", r.Files)
	}
}

func TestMountPointsNotEntered(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	root, elsewhere := t.TempDir(), t.TempDir()
	write(t, filepath.Join(root, "work.txt"), "x")
	testtree.MountTmpfs(t, filepath.Join(root, "tmp"), "")
	write(t, filepath.Join(root, "tmp/fresh"), "x")
	// A bind mount of the same filesystem: st_dev cannot tell.
	write(t, filepath.Join(elsewhere, "shared/fresh"), "x")
	testtree.BindMount(t, filepath.Join(elsewhere, "shared"), filepath.Join(root, "bound"))
	write(t, filepath.Join(elsewhere, "one-file"), "x")
	write(t, filepath.Join(root, "file-mount"), "")
	testtree.BindMount(t, filepath.Join(elsewhere, "one-file"), filepath.Join(root, "file-mount"))

	setTime(t, filepath.Join(root, "tmp/fresh"), hours(9))
	setTime(t, filepath.Join(root, "tmp"), hours(9))
	ageTree(t, filepath.Join(elsewhere), hours(9))
	setTime(t, filepath.Join(root, "work.txt"), base)
	setTime(t, root, base)

	r := newest(t, root, Options{})
	wantNewest(t, r, base, root)
	slices.Sort(r.Skipped)
	want := []string{filepath.Join(root, "bound"), filepath.Join(root, "file-mount"), filepath.Join(root, "tmp")}
	if !slices.Equal(r.Skipped, want) {
		t.Fatalf("skipped %v, want %v", r.Skipped, want)
	}
	if r.Files != 2 {
		t.Fatalf("files %d, want 2 (root, work.txt)", r.Files)
	}
}

func git(tb testing.TB, dir string, args ...string) {
	tb.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// gitRepo makes a repository with one commit and a linked worktree, all
// aged to base, and returns their paths and the worktree's git directory.
func gitRepo(t *testing.T) (repo, wt, wtGit string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	repo, wt = filepath.Join(dir, "repo"), filepath.Join(dir, "wt")
	write(t, filepath.Join(repo, "README"), "hi")
	git(t, repo, "init", "-q")
	git(t, repo, "add", "README")
	git(t, repo, "commit", "-q", "-m", "one")
	git(t, repo, "worktree", "add", "-q", "-b", "feature", wt)
	wtGit = filepath.Join(repo, ".git", "worktrees", "wt")
	if _, err := os.Stat(filepath.Join(wtGit, "HEAD")); err != nil {
		t.Fatal(err)
	}
	ageTree(t, dir, base)
	return repo, wt, wtGit
}

// skipGit leaves out the .git folder, not a linked worktree's .git file.
func skipGit(rel string, isDir bool) bool { return rel == ".git" && isDir }

func TestGitAdminFilesOfLinkedWorktree(t *testing.T) {
	_, wt, wtGit := gitRepo(t)
	opts := Options{Skip: skipGit}
	wantNewest(t, newest(t, wt, opts), base, wt)

	for i, name := range []string{"index", "HEAD", "logs/HEAD"} {
		at := hours(float64(i + 1))
		setTime(t, filepath.Join(wtGit, name), at)
		wantNewest(t, newest(t, wt, opts), at, filepath.Join(wtGit, name))
	}
	// ORIG_HEAD appears after a reset.
	write(t, filepath.Join(wtGit, "ORIG_HEAD"), "x")
	setTime(t, filepath.Join(wtGit, "ORIG_HEAD"), hours(7))
	wantNewest(t, newest(t, wt, opts), hours(7), filepath.Join(wtGit, "ORIG_HEAD"))

	// The .git file itself is an ordinary entry of the worktree.
	setTime(t, filepath.Join(wt, ".git"), hours(8))
	wantNewest(t, newest(t, wt, opts), hours(8), filepath.Join(wt, ".git"))

	// Other files of the shared repository do not count.
	repoGit := filepath.Dir(filepath.Dir(wtGit))
	setTime(t, filepath.Join(repoGit, "index"), hours(20))
	setTime(t, filepath.Join(repoGit, "HEAD"), hours(20))
	wantNewest(t, newest(t, wt, opts), hours(8), filepath.Join(wt, ".git"))
}

func TestGitAdminFilesOfMainWorktree(t *testing.T) {
	repo, _, _ := gitRepo(t)
	opts := Options{Skip: skipGit}
	setTime(t, filepath.Join(repo, ".git/objects"), hours(30)) // skipped
	setTime(t, filepath.Join(repo, ".git/index"), hours(3))
	wantNewest(t, newest(t, repo, opts), hours(3), filepath.Join(repo, ".git/index"))
}

func TestGitFileIsReadOnceAndAgainWhenRewritten(t *testing.T) {
	_, wt, _ := gitRepo(t)
	c := NewCache()
	opts := Options{Skip: skipGit, Cache: c}
	for i := 0; i < 3; i++ {
		newest(t, wt, opts)
	}
	if c.gitReads != 1 {
		t.Fatalf(".git file read %d times, want once", c.gitReads)
	}
	// The worktree's git directory moved (relative form, as git 2.48 may
	// write it).
	other := filepath.Join(filepath.Dir(wt), "moved")
	write(t, filepath.Join(other, "HEAD"), "ref: refs/heads/feature\n")
	setTime(t, filepath.Join(other, "HEAD"), hours(5))
	write(t, filepath.Join(wt, ".git"), "gitdir: ../moved\n")
	setTime(t, filepath.Join(wt, ".git"), base)
	wantNewest(t, newest(t, wt, opts), hours(5), filepath.Join(other, "HEAD"))
	if c.gitReads != 2 {
		t.Fatalf(".git file read %d times, want twice", c.gitReads)
	}
	c.Forget(wt)
	if c.Len() != 0 {
		t.Fatal("Forget kept the root")
	}
}

func TestHostileGitFile(t *testing.T) {
	root := t.TempDir()
	// A FIFO must not block the walk; garbage must not matter.
	if err := unix.Mkfifo(filepath.Join(root, ".git"), 0o644); err != nil {
		t.Fatal(err)
	}
	setTime(t, filepath.Join(root, ".git"), base)
	setTime(t, root, base)
	wantNewest(t, newest(t, root, Options{}), base, root)

	root2 := t.TempDir()
	write(t, filepath.Join(root2, ".git"), strings.Repeat("x", 10000))
	ageTree(t, root2, base)
	wantNewest(t, newest(t, root2, Options{}), base, root2)
}

func TestNewestAfterStopsEarly(t *testing.T) {
	root := t.TempDir()
	testtree.Synthetic(t, root, 2, 8, 30, 0)
	ageTree(t, root, base)
	full := newest(t, root, Options{})
	wantNewest(t, full, base, root)

	// Nothing after the bound: a full walk, Newest's answer.
	r, err := NewestAfter(context.Background(), root, hours(1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Partial || r.Files != full.Files || !r.Newest.Equal(base) {
		t.Fatalf("nothing newer: %+v, full walk %+v", r, full)
	}

	// A fresh file in every leaf folder: found long before the end.
	leaves := 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if d.IsDir() && strings.Count(strings.TrimPrefix(p, root), "/") == 2 {
			setTime(t, filepath.Join(p, "f7"), hours(2))
			leaves++
		}
		return nil
	})
	if leaves != 64 {
		t.Fatalf("%d leaves", leaves)
	}
	r, err = NewestAfter(context.Background(), root, hours(1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Partial || !r.Newest.Equal(hours(2)) || !strings.HasSuffix(r.NewestPath, "/f7") {
		t.Fatalf("not found: %+v", r)
	}
	if r.Files*2 > full.Files {
		t.Fatalf("early exit stat %d entries of %d", r.Files, full.Files)
	}
	t.Logf("stopped after %d of %d entries", r.Files, full.Files)

	// The bound is exclusive.
	r, err = NewestAfter(context.Background(), root, hours(2), Options{})
	if err != nil || r.Partial {
		t.Fatalf("bound equal to the newest: %+v %v", r, err)
	}
}

func TestNewestAfterStopsAtGitAdmin(t *testing.T) {
	_, wt, wtGit := gitRepo(t)
	setTime(t, filepath.Join(wtGit, "index"), hours(4))
	r, err := NewestAfter(context.Background(), wt, hours(1), Options{Skip: skipGit})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Partial || r.Dirs != 0 || r.NewestPath != filepath.Join(wtGit, "index") {
		t.Fatalf("%+v", r)
	}
}

func TestCacheLooksWhereActivityWasLast(t *testing.T) {
	root := t.TempDir()
	testtree.Synthetic(t, root, 2, 8, 30, 0)
	ageTree(t, root, base)
	hot := filepath.Join(root, "d3", "d5")
	setTime(t, filepath.Join(hot, "f1"), hours(1))
	c := NewCache()
	opts := Options{Cache: c}
	first := newest(t, root, opts)
	wantNewest(t, first, hours(1), filepath.Join(hot, "f1"))

	// The agent keeps working there.
	setTime(t, filepath.Join(hot, "f2"), hours(2))
	r, err := NewestAfter(context.Background(), root, hours(1), opts)
	if err != nil {
		t.Fatal(err)
	}
	wantNewest(t, r, hours(2), filepath.Join(hot, "f2"))
	// root, then at most the hot folder's 30 files.
	if !r.Partial || r.Files > 31 || r.Dirs != 0 {
		t.Fatalf("hint not used: %+v", r)
	}
	// Elsewhere now: still found, by the walk.
	setTime(t, filepath.Join(root, "d0", "d0", "f0"), hours(3))
	r, err = NewestAfter(context.Background(), root, hours(2), opts)
	if err != nil {
		t.Fatal(err)
	}
	wantNewest(t, r, hours(3), filepath.Join(root, "d0", "d0", "f0"))
	// And a hint inside a folder now skipped is not used.
	opts.Skip = func(rel string, _ bool) bool { return rel == "d0" }
	r, err = NewestAfter(context.Background(), root, hours(2), opts)
	if err != nil || r.Partial {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestLargeDirectoryIsSplit(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 5000; i++ {
		write(t, filepath.Join(root, "big", "file-with-a-longish-name-"+strconv.Itoa(i)), "")
	}
	ageTree(t, root, base)
	setTime(t, filepath.Join(root, "big", "file-with-a-longish-name-4321"), hours(1))
	r := newest(t, root, Options{})
	wantNewest(t, r, hours(1), filepath.Join(root, "big", "file-with-a-longish-name-4321"))
	if r.Files != 5002 || r.Dirs != 2 {
		t.Fatalf("files %d dirs %d", r.Files, r.Dirs)
	}
	r, err := NewestAfter(context.Background(), root, base, Options{Workers: 8})
	if err != nil || !r.Partial {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestRootErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "file"), "")
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := Newest(ctx, filepath.Join(dir, "link"), Options{}); !errors.Is(err, beneath.ErrSymlink) {
		t.Errorf("link: %v", err)
	}
	if _, err := Newest(ctx, filepath.Join(dir, "missing"), Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if _, err := Newest(ctx, filepath.Join(dir, "file"), Options{}); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("file: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Newest(cancelled, dir, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// The test binary doubles as a helper: with helperEnv set it prints what
// Newest found in the folder it names (run as another user).
const helperEnv = "RECLAIMER_ACTIVITY_HELPER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		r, err := Newest(context.Background(), dir, Options{})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(len(r.Failed), r.Files, r.Err() != nil)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestUnreadableFolderIsReported(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "run")
	write(t, filepath.Join(root, "locked/x"), "")
	write(t, filepath.Join(root, "open"), "")
	if err := os.Chmod(filepath.Join(root, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(root, "locked"), 0o755) })

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+root)
	if os.Geteuid() == 0 {
		// Root reads everything: walk as nobody, from a copy of this
		// binary that nobody may run.
		for _, d := range []string{dir, filepath.Dir(dir)} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		data, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		cmd.Path = filepath.Join(dir, "activity.test")
		if err := os.WriteFile(cmd.Path, data, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// root, open, locked (its own time is readable) — but not inside it.
	if got := strings.TrimSpace(string(out)); got != "1 3 true" {
		t.Fatalf("helper said %q, want one failure, 3 entries", got)
	}
}
