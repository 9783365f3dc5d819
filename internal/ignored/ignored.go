package ignored

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// maxIgnoreFile bounds the size of one ignore file read for negations.
const maxIgnoreFile = 8 << 20

// Options are the inputs of Select besides the workspace.
type Options struct {
	// Root is the managed root the workspace lives in; required. Nothing
	// outside it is ever selected.
	Root string
	// CloneDepth is accepted for compatibility and must not be negative: a
	// ".git" at any depth below a candidate keeps it.
	CloneDepth int
	// Rebuildable are the folder names shed even when a file inside looks
	// like a secret (default DefaultRebuildable); Keep the name patterns
	// that keep any other ignored folder (default DefaultKeep).
	Rebuildable, Keep []string
	// Kept, when set, is called for each ignored folder kept by these
	// rules, with why: the caller reports it.
	Kept func(dir, why string)
}

// Dir is one directory that can be shed whole.
type Dir struct {
	Path string // absolute, below the workspace
	Repo string // absolute top level of the repository that ignores it
}

// Select returns the git-ignored directories of workspace that are safe to
// shed, top-most only, sorted by path. See the package documentation for
// the rules.
func Select(ctx context.Context, r gitcmd.Runner, workspace string, opts Options) ([]Dir, error) {
	if opts.Root == "" {
		return nil, errors.New("select dependencies: managed root not set")
	}
	if opts.CloneDepth < 0 {
		return nil, fmt.Errorf("select dependencies: clone depth %d is negative", opts.CloneDepth)
	}
	if hasDotDot(opts.Root) || hasDotDot(workspace) {
		return nil, fmt.Errorf("select dependencies in %s: path with \"..\": %w", workspace, beneath.ErrOutside)
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("select dependencies: %w", err)
	}
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return nil, fmt.Errorf("select dependencies: %w", err)
	}
	rel, ok := below(root, ws)
	if !ok && ws != root {
		return nil, fmt.Errorf("select dependencies in %s: not inside managed root %s: %w", ws, root, beneath.ErrOutside)
	}
	// The workspace is reached from the root without a symbolic link.
	if err := realDirs(root, rel); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("select dependencies in %s: %w", ws, err)
	}

	repos, err := findRepos(ctx, r, ws)
	if err != nil {
		return nil, err
	}
	if opts.Rebuildable == nil {
		opts.Rebuildable = DefaultRebuildable
	}
	if opts.Keep == nil {
		opts.Keep = DefaultKeep
	}
	var dirs []Dir
	for _, repo := range repos {
		ds, err := selectIn(ctx, r, repo, ws, root, opts)
		if err != nil {
			return nil, fmt.Errorf("select dependencies in %s: %w", repo, err)
		}
		dirs = append(dirs, ds...)
	}
	return topMost(dirs), nil
}

// findRepos returns the workspace, when it is the top level of a work
// tree, and its direct children that are.
func findRepos(ctx context.Context, r gitcmd.Runner, ws string) ([]string, error) {
	var repos []string
	if ok, err := isTopLevel(ctx, r, ws); err != nil {
		return nil, fmt.Errorf("select dependencies in %s: %w", ws, err)
	} else if ok {
		repos = append(repos, ws)
	}
	ents, err := os.ReadDir(ws)
	if err != nil {
		return nil, fmt.Errorf("select dependencies in %s: %w", ws, err)
	}
	for _, e := range ents {
		if !e.IsDir() || strings.EqualFold(e.Name(), ".git") {
			continue // files, symbolic links, the workspace's own .git
		}
		child := filepath.Join(ws, e.Name())
		ok, err := isTopLevel(ctx, r, child)
		if err != nil {
			return nil, fmt.Errorf("select dependencies in %s: %w", child, err)
		}
		if ok {
			repos = append(repos, child)
		}
	}
	return repos, nil
}

// isTopLevel tells whether dir is the top level of a git work tree. A dir
// without ".git" is not; one with ".git" that git cannot read is an error;
// one whose work tree git places elsewhere (core.worktree) is not.
func isTopLevel(ctx context.Context, r gitcmd.Runner, dir string) (bool, error) {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, err
	}
	// GIT_CEILING_DIRECTORIES: a ".git" that is no repository must not
	// make git look further up.
	out, err := r.RunInput(ctx, dir, nil, []string{"GIT_CEILING_DIRECTORIES=" + filepath.Dir(real)},
		"rev-parse", "--show-toplevel")
	if err != nil {
		return false, fmt.Errorf("find top level: %w", err)
	}
	return strings.TrimSuffix(string(out), "\n") == real, nil
}

// selectIn selects in one repository.
func selectIn(ctx context.Context, r gitcmd.Runner, repo, ws, root string, opts Options) ([]Dir, error) {
	out, err := r.Run(ctx, repo, "ls-files", "-z")
	if err != nil {
		return nil, fmt.Errorf("list tracked files: %w", err)
	}
	tracked := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	slices.Sort(tracked)

	entries, err := ignoredStatus(ctx, r, repo)
	if err != nil {
		return nil, err
	}
	negs, err := negations(ctx, r, repo, entries)
	if err != nil {
		return nil, err
	}

	var dirs []Dir
	for _, e := range entries {
		if e.Kind != gitcmd.Ignored || !e.IsDir() {
			continue // ignored files are never taken
		}
		rel := strings.TrimSuffix(e.Path, "/")
		comps, ok := cleanComponents(rel)
		if !ok {
			continue
		}
		abs := repo + "/" + rel
		if _, in := below(ws, abs); !in {
			continue
		}
		if _, in := below(root, abs); !in {
			continue
		}
		if containsTracked(tracked, rel) {
			continue
		}
		if slices.ContainsFunc(negs, func(n negation) bool { return n.reachesInside(comps) }) {
			continue
		}
		if err := realDirs(repo, rel); err != nil {
			continue // gone, or a symbolic link on the way: never followed
		}
		why, err := keepReason(ctx, abs, opts.Rebuildable, opts.Keep)
		if err != nil {
			return nil, err
		}
		if why != "" {
			if opts.Kept != nil {
				opts.Kept(abs, why)
			}
			continue
		}
		dirs = append(dirs, Dir{Path: abs, Repo: repo})
	}
	return dirs, nil
}

