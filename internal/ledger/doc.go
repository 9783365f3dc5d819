// Package ledger defines the program's own durable record: the runtimes a pass
// has seen, reported activity, holds, pins, leases, per-runtime overrides,
// archives, notices, and a journal of every action taken (DESIGN §2, §4).
//
// The record lives behind the [Store] interface. The embedded SQLite store is
// in ledger/sqlite, the PostgreSQL store of a fleet in ledger/postgres. Every
// store must pass the conformance suite in ledger/ledgertest, which is the
// executable form of this contract.
//
// # Keys
//
// Every record of a runtime is keyed by [Key] (backend.Key): source,
// backend and ID. Two sources may have a runtime of the same backend and
// ID; their records, pins, leases, holds, retention overrides, notices and
// archives are distinct, and filters match the key whole (a filter's
// Source narrows to one source). A store keeps its key encoding in one
// place (sqlite/encode.go, postgres/key.go: the columns, the match, the
// order, the arguments and the scan), so that the order of [Key.Compare] and the
// cursors built on it are the same in every store.
//
// Records written before keys carried their source (schema 1) have an
// empty Source. A store that can migrate them implements [Adopter]: the
// engine gives each such record to the one source that lists its runtime
// (AdoptLegacy), and reports one two sources claim. The SQLite store's
// migrations are numbered files (sqlite/migrations), each run once and
// tested from a file of the schema before it.
//
// Two more contracts come with sharing a ledger. A [Locker] keeps one
// runtime still against every process using the ledger (ledger/filelock on
// one host, an advisory lock in PostgreSQL); ledgertest.RunLocker is its
// suite, across processes. A [Fencer] runs writes that commit only while a
// leadership lease still holds a generation (package leader).
//
// # Concurrency
//
// A Store is safe for concurrent use by many goroutines. Every write method
// runs in one transaction: a batch ([Store.Observe], [Store.RecordActivity]) is
// applied whole or not at all, and a failed call leaves nothing behind. The
// SQLite store serialises writes through one connection (WAL mode, so readers
// are never blocked by the writer); two processes sharing one file (the
// server and a CLI command) wait for each other up to a busy timeout.
//
// [Store.Update] runs its function inside the write transaction, so it must be
// quick and must not call the store (in SQLite that would deadlock on the one
// writer connection).
//
// # Time
//
// The store never reads the clock: every time it compares or records is
// passed in (a hold's now, an activity's At, an intent's At). Times are stored
// with nanosecond precision and read back in UTC; a zero time.Time means
// "none" (no lease, not scheduled) and reads back as the zero value. A write
// refuses a time outside [MinTime, MaxTime] instead of wrapping it; a read
// filter outside that range is clamped to it.
//
// # Ownership of runtime fields
//
// A [RuntimeRecord] mixes what a pass observed (state, folders, labels, size,
// first and last seen) with what the engine and users decided (pin, lease,
// retention override, schedule, archive id). [Store.Observe] writes only the
// observed fields, so a pass can never clobber a pin or a lease; the decided
// fields change only through [Store.Update].
//
// # Idempotency
//
// Repeating a write is harmless wherever the operation allows it: observing
// the same thing again, reporting an activity time that is not newer,
// recording the same archive or notice again, recording the same outcome of
// a journal entry again, releasing a hold that is already gone. Appending a
// journal intent is the exception by nature: each call is one attempt and gets
// a new entry.
// Pruning (PruneHolds, PruneUsage, PruneJournal) again deletes nothing more,
// from any number of writers at once; what a prune deleted is forgotten, so
// recording the same notice again after it makes a new one.
//
// # Errors
//
// Errors are wrapped as "verb noun: %w". Two sentinel categories matter to
// callers: [ErrNotFound] (no such runtime, hold, archive or journal entry, or a
// hold that has expired) and [ErrConflict] (the request contradicts what is
// recorded: a hold id that belongs to another runtime, a different outcome for
// a finished journal entry, a different archive under an existing id). Invalid
// input (an empty key, a zero time, a non-positive TTL) is reported as a plain
// error before anything is written.
package ledger
