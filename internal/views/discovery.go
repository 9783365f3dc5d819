package views

import "github.com/reclaimer/reclaimer/internal/discover"

// Discovery is what a zero-configuration discovery found (plan, ls and
// status without a configuration, and init): each set of runtimes found as
// a source with the configuration table it corresponds to, and every place
// looked at. It is a local answer (a daemon runs with its configuration),
// so it has no API schema.
type Discovery struct {
	Sources []DiscoveredSource `json:"sources"`
	// Looked are the places looked at, found or not: what was looked for.
	Looked []discover.Place `json:"looked"`
	// Config is the configuration of the managed sources, commented, with
	// the policy defaults spelled out: what init prints or writes.
	Config string `json:"config"`
}

// DiscoveredSource is one set found.
type DiscoveredSource struct {
	Agent string `json:"agent,omitempty"`
	Kind  string `json:"kind"`
	// Table is the configuration table that manages it, as TOML
	// ("[[worktrees]]\nroot = ..."); "" when no table can select it.
	Table string `json:"table,omitempty"`
	// Source is its source's name in the discovered configuration (the
	// runtimes' keys carry it); "" when it is not managed.
	Source string `json:"source,omitempty"`
	// Unmanaged says why the discovered configuration leaves it out (its
	// table is written commented out); "" when managed.
	Unmanaged string           `json:"unmanaged,omitempty"`
	Looked    []string         `json:"looked"`
	Found     []discover.Found `json:"found"`
	Notes     []string         `json:"notes,omitempty"`
}
