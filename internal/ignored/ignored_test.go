package ignored_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/ignored"
)

// sel runs Select with the default Runner and fails the test on error.
func sel(t *testing.T, root, ws string) []ignored.Dir {
	t.Helper()
	got, err := ignored.Select(ctx(t), gitcmd.Runner{}, ws, ignored.Options{Root: root})
	if err != nil {
		t.Fatalf("Select(%s): %v", ws, err)
	}
	return got
}

// dirs builds the expected result: paths relative to repo.
func dirs(repo string, rels ...string) []ignored.Dir {
	var out []ignored.Dir
	for _, r := range rels {
		out = append(out, ignored.Dir{Path: filepath.Join(repo, r), Repo: repo})
	}
	return out
}

func sorted(ds ...[]ignored.Dir) []ignored.Dir {
	var all []ignored.Dir
	for _, d := range ds {
		all = append(all, d...)
	}
	slices.SortFunc(all, func(a, b ignored.Dir) int { return strings.Compare(a.Path, b.Path) })
	return all
}

func check(t *testing.T, got, want []ignored.Dir) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Select:\n got %q\nwant %q", got, want)
	}
}

func TestShedsDependenciesKeepsWork(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	initRepo(t, ws, map[string]string{
		".gitignore":  "node_modules/\n.venv\ndist/\n.env\n*.log\n__pycache__/\ntarget\n",
		"src/main.py": "print(1)\n",
		"README.md":   "# app\n",
	},
		"notes.md", "drafts/idea.txt", // untracked work
		".env", "config/.env", // ignored files: secrets
		"node_modules/left-pad/index.js", "node_modules/@scope/pkg/lib/x.js",
		".venv/lib/python3/site.py", "dist/app.js", "src/__pycache__/main.pyc",
		"logs/a.log", "logs/b.log", // a folder of ignored files, not an ignored folder
		"target", // an ignored file named like a build folder
	)
	index, err := os.ReadFile(filepath.Join(ws, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}

	got := sel(t, root, ws)
	check(t, got, dirs(ws, ".venv", "dist", "node_modules", "src/__pycache__"))

	after, err := os.ReadFile(filepath.Join(ws, ".git", "index"))
	if err != nil || !bytes.Equal(index, after) {
		t.Errorf("Select changed the index (%v)", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(ws, ".git")); slices.ContainsFunc(ents, func(e os.DirEntry) bool {
		return strings.HasSuffix(e.Name(), ".lock")
	}) {
		t.Errorf("Select left a lock file")
	}
}

func TestNonGitWorkspaceShedsNothing(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	write(t, filepath.Join(ws, ".gitignore"), "node_modules/\n")
	write(t, filepath.Join(ws, "node_modules", "a", "i.js"), "x")
	// A grandchild repository is not a direct child: not looked at.
	initRepo(t, filepath.Join(ws, "group", "app"), map[string]string{".gitignore": "node_modules/\n"},
		"node_modules/x/i.js")
	check(t, sel(t, root, ws), nil)

	// A workspace inside the root's own repository is no repository of
	// its own.
	initRepo(t, root, map[string]string{".gitignore": "node_modules/\n"})
	check(t, sel(t, root, ws), nil)

	// A workspace that does not exist (yet, or any more).
	got, err := ignored.Select(ctx(t), gitcmd.Runner{}, filepath.Join(root, "rt", "gone"), ignored.Options{Root: root})
	if err != nil || got != nil {
		t.Errorf("missing workspace: %v, %v", got, err)
	}
}

func TestNestedRepositories(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	initRepo(t, ws, map[string]string{
		".gitignore": "node_modules/\nvendor/\nthird_party/\ndeps/\nfar/\nignored-child/\n",
	},
		"node_modules/a/i.js",
		"third_party/README", "deps/README", "far/README")
	// Direct child repositories: one untracked, one ignored by the parent.
	initRepo(t, filepath.Join(ws, "child"), map[string]string{".gitignore": "node_modules/\n.venv/\n"},
		"node_modules/b/i.js", ".venv/bin/python")
	initRepo(t, filepath.Join(ws, "ignored-child"), map[string]string{".gitignore": "dist/\n"}, "dist/x.js")
	// Ignored clones: 1, 3 and 4 levels below an ignored directory.
	initRepo(t, filepath.Join(ws, "third_party", "lib"), nil, "f")
	initRepo(t, filepath.Join(ws, "deps", "a", "b", "lib"), nil, "f")
	initRepo(t, filepath.Join(ws, "far", "a", "b", "c", "lib"), nil, "f")
	// A worktree's .git file counts too.
	git(t, filepath.Join(ws, "child"), "worktree", "add", "-q", "--detach", filepath.Join(ws, "vendor", "wt"))

	got := sel(t, root, ws)
	want := sorted(
		dirs(ws, "node_modules"), // far/a/b/c/lib/.git, 4 levels below far, keeps it: a .git at any depth does
		dirs(filepath.Join(ws, "child"), ".venv", "node_modules"),
		dirs(filepath.Join(ws, "ignored-child"), "dist"),
	)
	check(t, got, want)

	// CloneDepth no longer limits the search.
	got, err := ignored.Select(ctx(t), gitcmd.Runner{}, ws, ignored.Options{Root: root, CloneDepth: 1})
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, want)

	// The workspace need not be a repository for its children to shed.
	if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
		t.Fatal(err)
	}
	check(t, sel(t, root, ws), sorted(
		dirs(filepath.Join(ws, "child"), ".venv", "node_modules"),
		dirs(filepath.Join(ws, "ignored-child"), "dist"),
	))
}

