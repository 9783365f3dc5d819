// Package sources is the registry of kinds of source: for each, the TOML
// table of the configuration ([[worktrees]], [[docker]], [[e2b]], ...), its
// keys, defaults and checks, the name of its backend, its documentation row
// and how it builds the backend. Parsing (config.Parse, through Load and
// Parse here), validation, Build, the documentation tests and the example
// file's test iterate the one table Kinds.
//
// # Adding a kind
//
// A new backend touches, besides its own package under internal/backend:
//
//  1. one file here, <table>.go, with
//     - the table's struct: its keys as fields with `toml` tags and a
//     comment each, embedding config.SourceBase (name, list_timeout and
//     every policy key come with it);
//     - its methods of config.Table: Identity (what makes it this source:
//     its default name is "<table>:<identity>", so that reordering or
//     adding tables never renames a source and the runtimes' keys stay),
//     Describe (the identifying setting as written, for messages),
//     Paths (host paths, with their role: managed roots are checked for
//     overlaps, files for being absolute) and Check (its own keys; paths
//     and policy keys are checked already);
//     - its Kind: define(table, backend name, summary, build). Build does
//     no I/O; a credential that cannot be read is an error of the
//     backend's calls, not of Build, so one bad source never stops the
//     others;
//  2. one line in Kinds (registry.go);
//  3. docs: a "## <backend>" section in docs/backends.md, a row per key in
//     docs/configuration.md, and a table in docs/example.toml; the tests
//     of this package fail until all three are there and the example
//     parses;
//  4. the backend conformance suite (internal/backend/backendtest) run from
//     the backend's own tests.
//
// Nothing else changes: the CLI, the daemon, the API and the engine learn
// the kind from the registry.
//
// # Contract
//
// Build returns one engine.Source per table, in the order of Kinds, then of
// the file, each with its stable name (config.Source.Name), its label for
// messages (`[[worktrees]] repo = "/x"`), its effective policy and its
// listing bound. It does no I/O. AdHoc adds the command line's --repo and
// --dir as the tables a file would have, with the same names.
package sources
