package gitcmd

import (
	"context"
	"fmt"
	"strings"
)

// Worktree is one entry of git worktree list.
type Worktree struct {
	Path           string // absolute
	HEAD           string // commit id; empty for a bare repository or an unborn branch
	Branch         string // full ref ("refs/heads/main"); empty when detached or bare
	Bare           bool
	Detached       bool
	Locked         bool
	LockReason     string // may be empty when Locked
	Prunable       bool   // git would remove it on git worktree prune
	PrunableReason string
}

// Worktrees lists the worktrees of the repository holding repo, the main
// one first, parsing git worktree list --porcelain -z.
//
// The paths come from files in the git directory (worktrees/*/gitdir) that
// whoever controls the repository can write: they may name any folder.
// Check them against the managed roots before acting on one.
func (r Runner) Worktrees(ctx context.Context, repo string) ([]Worktree, error) {
	out, err := r.Run(ctx, repo, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, fmt.Errorf("list worktrees of %s: %w", repo, err)
	}
	wts, err := ParseWorktrees(out)
	if err != nil {
		return nil, fmt.Errorf("list worktrees of %s: %w", repo, err)
	}
	return wts, nil
}

// ParseWorktrees parses the output of git worktree list --porcelain -z:
// NUL-terminated attribute lines, records separated by an empty one.
// Unknown attributes are skipped.
func ParseWorktrees(out []byte) ([]Worktree, error) {
	var (
		wts []Worktree
		cur *Worktree
	)
	for _, field := range strings.Split(string(out), "\x00") {
		if field == "" {
			cur = nil
			continue
		}
		key, value, _ := strings.Cut(field, " ")
		if key == "worktree" {
			wts = append(wts, Worktree{Path: value})
			cur = &wts[len(wts)-1]
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("parse worktree list: %q before any worktree line", field)
		}
		switch key {
		case "HEAD":
			cur.HEAD = value
		case "branch":
			cur.Branch = value
		case "bare":
			cur.Bare = true
		case "detached":
			cur.Detached = true
		case "locked":
			cur.Locked = true
			cur.LockReason = value
		case "prunable":
			cur.Prunable = true
			cur.PrunableReason = value
		}
	}
	return wts, nil
}
