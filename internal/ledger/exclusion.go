package ledger

import (
	"context"
	"errors"
	"time"
)

// ErrLocked: another holder has the lock (Locker.Lock did not get it in
// the time it was given).
var ErrLocked = errors.New("locked by another holder")

// ErrFenced: the leadership generation a write was conditioned on is no
// longer in force (its lease expired, was given up, or another replica
// took it), so nothing was written.
var ErrFenced = errors.New("fenced: the lease no longer holds this generation")

// Locker keeps one runtime still while the engine re-checks it and flips
// its state, against every process that shares the ledger: a pass and a
// hold taken through the API never both win (DESIGN §3, block 5).
//
// On one host that is a file lock under the state folder (package
// filelock); with PostgreSQL it is a transaction-scoped advisory lock on
// a hash of the key (package postgres), as Coder's lifecycle executor
// takes per workspace, so replicas on other hosts are excluded too.
//
// Lock takes key's lock. With wait 0 it does not wait: a runtime someone
// else holds is reported as ErrLocked at once (a pass skips it). With
// wait > 0 it waits up to that long, then reports ErrLocked; a context
// that ends first is its error. unlock releases the lock; calling it
// again does nothing. unlock reports an error when the lock was lost while
// held (the PostgreSQL session ended): what the holder wrote meanwhile is
// in the ledger, but another holder may have run at the same time.
//
// Hold a lock for the re-check and the state flip, not for slow work: a
// PostgreSQL lock keeps one connection of the store's pool busy while held.
type Locker interface {
	Lock(ctx context.Context, key Key, wait time.Duration) (unlock func() error, err error)
}

// ScopedReader is implemented by a store shared by a fleet: a replica's
// pass reads the states and activity of its own sources' runtimes only,
// not every host's (a tenth of the reading with ten hosts). The maps are
// those of RuntimeStates and ActivityTimes, restricted to keys whose
// Source is one of sources.
type ScopedReader interface {
	RuntimeStatesIn(ctx context.Context, sources []string) (map[Key]string, error)
	ActivityTimesIn(ctx context.Context, sources []string) (map[Key]time.Time, error)
}

type lockIdleKey struct{}

// WithLockIdle bounds, for the locks taken with the returned context, how
// long a holder that stopped (SIGSTOP, a partition) keeps the lock: a
// leader locks a remote runtime for no longer than its term can last, so
// that its successor is not kept off that runtime for long. Stores that
// cannot bound it ignore it.
func WithLockIdle(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, lockIdleKey{}, d)
}

// LockIdle returns the bound WithLockIdle set on ctx, if any.
func LockIdle(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(lockIdleKey{}).(time.Duration)
	return d, ok
}

// Fence names a generation of a leadership lease: the token a leader's
// writes are conditioned on (package leader hands them out).
type Fence struct {
	Lease      string // the lease's name, e.g. "remote"
	Generation int64  // rises at every takeover
}

// Fencer runs writes that commit only while a lease still holds a
// generation. Fenced begins one transaction, checks that the lease row
// still holds f's generation and has not expired by the database's clock
// (ErrFenced otherwise, and fn is not called), keeps the row from changing
// hands until the transaction ends, and runs fn with a Store whose every
// read and write is part of that transaction. When fn returns nil the
// transaction commits; otherwise, or when the commit fails, nothing fn
// wrote stays. So a leader that lost its lease finds its writes refused,
// and a side effect made only after Fenced returned nil (a provider call)
// always follows a record written while the lease was held.
//
// fn must be short (a journal intent, a state flip): while it runs no
// other replica can take the lease over. The Store given to fn must not
// be used after fn returns, and cannot Lock, nest Fenced, or Close.
type Fencer interface {
	Fenced(ctx context.Context, f Fence, fn func(ctx context.Context, st Store) error) error
}
