// Package backend defines what the reclaim engine knows about runtimes and
// the role interfaces through which backends act on them.
//
// A backend implements only the roles it can perform (Lister, Suspender,
// Deleter, FileReclaimer, Exporter, Locker, NativeLifecycle), each a single
// method taking an options struct. The engine discovers capabilities with
// As, which also looks through decorators that implement Unwrap() Backend.
// A backend that has a role in general but cannot perform it for one runtime
// returns an error wrapping errors.ErrUnsupported, and the engine falls back.
//
// Nothing here assumes a runtime is a folder: local backends fill Path, Home
// and Workspaces; remote ones leave them empty and use labels and states.
//
// Errors are a few sentinel categories (ErrNotFound, ErrBusy, ErrConflict,
// ErrProtected, ErrUnavailable and errors.ErrUnsupported), wrapped as
// "verb noun: %w" and mapped to exit codes and HTTP statuses only at the
// edges (ops.Classify). A runtime that vanished is ErrNotFound to every
// role; a suspend or delete of what is already suspended or gone is a
// no-op.
//
// Keys: a backend fills Key.Backend and Key.ID; the engine sets
// Key.Source to the name of the source that listed it. Two sources of one
// backend may list the same ID: their runtimes are different runtimes.
//
// Every backend runs the conformance suite, package backendtest, against
// its real provider or a contract fake of it (see its doc for what it
// checks and what a harness gives it).
package backend