func TestPublicLocales(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	initRepo(t, ws, map[string]string{".gitignore": "public/locales/**/*\n"},
		"public/locales/en/ns/a.json", "public/locales/fr/a.json", "public/locales/index.json")
	// ls-files --directory (the OpenHands way) would offer public/ here.
	out := git(t, ws, "ls-files", "-o", "-i", "--exclude-standard", "--directory")
	if !slices.Contains(lines(out), "public/") {
		t.Fatalf("ls-files --directory = %q; expected it to over-report public/", out)
	}
	check(t, sel(t, root, ws), dirs(ws, "public/locales/en", "public/locales/fr"))

	// With a tracked file in public/ the answer is the same.
	write(t, filepath.Join(ws, "public", "index.html"), "<html>")
	git(t, ws, "add", "public/index.html")
	check(t, sel(t, root, ws), dirs(ws, "public/locales/en", "public/locales/fr"))
}

func TestTrackedFileInIgnoredDir(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	initRepo(t, ws, map[string]string{".gitignore": "build/\nout/\nnode_modules/\n"},
		"build/generated.c", "build/sub/x.o", "out/a", "node_modules/m/i.js")
	write(t, filepath.Join(ws, "build", "sub", "keep.cfg"), "important\n")
	git(t, ws, "add", "-f", "build/sub/keep.cfg")
	git(t, ws, "commit", "-q", "-m", "force-add")
	check(t, sel(t, root, ws), dirs(ws, "node_modules", "out"))

	// A staged, not yet committed force-add counts as tracked too.
	write(t, filepath.Join(ws, "out", "note"), "x")
	git(t, ws, "add", "-f", "out/note")
	check(t, sel(t, root, ws), dirs(ws, "node_modules"))
}

