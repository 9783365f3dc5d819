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
// ErrProtected and errors.ErrUnsupported), wrapped as "verb noun: %w" and
// mapped to exit codes and HTTP statuses only at the edges.
package backend
