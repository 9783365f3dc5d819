// Package leader elects one replica of a fleet to act on what all of them
// share (the remote sandboxes of E2B, Daytona, ...), with a lease and a
// fencing token, the way River's elector does on PostgreSQL; no consensus
// of our own.
//
// # The lease
//
// A lease is a row (name, holder, generation, elected_at, expires_at) that
// a [Lessor] keeps; package postgres keeps it in the ledger's database. A
// replica takes a free lease by deleting the row if it expired and then
// inserting its own, which fails harmlessly when another replica's row is
// there (INSERT ... ON CONFLICT DO NOTHING). The holder renews it, which
// only succeeds while the row still holds its holder and generation and
// has not expired. A holder that stops resigns: it deletes its row and
// tells the others (NOTIFY), who try at once instead of at their next tick.
// [Table] is these rules on their own, with the clock passed in: the
// reference every Lessor is tested against (package leadertest).
//
// Expiry is judged by the Lessor's clock alone (PostgreSQL's), never by a
// replica's, so clocks that disagree between hosts cannot make two leaders.
//
// # Fencing
//
// Every takeover gives the lease a higher generation. The generation is
// the fencing token: a leader writes its journal intents and state changes
// for remote runtimes through ledger.Fencer with its [Term]'s Fence, which
// commits only while the lease still holds that generation, and calls the
// provider only after that commit. A leader that was stopped (SIGSTOP, a
// long pause, a partition) and wakes after another took over finds its
// writes refused, and so acts on nothing.
//
// # Acting only while surely leading
//
// A replica acts on a lease it renewed (or took) with a request sent at
// time s until s + TTL - TTL/5 by its own monotonic clock: the lease in the
// database lasts at least until s + TTL (the database set its expiry after
// it received the request), so the replica stops acting at least TTL/5
// before the lease can have expired, whatever its wall clock says. It
// renews every TTL/3, with jitter; two renewals missed in a row end its
// term. A [Term]'s Context is canceled when the term ends, so work started
// under it stops. Leadership moves to another replica within TTL plus one
// interval of the old leader dying (kill -9), at once when it resigns.
//
// # Concurrency
//
// An Elector is safe for concurrent use; Run runs its loop in the calling
// goroutine, and OnChange is called from there.
package leader