// ignoredStatus runs git status --ignored=matching against an empty
// temporary index. With no index entries git compares no work-tree file
// with the index, so it hashes nothing and no clean filter or fsmonitor
// can run, whatever the config says at that moment. Tracked files then
// show as untracked, and an ignored directory holding tracked files shows
// as ignored; containsTracked, fed from the real index, rules those out.
func ignoredStatus(ctx context.Context, r gitcmd.Runner, repo string) ([]gitcmd.StatusEntry, error) {
	tmp, err := os.MkdirTemp("", "reclaimer-index-")
	if err != nil {
		return nil, fmt.Errorf("make empty index: %w", err)
	}
	defer os.RemoveAll(tmp)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	out, err := r.RunInput(ctx, repo, nil, env, "status", "--porcelain=v2", "-z",
		"--ignored=matching", "--untracked-files=all", "--ignore-submodules=all", "--no-renames")
	if err != nil {
		return nil, fmt.Errorf("list ignored files: %w", err)
	}
	es, err := gitcmd.ParseStatusV2(out)
	if err != nil {
		return nil, fmt.Errorf("list ignored files: %w", err)
	}
	return es, nil
}

// negations collects the anchored negation patterns of every ignore file
// git read: info/exclude and each .gitignore it saw (the empty index makes
// every one of them show as untracked or ignored).
func negations(ctx context.Context, r gitcmd.Runner, repo string, entries []gitcmd.StatusEntry) ([]negation, error) {
	exclude, err := r.GitPath(ctx, repo, "info/exclude")
	if err != nil {
		return nil, err
	}
	data, err := readIgnoreFile(exclude, true)
	if err != nil {
		return nil, fmt.Errorf("read ignore rules: %w", err)
	}
	negs := parseNegations("", data)
	for _, e := range entries {
		if e.IsDir() || (e.Path != ".gitignore" && !strings.HasSuffix(e.Path, "/.gitignore")) {
			continue
		}
		if e.Kind != gitcmd.Untracked && e.Kind != gitcmd.Ignored {
			continue
		}
		data, err := readIgnoreFile(filepath.Join(repo, e.Path), false)
		if err != nil {
			return nil, fmt.Errorf("read ignore rules: %w", err)
		}
		base := strings.TrimSuffix(strings.TrimSuffix(e.Path, ".gitignore"), "/")
		negs = append(negs, parseNegations(base, data)...)
	}
	return negs, nil
}

// readIgnoreFile reads an ignore file as git would: a missing one is empty,
// and git does not follow a symbolic link for an in-tree .gitignore. It
// never blocks on a FIFO and refuses an oversized file.
func readIgnoreFile(p string, follow bool) ([]byte, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(p, flags, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxIgnoreFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, maxIgnoreFile)
	}
	return data, nil
}

// cleanComponents splits a repository-relative path from git and refuses
// anything that is not a plain downward path or that names a .git.
func cleanComponents(rel string) ([]string, bool) {
	if rel == "" || strings.HasPrefix(rel, "/") {
		return nil, false
	}
	comps := strings.Split(rel, "/")
	for _, c := range comps {
		if c == "" || c == "." || c == ".." || strings.EqualFold(c, ".git") {
			return nil, false
		}
	}
	return comps, true
}

// containsTracked tells whether some tracked path lies inside dir.
func containsTracked(sorted []string, dir string) bool {
	prefix := dir + "/"
	i, _ := slices.BinarySearch(sorted, prefix)
	return i < len(sorted) && strings.HasPrefix(sorted[i], prefix)
}

// realDirs checks that every component of rel below base is a directory
// and none is a symbolic link.
func realDirs(base, rel string) error {
	if rel == "" {
		return nil
	}
	p := base
	for _, c := range strings.Split(rel, "/") {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: %w", p, beneath.ErrSymlink)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory", p)
		}
	}
	return nil
}

// below returns p relative to dir when p lies strictly below dir; both
// are cleaned absolute paths.
func below(dir, p string) (string, bool) {
	prefix := dir
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if !strings.HasPrefix(p, prefix) || len(p) == len(prefix) {
		return "", false
	}
	return p[len(prefix):], true
}

func hasDotDot(p string) bool {
	return slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..")
}

// topMost sorts dirs and drops any that lies inside another (or repeats
// one).
func topMost(dirs []Dir) []Dir {
	slices.SortFunc(dirs, func(a, b Dir) int { return strings.Compare(a.Path, b.Path) })
	var out []Dir
	for _, d := range dirs {
		inside := slices.ContainsFunc(out, func(k Dir) bool {
			_, in := below(k.Path, d.Path)
			return in || k.Path == d.Path
		})
		if !inside {
			out = append(out, d)
		}
	}
	return out
}
