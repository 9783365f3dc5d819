// Package engine is the reconciler: each pass re-reads the world (every
// source's runtimes, the filesystems' usage, the ledger) from scratch,
// decides with package policy, and applies the plan.
//
// Plan never changes anything. Apply follows the order of destruction of
// DESIGN §4 for every action: journal the intent, export and verify an
// archive where one is needed (outside the runtime's lock: it is slow),
// then under the runtime's lock re-observe it and skip the action with
// "changed since plan: ..." when it became busy, saw newer activity, gained
// a hold, pin or lease, or its fingerprint (paths, HEAD) changed; mark the
// new state in the ledger; rename into the trash or call the backend; and
// journal the outcome. The slow deletion happens afterwards, from the trash.
// Apply never does more than the plan says; it may do less.
//
// The re-check is one pure function, recheck (action as planned, runtime as
// seen again, now → what changed), with a table test. A backend with a
// backend.Locker is asked for its lock and what it sees under it; one that
// cannot lock that runtime (errors.ErrUnsupported) gets the engine's own
// re-check, a listing of that runtime by the source that planned it. Keys
// carry their source: a runtime of another source with the same backend
// and ID is another runtime, never a substitute. A step the backend cannot
// take (errors.ErrUnsupported) is skipped with code unsupported, not
// failed; a runtime gone by then is skipped too.
//
// Observe lists each source within its ListTimeout. What it cannot see is
// a plan.Problem of that source (unreadable, timed out, listed nothing
// while the ledger knows its runtimes, a partial listing's
// backend.Warnings), never a silent gap: a source that could not be
// listed keeps its runtimes as they were (not missing), and records of
// sources this engine does not have (another configuration sharing the
// ledger) are never touched.
//
// Archives go to Options.Sink (a local folder by default, or S3): the sink
// is checked first, the backend's Exporter writes and reads back every
// object, the engine reads the manifest back once more, and only then is
// the archive recorded and the runtime touched. An export that fails, or
// that is not recorded because the action was skipped or failed later, is
// removed from the sink again. A failed archive or delete also leaves a
// "failed" notice in the ledger, besides the result and the journal.
//
// Recover, run at start-up, finishes what a crash left half done: an
// archive whose runtime was already marked archived is removed; anything
// else is recorded as interrupted and planned again by the next pass. The
// trash of every managed root purges its leftovers when opened.
//
// One runtime's failure never stops a pass: it is recorded in the result
// and the pass goes on. An Engine is safe for concurrent use; processes
// sharing a ledger exclude each other per runtime with Options.Locker: file
// locks under the state folder on one host, PostgreSQL's advisory locks
// across the hosts of a fleet.
package engine
