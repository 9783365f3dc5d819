// Package config reads the TOML configuration of reclaimer.
//
// # Contract
//
// Load reads one file; Parse takes its bytes; both are given the kinds of
// source tables to accept (the registry of package sources, which wraps
// them as sources.Load and sources.Parse). Default builds the
// configuration used without a file (AddSource adds the command line's
// sources, see sources.AdHoc). All three return a
// *Config whose paths are resolved ("~/" expanded from $HOME, cleaned,
// ledger.path and archive.dir defaulted from the state folder, see
// StateDir); Load and Parse also validate it. Nothing here touches the
// filesystem beyond Load reading its file.
//
// The file keeps what was written: a policy key left out is nil in
// PolicyOverrides. The engine never reads those pointers: it asks
// Config.PolicyFor(table) for a policy.Settings of plain values, resolved
// source table ← [policy] ← built-in default.
//
// # Sources
//
// Config.Sources holds every source table in file order, each a Source:
// its Kind (the table name), its index among that kind's tables, and its
// Table (the kind's struct, a config.Table). A source's Name is stable: its
// `name` key, else "<table>:<identity>" (worktrees:/srv/app), so
// reordering or adding tables changes no runtime's key; Label names it as
// written (`[[worktrees]] repo = "/srv/app"`), for messages. Two sources
// with one name are refused.
//
// # Errors
//
// Every problem with the content is an *Error that matches ErrInvalid and
// names the file, the line and the key, with 0-based indexes for arrays of
// tables:
//
//	config /etc/reclaimer/config.toml:12: unknown key "dsik_high" in [policy]; did you mean "disk_high"?
//	config /etc/reclaimer/config.toml:20: worktrees[1].retention: "-1h": negative durations are not allowed
//	config /etc/reclaimer/config.toml:7:13: unexpected character U+000A at start of value
//
// (positions in messages about the file are the file's own: worktrees[1]
// is its second [[worktrees]] table).
//
// Syntax errors also give the column. Parse reports every problem it can
// find at once (joined with errors.Join, in line order): unknown keys and
// values of the wrong type or syntax together, up to the first syntax error
// if there is one; Validate's checks once the document decodes.
// Unknown keys are errors, never ignored: scripts depend on the exact key
// names, and a typo must not silently turn a policy off.
//
// Validation lives in one place, Config.Validate; call it again after
// changing a Config in code.
//
// # Keys
//
// The keys are documented on the fields of Config, Ledger, Archive,
// Server, SourceBase and PolicyOverrides here, and on the table structs of
// package sources; the Go name of each field is followed by its TOML key.
// docs/example.toml is a complete, commented example, parsed by the tests.
// Duration and Fraction describe the value syntaxes; "off" and zero are
// explained there.
//
// # Concurrency
//
// A Config is a plain value. Load, Parse and Default return a new one each
// time; reading it, PolicyFor and Validate included, is safe from many
// goroutines; changing it (the Add helpers) is not, and must happen before
// it is shared.
//
// # Extending
//
// Plain sections slot in as fields of Config ([server], [archive.s3] as a
// field of Archive). Kinds of sources are not fields: each is a Kind
// registered in package sources (see its doc), whose table struct embeds
// SourceBase; Parse learns its keys from the struct tags, and Validate
// calls its Check.
package config
