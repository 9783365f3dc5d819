package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// lockRuntime takes the runtime's lock, shared by every reclaimer process
// using this state folder (flock locks one open file description, so two
// goroutines of one process exclude each other too). It does not wait: a
// runtime another pass is acting on is skipped, not queued.
func (e *Engine) lockRuntime(k backend.Key) (unlock func(), err error) {
	sum := sha256.Sum256([]byte(k.Unique()))
	path := filepath.Join(e.opts.StateDir, "locks", hex.EncodeToString(sum[:12])+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", k, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("lock %s: another reclaimer pass is acting on it: %w", k, backend.ErrBusy)
		}
		return nil, fmt.Errorf("lock %s: %w", k, err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// LockRuntime takes the runtime's lock, waiting while a pass acts on it
// until ctx ends (then it fails with backend.ErrBusy). A caller that
// writes a hold under it can never interleave with a pass's re-check and
// removal of the same runtime: either the pass sees the hold, or the hold
// is written after the pass is done and the caller sees what it did.
func (e *Engine) LockRuntime(ctx context.Context, k backend.Key) (unlock func(), err error) {
	const poll = 5 * time.Millisecond // flock has no timeout; passes hold it for microseconds to seconds
	for {
		unlock, err := e.lockRuntime(k)
		if err == nil || !errors.Is(err, backend.ErrBusy) {
			return unlock, err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lock %s: a pass is still acting on it: %w", k, backend.ErrBusy)
		case <-t.C:
		}
	}
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
