// Package sqlite is the embedded ledger.Store: one SQLite file under the
// state folder, for the one-host deployment (DESIGN §6).
//
// # Concurrency
//
// The file is opened twice: a writer pool limited to one connection, whose
// transactions start with BEGIN IMMEDIATE so that a read-modify-write cannot
// be overtaken, and a read-only pool for concurrent readers. The journal mode
// is WAL, so readers see the last committed state and never wait for the
// writer. Another process on the same file (a CLI command next to the server)
// waits for the write lock up to the busy timeout (5 s) before failing.
// synchronous=NORMAL: in WAL mode a power loss may drop the last commits but
// never corrupts the file, and each commit costs no fsync.
//
// # Schema
//
// Migrations are numbered files in migrations/, embedded in the binary. Open
// applies the ones not yet recorded in schema_migrations, all in one
// transaction, so a failed migration leaves the schema as it was; reopening an
// up-to-date file applies nothing. A file whose schema is newer than this
// program is refused rather than misread.
//
// # Errors
//
// See package ledger. SQLite errors (a full disk, a busy timeout) are returned
// wrapped, as "verb noun: %w".
package sqlite
