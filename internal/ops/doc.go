// Package ops is the application layer: every operation once (plan,
// apply, a saved plan by file or id, delete, status, ls, pin, unpin, lease,
// retention, touch, register, release, holds, activity, log, archives,
// prune, restore, native), with its resolution of runtime names, locking
// and rules, answering with the views of package views. The CLI (local and
// --server) and the HTTP API are thin edges over it: a local command calls
// an *App; --server calls the same methods through the API, whose handlers
// call the daemon's *App (Service is what both give the CLI).
//
// # Names
//
// A runtime is named by its ID, "backend/ID", "source/ID", or an absolute
// path: its folder, its former folder once archived, or any folder inside
// its folder, home or workspaces. A name that matches nothing is
// backend.ErrNotFound, one that matches several ErrAmbiguous (listing
// them). An operation on several runtimes resolves them all before it
// writes anything: all of them, or none.
//
// # Rules in one place
//
// A lease never outlives the runtime's lifetime cap (policy.CapLease). A
// hold is written under the lock a pass takes to re-check and remove the
// runtime. What would change an archived runtime is ErrArchived; a deleted
// one is not found. Activity in the future is refused (a minute is
// forgiven). A pass runs one at a time; a pass asked for over the API
// waits at most [server] hold_wait for one running.
//
// # Errors
//
// Errors are wrapped as "verb noun: %w" over a few categories, and
// Classify maps each to its API code, HTTP status and exit code: the only
// place they meet the edges. The --server client reads an API error back
// into a RemoteError of the same category.
//
// # Time
//
// The App's clock (Options.Clock) is the time of every decision it makes;
// tests use clock.Fake.
package ops
