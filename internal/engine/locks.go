package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/ledger"
)

// lockRuntime takes the runtime's lock (Options.Locker: a file lock
// under the state folder, or PostgreSQL's advisory lock in a fleet). It
// does not wait: a runtime another pass is acting on is skipped, not
// queued.
func (e *Engine) lockRuntime(ctx context.Context, k backend.Key) (unlock func(), err error) {
	return e.takeLock(ctx, k, 0, "another reclaimer pass is acting on it")
}

// LockRuntime takes the runtime's lock, waiting while a pass acts on it
// until ctx ends (then it fails with backend.ErrBusy). A caller that
// writes a hold under it can never interleave with a pass's re-check and
// removal of the same runtime: either the pass sees the hold, or the hold
// is written after the pass is done and the caller sees what it did.
func (e *Engine) LockRuntime(ctx context.Context, k backend.Key) (unlock func(), err error) {
	wait := time.Hour // flock and PostgreSQL both stop waiting when ctx ends
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), time.Millisecond)
	}
	return e.takeLock(ctx, k, wait, "a pass is still acting on it")
}

func (e *Engine) takeLock(ctx context.Context, k backend.Key, wait time.Duration, busy string) (func(), error) {
	release, err := e.opts.Locker.Lock(ctx, k, wait)
	if errors.Is(err, ledger.ErrLocked) || (wait > 0 && ctx.Err() != nil) {
		return nil, fmt.Errorf("lock %s: %s: %w", k, busy, backend.ErrBusy)
	}
	if err != nil {
		return nil, err
	}
	return func() {
		// A lock lost while held (its PostgreSQL session ended) is
		// worth knowing: another holder may have run at the same time.
		if err := release(); err != nil {
			e.log.Error("runtime lock", "runtime", k.String(), "err", err)
		}
	}, nil
}

// applyLock is held shared by every Apply and exclusively by Recover, in
// every process using this state folder: an entry without an outcome is
// only "what a crash left" when no apply is running anywhere (the CLI
// next to a running daemon would otherwise finish or fail the daemon's
// action in flight). exclusive does not wait: it reports ok=false when an
// apply is running.
func (e *Engine) applyLock(exclusive bool) (unlock func(), ok bool, err error) {
	path := filepath.Join(e.opts.StateDir, "locks", "apply.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("lock applies: %w", err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX | unix.LOCK_NB
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.EWOULDBLOCK {
		f.Close()
		return nil, false, nil
	}
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("lock applies: %w", err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, true, nil
}
