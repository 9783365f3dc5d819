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
// The fixed tables are fields ([ledger], [policy], [archive], [server],
// [[notify]]); the source tables ([[worktrees]], [[docker]], [[e2b]], ...)
// are Sources, of the kinds given to Parse (package sources registers
// them). Parse learns every key from the struct tags of both.
type Config struct {
	Ledger  Ledger          `toml:"ledger"`
	Policy  PolicyOverrides `toml:"policy"` // global policy, overridden per source
	Archive Archive         `toml:"archive"`
	Server  Server          `toml:"server"`
	// Notify are the [[notify]] tables: webhooks for notices.
	Notify []Notify `toml:"notify"`

	// Sources are the source tables, in the order of the kinds given to
	// Parse, then of the file.
	Sources []Source `toml:"-"`

	kinds []Kind         // what Parse was given, for Marshal
	name  string         // file name in messages
	lines map[string]int // key (as in Error.Key) → line, from Parse
}

// Ledger is the [ledger] table.
type Ledger struct {
	// Path (path) is the SQLite file of the ledger. Absolute; "~/" expands
	// to $HOME. Default: ledger.db in the state folder (see StateDir).
	Path string `toml:"path"`
	// URL (url), when set, makes the ledger PostgreSQL, shared by the
	// replicas of a fleet: "postgres://user@host:5432/db?sslmode=..." or
	// "postgres:///db?host=/run/postgresql" (docs/fleet.md). Path then
	// only names the state folder (its parent). Never printed whole: its
	// password is hidden wherever the configuration is shown.
	URL string `toml:"url"`
	// PasswordFile (password_file) holds the password of URL's role
	// (absolute; surrounding white space is ignored), instead of a
	// password in URL or PGPASSWORD in the environment.
	PasswordFile string `toml:"password_file"`
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
	// IncludeHome (include_home) keeps the home of a Docker runtime or a
	// run folder in its archive, less its cache_dirs and core dumps.
	// Default true; false leaves the home out (said in plans and results).
	IncludeHome *bool `toml:"include_home"`
	// S3 ([archive.s3]), when present, stores archives in an
	// S3-compatible bucket instead of Dir.
	S3 *ArchiveS3 `toml:"s3"`
}

// HomeIncluded tells whether archives keep runtimes' homes (include_home,
// default true).
func (a Archive) HomeIncluded() bool { return a.IncludeHome == nil || *a.IncludeHome }

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
	// StallTimeout (stall_timeout) and StallBytes (stall_bytes): every
	// request to the server (an upload's part, a read-back, a removal)
	// must move at least stall_bytes in every stall_timeout, or it fails
	// as stalled. Defaults "30s" and 16384.
	StallTimeout *Duration `toml:"stall_timeout"`
	StallBytes   int64     `toml:"stall_bytes"`
}

// geteuid is replaced in tests.
var geteuid = os.Geteuid

// SetEUIDForTest makes StateDir see uid as the effective user until the
// returned function restores it: for tests (here and of the packages
// built on this one) that check the state folder's defaults while running
// as root. Not safe alongside parallel tests.
func SetEUIDForTest(uid int) (restore func()) {
	old := geteuid
	geteuid = func() int { return uid }
	return func() { geteuid = old }
}

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

// FlagPath resolves a path given on the command line (--repo, --dir):
// unlike in a file, a relative path is taken from the current folder;
// "~/" expands to $HOME.
func FlagPath(path string) (string, error) {
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
	for _, p := range []*string{&c.Ledger.Path, &c.Ledger.PasswordFile, &c.Archive.Dir, &c.Server.TokenFile} {
		*p = expandHome(*p)
	}
	if c.Archive.S3 != nil {
		c.Archive.S3.CredentialsFile = expandHome(c.Archive.S3.CredentialsFile)
	}
	for _, src := range c.Sources {
		c.expandPaths(src.Table)
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

// expandPaths expands "~" in every host path of a source table.
func (c *Config) expandPaths(t Table) {
	for _, p := range t.Paths() {
		*p.Value = expandHome(*p.Value)
	}
}

// SourceNamed returns the source with that stable name.
func (c *Config) SourceNamed(name string) (Source, bool) {
	for _, s := range c.Sources {
		if s.Name() == name {
			return s, true
		}
	}
	return Source{}, false
}
