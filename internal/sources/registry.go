package sources

import (
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
)

// Kinds is the registry: every kind of source, in the order their tables
// are listed (and built). Parsing, validation, Build, the documentation
// tests and the example-file test all iterate it. A new backend adds one
// line here and one file of its own (see the package documentation).
var Kinds = []Kind{
	Worktrees,
	Dirs,
	Docker,
	OpenHands,
	E2B,
	Daytona,
	HTTP,
	OpenHandsCloud,
	Modal,
	Cloudflare,
	Kubernetes,
	AgentSandbox,
}

// Kind is one kind of source: the TOML table (config.Kind: its name and
// its struct, whose tags are its keys), the backend it builds, and its
// documentation row.
type Kind struct {
	config.Kind
	// Backend is the name of the backend the kind builds, as it appears in
	// runtime keys ("worktree" for [[worktrees]]).
	Backend string
	// Summary is the kind's documentation row: what one table manages, in
	// a sentence (docs/configuration.md lists it; a test checks).
	Summary string
	// Build makes the backend of one table. It does no I/O: a root that
	// does not exist yet, or a provider that does not answer, is found out
	// when the backend lists.
	Build func(env *Env, t config.Table) (backend.Backend, error)
	// Local: the kind's runtimes are this host's own (files, its Docker
	// Engine). In a fleet each replica acts on its own local sources, and
	// only the leader on the others (engine.Source.Shared): a kind is
	// shared unless it says otherwise, so a new remote provider is never
	// acted on by every replica at once.
	Local bool
}

// local marks a kind whose runtimes live on this host.
func (k Kind) local() Kind {
	k.Local = true
	return k
}

// define makes a Kind from a table type and its typed builder.
func define[T any, P interface {
	*T
	config.Table
}](table, backendName, summary string, build func(env *Env, t P) (backend.Backend, error)) Kind {
	return Kind{
		Kind:    config.Kind{Table: table, New: func() config.Table { return P(new(T)) }},
		Backend: backendName, Summary: summary,
		Build: func(env *Env, t config.Table) (backend.Backend, error) { return build(env, t.(P)) },
	}
}

// ConfigKinds are the registry's tables, for config.Parse.
func ConfigKinds() []config.Kind {
	out := make([]config.Kind, len(Kinds))
	for i, k := range Kinds {
		out[i] = k.Kind
	}
	return out
}

// KindOf returns the registered kind of table.
func KindOf(table string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Table == table {
			return k, true
		}
	}
	return Kind{}, false
}

// Load reads, parses and validates the configuration file at path with
// every registered kind of source.
func Load(path string) (*config.Config, error) { return config.Load(path, ConfigKinds()) }

// Parse parses and validates a configuration with every registered kind.
func Parse(data []byte, name string) (*config.Config, error) {
	return config.Parse(data, name, ConfigKinds())
}
