// Package filelock is the ledger.Locker of one host: an flock(2) on a file
// per runtime in a folder (the state folder's locks/), shared by every
// reclaimer process using that folder: the daemon and the CLI next to it.
//
// flock locks one open file description, so two lockers (or two Lock calls)
// in one process exclude each other too, and the kernel releases a lock
// when its process dies, however it dies. A lock is not reentrant. flock
// has no timeout: a Lock asked to wait polls every 5 ms, which is fine for
// locks held for microseconds to seconds.
//
// Across hosts this excludes nothing: a fleet on PostgreSQL uses the
// advisory locks of package postgres instead.
package filelock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// poll is how often a waiting Lock tries again.
const poll = 5 * time.Millisecond

// Locker locks runtimes with files in one folder.
type Locker struct{ dir string }

var _ ledger.Locker = Locker{}

// New returns a locker on folder dir, creating it (mode 0700) if needed.
func New(dir string) (Locker, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Locker{}, fmt.Errorf("lock folder: %w", err)
	}
	return Locker{dir: dir}, nil
}

// Lock implements ledger.Locker.
func (l Locker) Lock(ctx context.Context, k ledger.Key, wait time.Duration) (func() error, error) {
	if err := k.Validate(); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lock %s: %w", k, err)
		}
		unlock, err := l.try(k)
		switch {
		case err == nil:
			return unlock, nil
		case !errors.Is(err, ledger.ErrLocked):
			return nil, err
		case wait <= 0:
			return nil, fmt.Errorf("lock %s: another reclaimer process is acting on it: %w", k, err)
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lock %s: %w", k, ctx.Err())
		case <-deadline:
			t.Stop()
			return nil, fmt.Errorf("lock %s: waited %s: %w", k, wait, ledger.ErrLocked)
		case <-t.C:
		}
	}
}

// try takes k's lock without waiting, or reports ledger.ErrLocked itself.
func (l Locker) try(k ledger.Key) (func() error, error) {
	sum := sha256.Sum256([]byte(k.Unique())) // source included: two sources' "dev" are two runtimes
	path := filepath.Join(l.dir, hex.EncodeToString(sum[:12])+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", k, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, ledger.ErrLocked
		}
		return nil, fmt.Errorf("lock %s: %w", k, err)
	}
	var once sync.Once
	return func() error {
		once.Do(func() {
			_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
			f.Close()
		})
		return nil
	}, nil
}
