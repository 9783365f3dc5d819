package sources

import (
	"fmt"
	"path/filepath"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/rundir"
	"github.com/reclaimer/reclaimer/internal/config"
)

// Dirs is [[dirs]]: folders whose every direct child folder is a runtime.
var Dirs = define("dirs", rundir.Name,
	"every direct child folder of `root` is one runtime (a run folder), with an optional home and workspaces inside",
	func(env *Env, t *DirsTable) (backend.Backend, error) {
		return &rundir.Backend{Root: t.Root, Home: t.Home, Workspaces: t.Workspaces, Git: env.Git,
			CacheDirs: env.Config.PolicyFor(t).CacheDirs, ProbeDir: filepath.Join(env.StateDir, "cache")}, nil
	}).local()

// DirsTable is one [[dirs]] table.
type DirsTable struct {
	// Root (root, required) is a folder whose every direct child folder is
	// one runtime. Absolute, "~/" expands; not "/".
	Root string `toml:"root"`
	// Home (home) is the subpath of each runtime folder that is its home
	// (where cache_dirs live), e.g. "persistence". Relative, clean, no
	// "..", "." for the runtime folder itself. Empty: the runtime has no
	// separate home.
	Home string `toml:"home"`
	// Workspaces (workspaces) are subpaths of each runtime folder that hold
	// work a user may want back (archived before deletion). Same rules as
	// Home.
	Workspaces []string `toml:"workspaces"`

	config.SourceBase
}

// Identity implements config.Table: the root.
func (t *DirsTable) Identity() string { return t.Root }

// Describe implements config.Table.
func (t *DirsTable) Describe() string { return fmt.Sprintf("root = %q", t.Root) }

// Paths implements config.Table.
func (t *DirsTable) Paths() []config.Path {
	return []config.Path{{Key: "root", Value: &t.Root, Role: config.PathDirs}}
}

// Check implements config.Table.
func (t *DirsTable) Check(c *config.Check) {
	if t.Root == "" {
		c.Add("", "root is required")
	}
	if t.Home != "" {
		c.Subpath("home", t.Home, "runtime folder")
	}
	for j, w := range t.Workspaces {
		c.Subpath(fmt.Sprintf("workspaces[%d]", j), w, "runtime folder")
	}
}