func TestNegatedPatterns(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	initRepo(t, ws, map[string]string{
		".gitignore":     "build/\n!build/keep.txt\nout/*\n!out/keep.txt\ntmp/\n!.gitkeep\n",
		"pkg/.gitignore": "gen/\n!gen/keep\n",
	},
		"build/o.bin", "build/keep.txt",
		"out/o.bin", "out/keep.txt", "out/node_modules/m/i.js",
		"tmp/.gitkeep", "tmp/scratch",
		"pkg/gen/a.go", "pkg/gen/keep",
		"cache/big", "cache/important")
	write(t, filepath.Join(ws, ".git", "info", "exclude"), "cache/\n!/cache/important\n")
	// git itself says build/keep.txt is ignored (gitignore(5): a file in
	// an excluded directory cannot be re-included)...
	if _, err := gitErr(t, ws, "check-ignore", "-q", "build/keep.txt"); err != nil {
		t.Fatalf("git does not consider build/keep.txt ignored: %v", err)
	}
	// ...but the user asked for it, so build/ stays; so do pkg/gen and
	// cache. out/* does re-include out/keep.txt, and out/node_modules is
	// shed. The unanchored !.gitkeep does not hold tmp/ back.
	check(t, sel(t, root, ws), dirs(ws, "out/node_modules", "tmp"))
}

func TestIgnoredDirInUntrackedDir(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	initRepo(t, ws, map[string]string{".gitignore": "node_modules/\n"},
		"scratch/notes.md", "scratch/app/node_modules/m/i.js", "scratch/app/index.js")
	check(t, sel(t, root, ws), dirs(ws, "scratch/app/node_modules"))
}

func TestOddPaths(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	names := []string{"my app", "new\nline", "bad\xff\xfe", "tab\there", `back\slash`, `"quoted"`, " lead"}
	var others []string
	for _, n := range names {
		others = append(others, n+"/node_modules/m/i.js", n+"/keep.txt")
	}
	others = append(others, "x\ny.cache/data", "z .cache/data")
	initRepo(t, ws, map[string]string{".gitignore": "node_modules/\n*.cache/\n"}, others...)
	var want []string
	for _, n := range names {
		want = append(want, n+"/node_modules")
	}
	want = append(want, "x\ny.cache", "z .cache")
	check(t, sel(t, root, ws), sorted(dirs(ws, want...)))
}

