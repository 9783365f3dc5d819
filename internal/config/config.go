package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Config is the whole configuration. Parse, Load and Default return it with
// paths resolved (~ expanded, cleaned, defaults of ledger.path and
// archive.dir filled in) and validated. Policy keys stay as written (nil when
// left out); ask PolicyFor for resolved values.
//
// To add a section later: a plain table is a struct field ([server],
// [archive.s3] as Archive.S3); a new kind of source is a slice of a struct
// that embeds PolicyOverrides ([[docker]] as Docker []DockerSource) and
// implements Source. Parse learns the new keys from the struct tags; add the
// checks to Validate and the sources to Config.sources.
type Config struct {
	Ledger  Ledger          `toml:"ledger"`
	Policy  PolicyOverrides `toml:"policy"` // global policy, overridden per source
	Archive Archive         `toml:"archive"`
	Server  Server          `toml:"server"`
	// Notify are the [[notify]] tables: webhooks for notices.
	Notify []Notify `toml:"notify"`

	// Worktrees are the [[worktrees]] tables: git worktrees of one
	// repository, or all worktrees under a folder.
	Worktrees []WorktreeSource `toml:"worktrees"`
	// Dirs are the [[dirs]] tables: folders whose every direct child
	// folder is a runtime.
	Dirs []DirSource `toml:"dirs"`

	name  string         // file name in messages
	lines map[string]int // key (as in Error.Key) → line, from Parse
}

// Ledger is the [ledger] table.
type Ledger struct {
	// Path (path) is the SQLite file of the ledger. Absolute; "~/" expands
	// to $HOME. Default: ledger.db in the state folder (see StateDir).
	Path string `toml:"path"`
}

// Archive is the [archive] table.
type Archive struct {
	// Dir (dir) is where archives are written. Absolute; "~/" expands to
	// $HOME. Default: archives in the state folder (see StateDir).
	Dir string `toml:"dir"`
}

// WorktreeSource is one [[worktrees]] table. Exactly one of Repo and Root is
// set.
type WorktreeSource struct {
	// Repo (repo) manages every linked worktree of this repository (the
	// main worktree itself is never a runtime). Absolute, "~/" expands.
	Repo string `toml:"repo"`
	// Root (root) manages every git worktree found under this folder.
	// Absolute, "~/" expands.
	Root string `toml:"root"`

	PolicyOverrides
}

// Table returns "worktrees".
func (WorktreeSource) Table() string { return "worktrees" }

// DirSource is one [[dirs]] table.
type DirSource struct {
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

	PolicyOverrides
}

// Table returns "dirs".
func (DirSource) Table() string { return "dirs" }

// geteuid is replaced in tests.
var geteuid = os.Geteuid

// StateDir returns the default state folder: /var/lib/reclaimer when running
// as root, else $XDG_STATE_HOME/reclaimer, else ~/.local/state/reclaimer.
// Relative values of $XDG_STATE_HOME and $HOME are ignored, as the XDG
// specification asks.
func StateDir() (string, error) {
	if geteuid() == 0 {
		return "/var/lib/reclaimer", nil
	}
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "reclaimer"), nil
	}
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "reclaimer"), nil
	}
	return "", errors.New("find state folder: neither $XDG_STATE_HOME nor $HOME is an absolute path")
}

// Default returns the configuration used without a file: no sources,
// built-in policy defaults, ledger and archives in the state folder. When
// there is no state folder (no $HOME), Ledger.Path and Archive.Dir stay
// empty and Validate reports them.
func Default() *Config {
	c := &Config{}
	c.resolve()
	return c
}

// AddWorktreeRepo adds a [[worktrees]] source for the repository at path.
// Unlike in a file, a relative path is taken from the current folder (it
// comes from a command-line flag); "~/" expands to $HOME. Call Validate
// after adding sources.
func (c *Config) AddWorktreeRepo(path string) error {
	p, err := flagPath(path)
	if err != nil {
		return fmt.Errorf("add worktree repo: %w", err)
	}
	c.Worktrees = append(c.Worktrees, WorktreeSource{Repo: p})
	return nil
}

// AddWorktreeRoot adds a [[worktrees]] source for every worktree under path,
// resolving path like AddWorktreeRepo.
func (c *Config) AddWorktreeRoot(path string) error {
	p, err := flagPath(path)
	if err != nil {
		return fmt.Errorf("add worktree root: %w", err)
	}
	c.Worktrees = append(c.Worktrees, WorktreeSource{Root: p})
	return nil
}

// AddDirRoot adds a [[dirs]] source whose every child folder of path is a
// runtime, resolving path like AddWorktreeRepo.
func (c *Config) AddDirRoot(path string) error {
	p, err := flagPath(path)
	if err != nil {
		return fmt.Errorf("add dir root: %w", err)
	}
	c.Dirs = append(c.Dirs, DirSource{Root: p})
	return nil
}

func flagPath(path string) (string, error) {
	if path == "" {
		return "", errors.New("empty path")
	}
	p := expandHome(path)
	if strings.HasPrefix(p, "~") {
		return "", fmt.Errorf("expand %q: $HOME is not set, or ~user is not supported", path)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", path, err)
	}
	return abs, nil
}

// resolve expands "~" and cleans every absolute path, and fills in the
// default ledger path and archive folder. It never fails: what it cannot
// resolve it leaves for Validate to report.
func (c *Config) resolve() {
	for _, p := range []*string{&c.Ledger.Path, &c.Archive.Dir, &c.Server.TokenFile} {
		*p = expandHome(*p)
	}
	for i := range c.Worktrees {
		w := &c.Worktrees[i]
		w.Repo, w.Root = expandHome(w.Repo), expandHome(w.Root)
	}
	for i := range c.Dirs {
		c.Dirs[i].Root = expandHome(c.Dirs[i].Root)
	}
	if c.Ledger.Path == "" || c.Archive.Dir == "" {
		if dir, err := StateDir(); err == nil {
			if c.Ledger.Path == "" {
				c.Ledger.Path = filepath.Join(dir, "ledger.db")
			}
			if c.Archive.Dir == "" {
				c.Archive.Dir = filepath.Join(dir, "archives")
			}
		}
	}
}

// expandHome replaces a leading "~" or "~/" with $HOME and cleans absolute
// paths. Anything else ("~user", "~" without $HOME, relative paths) is
// returned as is.
func expandHome(p string) string {
	if home := os.Getenv("HOME"); home != "" {
		if p == "~" {
			p = home
		} else if rest, ok := strings.CutPrefix(p, "~/"); ok {
			p = filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return p
}

// sources lists every source table with its key, in file order by kind.
func (c *Config) sources() []keyedSource {
	var out []keyedSource
	for i := range c.Worktrees {
		out = append(out, keyedSource{fmt.Sprintf("worktrees[%d]", i), &c.Worktrees[i]})
	}
	for i := range c.Dirs {
		out = append(out, keyedSource{fmt.Sprintf("dirs[%d]", i), &c.Dirs[i]})
	}
	return out
}

type keyedSource struct {
	key string
	src Source
}
