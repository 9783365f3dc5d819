// Package postgres is the ledger.Store of a fleet: one PostgreSQL database
// shared by the reclaimer replicas of many hosts (DESIGN §6). It passes the
// same conformance suite as the embedded SQLite store (ledger/ledgertest),
// and adds what replicas on different hosts need: the per-runtime lock
// (ledger.Locker), the leadership leases of package leader (leader.Lessor)
// and writes fenced by a lease generation (ledger.Fencer).
//
// # Connections
//
// Open takes a URL (postgres://user@host:5432/db?sslmode=..., or
// postgres:///db?host=/run/postgresql for a Unix socket; libpq's
// environment, PGPASSWORD and ~/.pgpass included, through pgx). The pool
// opens at most pool_max_conns connections (a URL parameter), 10 when the
// URL does not say: a pass, an activity flush, a few API requests and the
// per-runtime locks run at once within it. A lock holds one connection
// while held, and at most half the pool holds locks at a time, so a lock
// holder's own calls always find a connection. Resignations listens on
// one more connection of its own (LISTEN needs a session), outside the
// pool: 11 per replica in all.
//
// # Schema
//
// Migrations are numbered files in migrations/, embedded in the binary
// and read by ledger/schema, as for SQLite. Open applies the ones not yet
// recorded in schema_migrations in one transaction under an advisory lock:
// replicas starting at once wait for each other, and DDL being
// transactional, a failed migration leaves the schema as it was. A
// database whose schema is newer than the program is refused. The role
// needs to create tables in its schema (owning the database is simplest).
//
// Times are bigint nanoseconds since 1970 (UTC) in every column, NULL for
// the zero time: timestamptz keeps only microseconds, and the ledger's
// contract is nanoseconds between ledger.MinTime and MaxTime, read back
// exactly. Keys are in the "C" collation, so rows list bytewise
// (Key.Compare) whatever the database's collation. key.go is the one place
// a key becomes columns, parameters, an order and a lock id.
//
// # Concurrency
//
// Every method is one statement or one transaction at READ COMMITTED. A
// batch (Observe, RecordActivity) is one statement: its rows travel as
// one array per column and are unnested by the server, merged to one row
// per key and sorted by key first, so that two replicas' batches lock rows
// in one order and never deadlock. Update reads the row FOR UPDATE, so two
// replicas' updates of one runtime never lose each other's writes.
//
// # Locks, leases and fences
//
// Lock is a transaction-scoped advisory lock on an FNV-64a hash of the
// key (pg_try_advisory_xact_lock; pg_advisory_xact_lock under lock_timeout
// when asked to wait), as Coder's lifecycle executor takes per workspace.
// Its transaction is idle while held; idle_in_transaction_session_timeout
// (2 min, set for that transaction only) bounds how long a stopped or
// partitioned holder keeps a runtime locked.
//
// Leases live in leader_leases, generations come from the sequence
// leader_generation, and every time the lease rules compare is the
// server's (reclaimer_clock), never a replica's. Fenced checks in its
// transaction's first statement that the lease still holds the
// generation, and locks the row FOR KEY SHARE: a takeover (which deletes
// the row) waits for the transaction to end, while renewals go on. The
// same statement limits how long that transaction may sit idle to what is
// left of the lease (at least a second), so a leader stopped in the middle
// cannot hold a takeover off past its lease; such a write is refused as
// ledger.ErrFenced.
//
// # Errors
//
// See package ledger; PostgreSQL errors are returned wrapped, as
// "verb noun: %w", with the URL's password never in them.
package postgres