func TestSymlinks(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	elsewhere := t.TempDir()
	write(t, filepath.Join(elsewhere, "precious"), "x")
	initRepo(t, ws, map[string]string{".gitignore": "node_modules\ncache/\nlinked/\n"}, "cache/c")
	if err := os.Symlink(elsewhere, filepath.Join(ws, "node_modules")); err != nil {
		t.Fatal(err)
	}
	// A link to a directory holding an ignored directory: git never goes
	// through it, nor does Select.
	write(t, filepath.Join(elsewhere, "sub", "cache", "x"), "x")
	if err := os.Symlink(filepath.Join(elsewhere, "sub"), filepath.Join(ws, "through")); err != nil {
		t.Fatal(err)
	}
	check(t, sel(t, root, ws), dirs(ws, "cache"))

	// A workspace reached through a link inside the root is refused.
	link := filepath.Join(root, "rt", "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	_, err := ignored.Select(ctx(t), gitcmd.Runner{}, link, ignored.Options{Root: root})
	if !errors.Is(err, beneath.ErrSymlink) {
		t.Errorf("workspace through a link: err = %v, want ErrSymlink", err)
	}
	// A direct child that is a link to a repository is not looked at.
	other := filepath.Join(t.TempDir(), "other")
	initRepo(t, other, map[string]string{".gitignore": "dist/\n"}, "dist/x")
	if err := os.Symlink(other, filepath.Join(ws, "linked")); err != nil {
		t.Fatal(err)
	}
	check(t, sel(t, root, ws), dirs(ws, "cache"))
}

func TestLinkedWorktreeWorkspace(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	main := filepath.Join(root, "repos", "main")
	initRepo(t, main, map[string]string{".gitignore": "node_modules/\n.worktrees/\n", "src/a.js": "1"},
		"node_modules/m/i.js")
	write(t, filepath.Join(main, ".git", "info", "exclude"), "excluded-scratch/\n")
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	git(t, main, "worktree", "add", "-q", "-b", "conv-1", ws)
	write(t, filepath.Join(ws, "node_modules", "m", "i.js"), "x")
	write(t, filepath.Join(ws, "excluded-scratch", "f"), "x")
	write(t, filepath.Join(ws, "notes.md"), "mine")
	check(t, sel(t, root, ws), dirs(ws, "excluded-scratch", "node_modules"))

	// The main repository as workspace: a worktree parked under an
	// ignored folder is someone's checkout and stays.
	git(t, main, "worktree", "add", "-q", "--detach", filepath.Join(main, ".worktrees", "w1"))
	check(t, sel(t, filepath.Join(root, "repos"), main), dirs(main, "node_modules"))
}

func TestWorktreeMovedByConfig(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	elsewhere := filepath.Join(root, "elsewhere")
	write(t, filepath.Join(elsewhere, "node_modules", "m", "i.js"), "x")
	write(t, filepath.Join(elsewhere, ".gitignore"), "node_modules/\n")
	initRepo(t, ws, map[string]string{".gitignore": "node_modules/\n"}, "node_modules/m/i.js")
	git(t, ws, "config", "core.worktree", elsewhere)
	check(t, sel(t, root, ws), nil)
}

func TestRootAndPathRules(t *testing.T) {
	root, ws := workspace(t)
	initRepo(t, ws, map[string]string{".gitignore": "node_modules/\n"}, "node_modules/m/i.js")
	var r gitcmd.Runner

	outside := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ws   string
		opts ignored.Options
	}{
		{ws, ignored.Options{Root: outside}},
		{ws, ignored.Options{Root: ws + "/sub"}},
		{root + "/rt/../rt/workspace", ignored.Options{Root: root}},
		{root + "-sibling/rt/workspace", ignored.Options{Root: root}},
	} {
		_, err := ignored.Select(ctx(t), r, tc.ws, tc.opts)
		if !errors.Is(err, beneath.ErrOutside) {
			t.Errorf("Select(%q, root %q): err = %v, want ErrOutside", tc.ws, tc.opts.Root, err)
		}
	}
	if _, err := ignored.Select(ctx(t), r, ws, ignored.Options{}); err == nil {
		t.Errorf("Select without a root succeeded")
	}
	if _, err := ignored.Select(ctx(t), r, ws, ignored.Options{Root: root, CloneDepth: -1}); err == nil {
		t.Errorf("Select with a negative clone depth succeeded")
	}
	// The workspace as the root itself, and a relative workspace path.
	check(t, sel(t, ws, ws), dirs(ws, "node_modules"))
	t.Chdir(root)
	got, err := ignored.Select(ctx(t), r, "rt/workspace", ignored.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, dirs(ws, "node_modules"))
}

func TestGitFailures(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	write(t, filepath.Join(ws, ".git"), "gitdir: /nonexistent/elsewhere\n")
	_, err := ignored.Select(ctx(t), gitcmd.Runner{}, ws, ignored.Options{Root: root})
	var ge *gitcmd.Error
	if !errors.As(err, &ge) || !strings.Contains(err.Error(), ws) {
		t.Errorf("corrupt repository: err = %v, want a *gitcmd.Error naming %s", err, ws)
	}

	root, ws = workspace(t)
	child := filepath.Join(ws, "child")
	initRepo(t, child, map[string]string{".gitignore": "node_modules/\n"}, "node_modules/m/i.js")
	hang := filepath.Join(t.TempDir(), "git")
	writeExec(t, hang, "#!/bin/sh\nexec sleep 300\n")
	start := time.Now()
	_, err = ignored.Select(context.Background(), gitcmd.Runner{Git: hang, Timeout: 200 * time.Millisecond}, ws, ignored.Options{Root: root})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), child) {
		t.Errorf("hanging git: err = %v, want DeadlineExceeded naming %s", err, child)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("hanging git: Select took %v", d)
	}
}

