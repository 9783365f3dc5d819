package gitcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// line returns git's one-line output without its final newline. Only one
// "\n" is removed: a path may end in spaces.
func line(out []byte) string {
	return strings.TrimSuffix(string(out), "\n")
}

// TopLevel returns the absolute, symlink-resolved top-level directory of
// the work tree that holds dir (git rev-parse --show-toplevel). Discovery
// walks up from dir as git does; use IsRepo to ask whether dir itself is a
// top level.
func (r Runner) TopLevel(ctx context.Context, dir string) (string, error) {
	out, err := r.Run(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("find top level of %s: %w", dir, err)
	}
	top := line(out)
	if top == "" {
		return "", fmt.Errorf("find top level of %s: not in a work tree", dir)
	}
	return top, nil
}

// GitDir returns the absolute path of the git directory of the repository
// holding dir; for a linked worktree that is .git/worktrees/<name> of the
// main repository.
func (r Runner) GitDir(ctx context.Context, dir string) (string, error) {
	out, err := r.Run(ctx, dir, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return "", fmt.Errorf("find git dir of %s: %w", dir, err)
	}
	return line(out), nil
}

// CommonDir returns the absolute path of the common git directory (shared
// by all worktrees of a repository) for dir.
func (r Runner) CommonDir(ctx context.Context, dir string) (string, error) {
	out, err := r.Run(ctx, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return "", fmt.Errorf("find common dir of %s: %w", dir, err)
	}
	return line(out), nil
}

// GitPath returns the absolute path git uses for name inside the git
// directory of dir (git rev-parse --git-path), e.g. "info/exclude" resolves
// into the common directory for a linked worktree.
func (r Runner) GitPath(ctx context.Context, dir, name string) (string, error) {
	out, err := r.Run(ctx, dir, "rev-parse", "--path-format=absolute", "--git-path", name)
	if err != nil {
		return "", fmt.Errorf("find git path %s of %s: %w", name, dir, err)
	}
	return line(out), nil
}

// IsRepo reports whether dir is itself the top-level directory of a git
// work tree (a main one or a linked worktree): dir holds a ".git" entry
// that git accepts, and git's top level, with symbolic links resolved, is
// dir. A folder merely inside a repository, a folder whose repository
// config moves the work tree elsewhere (core.worktree), or one git rejects
// is not. Any failure counts as "no".
func (r Runner) IsRepo(ctx context.Context, dir string) bool {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err != nil {
		return false
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return false
	}
	// A ".git" that is no repository must not make git look further up.
	out, err := r.RunInput(ctx, dir, nil, []string{"GIT_CEILING_DIRECTORIES=" + filepath.Dir(real)},
		"rev-parse", "--show-toplevel")
	return err == nil && line(out) == real
}
