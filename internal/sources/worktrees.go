package sources

import (
	"fmt"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/worktree"
	"github.com/reclaimer/reclaimer/internal/config"
)

// Worktrees is [[worktrees]]: git worktrees of one repository, or every
// worktree under a folder.
var Worktrees = define("worktrees", worktree.Name,
	"every linked worktree of one repository (`repo`), or every git worktree up to three levels below a folder (`root`)",
	func(env *Env, t *WorktreesTable) (backend.Backend, error) {
		return &worktree.Backend{Repo: t.Repo, Root: t.Root, Git: env.Git}, nil
	}).local()

// WorktreesTable is one [[worktrees]] table. Exactly one of Repo and Root
// is set.
type WorktreesTable struct {
	// Repo (repo) manages every linked worktree of this repository (the
	// main worktree itself is never a runtime). Absolute, "~/" expands.
	Repo string `toml:"repo"`
	// Root (root) manages every git worktree found under this folder.
	// Absolute, "~/" expands.
	Root string `toml:"root"`

	config.SourceBase
}

// Identity implements config.Table: the repository or the root.
func (t *WorktreesTable) Identity() string {
	if t.Repo != "" {
		return t.Repo
	}
	return t.Root
}

// Describe implements config.Table.
func (t *WorktreesTable) Describe() string {
	if t.Repo != "" {
		return fmt.Sprintf("repo = %q", t.Repo)
	}
	return fmt.Sprintf("root = %q", t.Root)
}

// Paths implements config.Table.
func (t *WorktreesTable) Paths() []config.Path {
	return []config.Path{{Key: "repo", Value: &t.Repo, Role: config.PathRepo}, {Key: "root", Value: &t.Root, Role: config.PathTree}}
}

// Check implements config.Table.
func (t *WorktreesTable) Check(c *config.Check) {
	switch {
	case t.Repo != "" && t.Root != "":
		c.Add("root", "set repo or root, not both (repo is %q)", t.Repo)
	case t.Repo == "" && t.Root == "":
		c.Add("", "set repo (a repository's worktrees) or root (every worktree under a folder)")
	}
}
