package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
)

// keyCache remembers the state of runtimes the daemon has seen, so that an
// activity report (the hot path) finds its runtime and learns whether it
// was archived without a ledger read. Passes refresh it; misses fall back
// to the ledger.
type keyCache struct {
	mu     sync.RWMutex
	states map[ledger.Key]string
	byID   map[string][]string // id → backends
}

func newKeyCache() *keyCache {
	return &keyCache{states: map[ledger.Key]string{}, byID: map[string][]string{}}
}

func (c *keyCache) set(k ledger.Key, state string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.states[k]; !ok && !slices.Contains(c.byID[k.ID], k.Backend) {
		c.byID[k.ID] = append(c.byID[k.ID], k.Backend)
	}
	c.states[k] = state
}

func (c *keyCache) get(k ledger.Key) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.states[k]
	return s, ok
}

func (c *keyCache) backendsOf(id string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.byID[id])
}

// refresh records what a pass observed.
func (c *keyCache) refresh(w *engine.World) {
	for _, s := range w.Runtimes {
		c.set(ledger.Key{Backend: s.Runtime.Backend, ID: s.Runtime.ID}, string(s.Runtime.State))
	}
	for _, g := range w.Gone {
		c.set(g.Key, g.State)
	}
}

// resolve finds the runtime an API path names: its id, and the backend
// when given (needed when two backends share an id). It returns the key
// and the state the ledger (or the cache) knows.
func (d *Daemon) resolve(ctx context.Context, id, backendName string) (ledger.Key, string, error) {
	if err := checkName("id", id); err != nil {
		return ledger.Key{}, "", err
	}
	var candidates []string
	if backendName != "" {
		if !d.knowsBackend(backendName) {
			return ledger.Key{}, "", badRequest("backend", "no configured source has backend %q", backendName)
		}
		candidates = []string{backendName}
	} else if bs := d.keys.backendsOf(id); len(bs) > 0 {
		candidates = bs
	} else {
		candidates = d.backendNames()
	}
	var found []ledger.Key
	var state string
	for _, b := range candidates {
		k := ledger.Key{Backend: b, ID: id}
		if st, ok := d.keys.get(k); ok {
			found, state = append(found, k), st
			continue
		}
		r, err := d.raw.Runtime(ctx, k)
		switch {
		case err == nil:
			d.keys.set(k, r.State)
			found, state = append(found, k), r.State
		case !errors.Is(err, ledger.ErrNotFound):
			return ledger.Key{}, "", err
		}
	}
	switch len(found) {
	case 0:
		return ledger.Key{}, "", notFound("runtime %q: %v (see GET /v1/runtimes)", id, backend.ErrNotFound)
	case 1:
		return found[0], state, nil
	}
	var names []string
	for _, k := range found {
		names = append(names, k.String())
	}
	return ledger.Key{}, "", conflict("runtime %q is ambiguous (%s): add ?backend=", id, strings.Join(names, ", "))
}

// resolveLive is resolve for requests that change a runtime: an archived
// one answers 410, a deleted one 404.
func (d *Daemon) resolveLive(ctx context.Context, id, backendName string) (ledger.Key, error) {
	k, state, err := d.resolve(ctx, id, backendName)
	if err != nil {
		return k, err
	}
	return k, liveState(k, state)
}

func liveState(k ledger.Key, state string) error {
	switch backend.State(state) {
	case backend.StateArchived:
		return errArchived
	case backend.StateDeleted:
		return notFound("runtime %s was deleted", k)
	}
	return nil
}

func (d *Daemon) backendNames() []string {
	var out []string
	for _, s := range d.setupNow().sources {
		if n := s.Backend.Name(); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func (d *Daemon) knowsBackend(name string) bool { return slices.Contains(d.backendNames(), name) }

// checkReported refuses a registration whose id or folders no source of
// its backend would list (backend.CheckReported): one source accepting it
// is enough.
func (d *Daemon) checkReported(backendName, id string, folders []string) error {
	var first error
	for _, s := range d.setupNow().sources {
		if s.Backend.Name() != backendName {
			continue
		}
		err := backend.CheckReported(s.Backend, id, folders)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}
