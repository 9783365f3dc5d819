package backend

import (
	"context"
	"fmt"
)

// LockByObserving is the Locker of a backend whose runtimes have no lock
// reclaimer can take (the Docker Engine's containers, an agent-server's
// conversations): the lock is a fresh observation of rt through l. It is
// refused with ErrBusy when the runtime now runs, starts or is in use
// (except for a suspend, which a lifetime cap may do to a busy one), with
// ErrConflict when its fingerprint changed since rt was observed, and with
// ErrNotFound when it is gone. Unlock does nothing.
func LockByObserving(ctx context.Context, l Lister, rt Runtime, opts LockOptions) (Lock, error) {
	rts, err := l.List(ctx, ListOptions{IDs: []string{rt.ID}})
	if err != nil {
		return Lock{}, fmt.Errorf("lock %s: %w", rt.Key, err)
	}
	var cur *Runtime
	for i := range rts {
		if rts[i].ID == rt.ID { // the backend's own listing: its ID is the key within it
			cur = &rts[i]
		}
	}
	switch {
	case cur == nil:
		return Lock{}, fmt.Errorf("lock %s: %w", rt.Key, ErrNotFound)
	case opts.Step != StepSuspend && (cur.State.Active() || cur.State == StateUnknown):
		return Lock{}, fmt.Errorf("lock %s: now %s: %w", rt.Key, cur.State, ErrBusy)
	case opts.Step != StepSuspend && cur.Busy != "":
		return Lock{}, fmt.Errorf("lock %s: %s: %w", rt.Key, cur.Busy, ErrBusy)
	case rt.Fingerprint != "" && cur.Fingerprint != rt.Fingerprint:
		return Lock{}, fmt.Errorf("lock %s: started or changed since it was observed: %w", rt.Key, ErrConflict)
	}
	return Lock{Runtime: *cur, Unlock: func() {}}, nil
}
