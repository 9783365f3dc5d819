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
	// Docker are the [[docker]] tables: containers of the Docker Engine
	// chosen by labels, with host folders bind-mounted into them.
	Docker []DockerSource `toml:"docker"`

	// E2B, Daytona and HTTP are the remote sources: [[e2b]], [[daytona]]
	// and [[http]] (see remote.go).
	E2B     []E2BSource     `toml:"e2b"`
	Daytona []DaytonaSource `toml:"daytona"`
	HTTP    []HTTPSource    `toml:"http"`

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
	// Dir (dir) is where archives are written when [archive.s3] is not
	// set, and where exports stage their temporary files in any case.
	// Absolute; "~/" expands to $HOME. Default: archives in the state
	// folder (see StateDir).
	Dir string `toml:"dir"`
	// IncludeDependencies (include_dependencies) keeps the rebuildable
	// git-ignored dependency folders (node_modules, .venv, ...) in the
	// tar.zst of run folders. Default false: they are left out and listed
	// in the manifest with their lock files.
	IncludeDependencies bool `toml:"include_dependencies"`
	// S3 ([archive.s3]), when present, stores archives in an
	// S3-compatible bucket instead of Dir.
	S3 *ArchiveS3 `toml:"s3"`
}

// ArchiveS3 is the [archive.s3] table. Credentials never appear in the
// configuration: they come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
// (and AWS_SESSION_TOKEN) in the environment, or from CredentialsFile.
type ArchiveS3 struct {
	// Endpoint (endpoint, required): "https://s3.example.com",
	// "http://127.0.0.1:7070", or "host:port" for HTTPS.
	Endpoint string `toml:"endpoint"`
	// Bucket (bucket, required) must exist.
	Bucket string `toml:"bucket"`
	// Prefix (prefix) goes in front of every object name: objects are
	// <prefix>/<backend>/<runtime>/<timestamp>.<ext>.
	Prefix string `toml:"prefix"`
	// Region (region); empty lets the client ask the server.
	Region string `toml:"region"`
	// CredentialsFile (credentials_file): an AWS shared credentials file
	// (absolute) read instead of the environment, with Profile (profile;
	// default $AWS_PROFILE or "default").
	CredentialsFile string `toml:"credentials_file"`
	Profile         string `toml:"profile"`
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

// DockerSource is one [[docker]] table: every container whose labels
// match is a runtime; its files are the host sources of its bind mounts.
type DockerSource struct {
	// Labels (labels) select the containers: every name = value pair must
	// be on a container, e.g. labels = { "reclaimer.scope" = "abc" }.
	Labels map[string]string `toml:"labels"`
	// OpenHandsRuntimeOwner (openhands_runtime_owner) adds the label
	// ai.openhands.runtime-owner = <value>: the containers of one
	// OpenHands agent server.
	OpenHandsRuntimeOwner string `toml:"openhands_runtime_owner"`
	// OpenHandsExecutionScope (openhands_execution_scope) adds the label
	// ai.openhands.execution-scope = <value>: its execution-only sandboxes.
	OpenHandsExecutionScope string `toml:"openhands_execution_scope"`
	// Home (home) is the container path of the sandbox home, e.g.
	// "/var/openhands/.openhands": the bind mount there is the home whose
	// cache_dirs are emptied. Absolute, clean. Optional.
	Home string `toml:"home"`
	// Workspaces (workspaces) are container paths of workspaces (shed of
	// dependencies under disk pressure, archived before removal).
	Workspaces []string `toml:"workspaces"`
	// Roots (roots) are host folders under which bind-mount sources are
	// managed; nothing outside them is ever touched. Absolute, "~/"
	// expands; not "/". Their direct child folders that no container
	// mounts are listed as unowned.
	Roots []string `toml:"roots"`
	// Host (host) is the Engine's address, e.g. "unix:///run/docker.sock".
	// Default: $DOCKER_HOST, else the platform's default socket.
	Host string `toml:"host"`

	PolicyOverrides
}

// Table returns "docker".
func (DockerSource) Table() string { return "docker" }

// Label names of the OpenHands presets.
const (
	OpenHandsRuntimeOwnerLabel   = "ai.openhands.runtime-owner"
	OpenHandsExecutionScopeLabel = "ai.openhands.execution-scope"
)

// Selector returns the labels a container must carry: Labels with the
// presets added.
func (d DockerSource) Selector() map[string]string {
	sel := map[string]string{}
	for k, v := range d.Labels {
		sel[k] = v
	}
	if d.OpenHandsRuntimeOwner != "" {
		sel[OpenHandsRuntimeOwnerLabel] = d.OpenHandsRuntimeOwner
	}
	if d.OpenHandsExecutionScope != "" {
		sel[OpenHandsExecutionScopeLabel] = d.OpenHandsExecutionScope
	}
	return sel
}

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
	if c.Archive.S3 != nil {
		c.Archive.S3.CredentialsFile = expandHome(c.Archive.S3.CredentialsFile)
	}
	for i := range c.Worktrees {
		w := &c.Worktrees[i]
		w.Repo, w.Root = expandHome(w.Repo), expandHome(w.Root)
	}
	for i := range c.Dirs {
		c.Dirs[i].Root = expandHome(c.Dirs[i].Root)
	}
	for i := range c.Docker {
		for j, r := range c.Docker[i].Roots {
			c.Docker[i].Roots[j] = expandHome(r)
		}
	}
	for i := range c.E2B {
		c.E2B[i].APIKeyFile = expandHome(c.E2B[i].APIKeyFile)
	}
	for i := range c.Daytona {
		c.Daytona[i].APIKeyFile = expandHome(c.Daytona[i].APIKeyFile)
	}
	for i := range c.HTTP {
		c.HTTP[i].TokenFile = expandHome(c.HTTP[i].TokenFile)
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
	for i := range c.Docker {
		out = append(out, keyedSource{fmt.Sprintf("docker[%d]", i), &c.Docker[i]})
	}
	for i := range c.E2B {
		out = append(out, keyedSource{fmt.Sprintf("e2b[%d]", i), &c.E2B[i]})
	}
	for i := range c.Daytona {
		out = append(out, keyedSource{fmt.Sprintf("daytona[%d]", i), &c.Daytona[i]})
	}
	for i := range c.HTTP {
		out = append(out, keyedSource{fmt.Sprintf("http[%d]", i), &c.HTTP[i]})
	}
	return out
}

type keyedSource struct {
	key string
	src Source
}
