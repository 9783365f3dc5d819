package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Kind is one kind of source table, [[<Table>]], as package sources
// registers it: the table's name and how to make an empty one to decode
// into. Parse learns each kind's keys from the struct tags of what New
// returns, exactly as it learns the fixed tables' keys from Config.
type Kind struct {
	// Table is the name of the array of tables: "worktrees".
	Table string
	// New returns a pointer to a new zero table: a struct that embeds
	// SourceBase (the keys every source has, the policy keys among them)
	// and implements Table.
	New func() Table
}

// Table is one source table as written, decoded into its kind's struct.
type Table interface {
	// Common returns the keys every source table has (SourceBase, which
	// the table embeds and so implements this).
	Common() *SourceBase
	// Identity is what makes this table this source and no other: its
	// repository or root, its endpoint and selector. The source's default
	// name is "<table>:<identity>", so that adding or reordering tables
	// never renames a source (its runtimes' keys carry the name).
	Identity() string
	// Describe is the identifying setting as written, for messages that
	// name the source: `repo = "/home/me/project"`.
	Describe() string
	// Paths are the table's host paths: "~" is expanded in each, managed
	// roots and repositories are checked for overlaps, and every file is
	// checked to be absolute.
	Paths() []Path
	// Check validates the table's own keys; c names them relative to the
	// table. Paths and policy keys are checked already.
	Check(c *Check)
}

// PathRole says what a configured host path is to reclaimer.
type PathRole int

const (
	// PathRepo is a repository: the folders of its linked worktrees are
	// managed, the repository itself never is.
	PathRepo PathRole = iota + 1
	// PathTree is a folder below which worktrees are runtimes.
	PathTree
	// PathDirs is a folder whose every child folder is (or may be) a
	// runtime: [[dirs]] root, [[docker]] roots.
	PathDirs
	// PathFile is a file reclaimer reads (a credential); never managed.
	PathFile
	// PathRead is a folder reclaimer reads but never changes (an
	// agent-server's conversation history): resolved like a root, links
	// included, since what reads it compares resolved paths; never
	// managed.
	PathRead
)

// Managed tells whether reclaimer deletes from (or below) such a path.
func (r PathRole) Managed() bool { return r == PathRepo || r == PathTree || r == PathDirs }

// Path is one host path of a table.
type Path struct {
	// Key is the path's key relative to its table: "repo", "roots[1]".
	Key string
	// Value points at the table's field: resolution writes back into it.
	Value *string
	Role  PathRole
}

// SourceBase holds the keys every source table has. Each kind's table
// embeds it.
type SourceBase struct {
	// Name (name) names the source for good: runtime keys, the ledger,
	// the API's ?source= and `reclaimer ls` use it. Letters, digits, ".",
	// "_" and "-". Default "<table>:<identity>", e.g.
	// "worktrees:/home/me/project".
	Name string `toml:"name"`
	// ListTimeout (list_timeout) bounds how long one pass lists this
	// source, retries on 429 and Retry-After included; past it the source
	// is reported as a problem of that pass. Default DefaultListTimeout.
	ListTimeout *Duration `toml:"list_timeout"`

	PolicyOverrides
}

// Common implements Table for every struct that embeds SourceBase.
func (b *SourceBase) Common() *SourceBase { return b }

// DefaultListTimeout is a source's list_timeout when it sets none.
const DefaultListTimeout = time.Minute

// Source is one source table of a configuration, in Config.Sources.
type Source struct {
	// Kind is the table's name: "worktrees".
	Kind string
	// Index is the table's position among the tables of its kind, as in
	// the keys of errors: worktrees[1].
	Index int
	Table Table
}

// Key is the table's key in messages about the file: "worktrees[1]".
func (s Source) Key() string { return s.Kind + "[" + strconv.Itoa(s.Index) + "]" }

// Name is the source's stable name: its name key, else
// "<table>:<identity>".
func (s Source) Name() string {
	if n := s.Table.Common().Name; n != "" {
		return n
	}
	return s.Kind + ":" + s.Table.Identity()
}

// Label names the source as the user wrote it, for messages:
// `[[worktrees]] repo = "/x"`, or `[[http]] name = "orch-a"`.
func (s Source) Label() string {
	if n := s.Table.Common().Name; n != "" {
		return fmt.Sprintf("[[%s]] name = %q", s.Kind, n)
	}
	return "[[" + s.Kind + "]] " + s.Table.Describe()
}

// ListTimeout is list_timeout resolved.
func (s Source) ListTimeout() time.Duration {
	if d := s.Table.Common().ListTimeout; d != nil && *d > 0 {
		return time.Duration(*d)
	}
	return DefaultListTimeout
}

var sourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// AddSource appends a table of kind to the configuration, as if it were
// the last of its kind in a file: what command-line flags (--repo, --dir)
// add. Call Validate afterwards.
func (c *Config) AddSource(k Kind, t Table) {
	if !slices.ContainsFunc(c.kinds, func(x Kind) bool { return x.Table == k.Table }) {
		c.kinds = append(c.kinds, k)
	}
	n := 0
	for _, s := range c.Sources {
		if s.Kind == k.Table {
			n++
		}
	}
	c.Sources = append(c.Sources, Source{Kind: k.Table, Index: n, Table: t})
	c.expandPaths(t)
}