// trapRepo arms every trap git could spring during a status: a clean
// filter and a process filter on stat-dirty tracked files, fsmonitor, and
// hooks; each leaves a marker in marks.
func TestTrapsNeverRun(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	initRepo(t, ws, map[string]string{
		".gitignore":     "node_modules/\n",
		".gitattributes": "*.txt filter=evil\n*.dat filter=evilp\n",
		"a.txt":          "a\n",
		"b.dat":          "b\n",
	}, "node_modules/m/i.js")
	marks := t.TempDir()
	bin := t.TempDir()
	trap := filepath.Join(bin, "trap.sh")
	writeExec(t, trap, "#!/bin/sh\ntouch '"+marks+"'/\"$1\"\nif [ \"$2\" = pass ]; then exec cat; fi\nexit 0\n")
	for _, kv := range [][2]string{
		{"filter.evil.clean", trap + " clean pass"},
		{"filter.evil.required", "true"},
		{"filter.evilp.process", trap + " process"},
		{"core.fsmonitor", trap + " fsmonitor"},
		{"core.hooksPath", filepath.Join(bin, "hooks")},
	} {
		git(t, ws, "config", kv[0], kv[1])
	}
	for _, dir := range []string{filepath.Join(ws, ".git", "hooks"), filepath.Join(bin, "hooks")} {
		for _, h := range []string{"reference-transaction", "post-index-change", "pre-commit"} {
			writeExec(t, filepath.Join(dir, h), "#!/bin/sh\ntouch '"+marks+"/hook-"+h+"'\n")
		}
	}
	stale := func(daysAgo int) {
		when := time.Now().Add(-time.Duration(daysAgo) * 24 * time.Hour)
		for _, f := range []string{"a.txt", "b.dat"} {
			if err := os.Chtimes(filepath.Join(ws, f), when, when); err != nil {
				t.Fatal(err)
			}
		}
	}

	stale(2)
	check(t, sel(t, root, ws), dirs(ws, "node_modules"))
	if m := markers(t, marks); len(m) != 0 {
		t.Fatalf("Select ran traps: %q", m)
	}

	// Positive control: plain git status runs them.
	stale(3)
	gitErr(t, ws, "status")
	stale(4)
	gitErr(t, ws, "-c", "filter.evilp.process=", "status")
	got := markers(t, marks)
	for _, want := range []string{"clean", "process", "fsmonitor"} {
		if !slices.Contains(got, want) {
			t.Errorf("control: trap %q did not fire under plain git (markers %q)", want, got)
		}
	}
}

func TestSymlinkSwappedAfterStatus(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	elsewhere := t.TempDir()
	write(t, filepath.Join(elsewhere, "precious"), "x")
	initRepo(t, ws, map[string]string{".gitignore": "cache/\nnode_modules/\nsub/\n"},
		"cache/c", "node_modules/m/i.js", "sub/deps/x")
	// A git that answers status truthfully, after which the agent swaps
	// cache/ for a link to a folder outside: Select must re-check.
	swap := "rm -rf '" + ws + "/cache' && ln -s '" + elsewhere + "' '" + ws + "/cache'"
	wrapper := filepath.Join(t.TempDir(), "git")
	writeExec(t, wrapper, `#!/bin/sh
for a in "$@"; do
  if [ "$a" = status ]; then
    out=$(mktemp); /usr/bin/git "$@" > "$out"; rc=$?
    `+swap+`
    cat "$out"; rm -f "$out"; exit $rc
  fi
done
exec /usr/bin/git "$@"
`)
	got, err := ignored.Select(ctx(t), gitcmd.Runner{Git: wrapper}, ws, ignored.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, dirs(ws, "node_modules", "sub"))
	if _, err := os.Stat(filepath.Join(elsewhere, "precious")); err != nil {
		t.Fatal(err)
	}
}
