package ops

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
)

// Ref names a runtime the way people and hosts do.
type Ref struct {
	// Name is the runtime's ID, "backend/ID", "source/ID" (a source's
	// name), or an absolute path: the runtime's folder, its former folder
	// once archived, or any folder inside its folder, home or workspaces
	// (a container's). The CLI makes a relative path absolute first.
	Name string
	// Backend and Source narrow the match (the API's ?backend= and
	// ?source=), for an ID two runtimes share.
	Backend, Source string
}

func (r Ref) String() string { return r.Name }

// resolved is a runtime a Ref named: its key and its state as last known.
type resolved struct {
	key   backend.Key
	state string
}

// resolveKeys resolves refs for a read or a narrowed pass: all of them, or
// an error about the first that names nothing or more than one runtime.
func (a *App) resolveKeys(ctx context.Context, field string, refs []Ref) ([]backend.Key, error) {
	return a.resolveKeysLive(ctx, field, refs, false)
}

// resolveKeysLive is resolveKeys, refusing (with live) a runtime that was
// archived (ErrArchived) or deleted (not found): what would change it.
func (a *App) resolveKeysLive(ctx context.Context, field string, refs []Ref, live bool) ([]backend.Key, error) {
	rs, err := a.resolveAll(ctx, field, refs, live)
	if err != nil {
		return nil, err
	}
	keys := make([]backend.Key, len(rs))
	for i, r := range rs {
		keys[i] = r.key
	}
	return keys, nil
}

// resolveAll resolves every ref or none: a command naming several
// runtimes acts on all of them or refuses, before it writes anything.
func (a *App) resolveAll(ctx context.Context, field string, refs []Ref, live bool) ([]resolved, error) {
	out := make([]resolved, 0, len(refs))
	observed := false
	for i, ref := range refs {
		r, err := a.resolve(ctx, ref, &observed)
		if err == nil && live {
			err = liveState(r)
		}
		if err != nil {
			var in *InputError
			if errors.As(err, &in) && in.Field == "" && len(refs) > 1 {
				in.Field = fmt.Sprintf("%s[%d]", field, i)
			}
			return nil, err
		}
		if !slices.ContainsFunc(out, func(x resolved) bool { return x.key == r.key }) {
			out = append(out, r)
		}
	}
	return out, nil
}

// liveState refuses what cannot be changed any more.
func liveState(r resolved) error {
	switch backend.State(r.state) {
	case backend.StateArchived:
		return fmt.Errorf("runtime %s: %w", r.key, ErrArchived)
	case backend.StateDeleted:
		return fmt.Errorf("runtime %s was deleted: %w", r.key, backend.ErrNotFound)
	}
	return nil
}

// resolve finds the one runtime ref names: in what the App knows of the
// ledger first, and, when nothing matches, after observing the sources
// (once per command: observed) so that a runtime that appeared since the
// last pass is found too.
func (a *App) resolve(ctx context.Context, ref Ref, observed *bool) (resolved, error) {
	name := strings.TrimSpace(ref.Name)
	switch {
	case name == "":
		return resolved{}, Input("id", "which runtime? (an ID, backend/ID, or its path)")
	case len(name) > 4096 || strings.ContainsRune(name, 0):
		return resolved{}, Input("id", "runtime %q: not a name", ref.Name)
	}
	find := a.matchName
	if filepath.IsAbs(name) {
		find = a.matchPath
	}
	for {
		found, err := find(ctx, name, ref)
		if err != nil {
			return resolved{}, err
		}
		switch {
		case len(found) == 1:
			return found[0], nil
		case len(found) > 1:
			return resolved{}, a.ambiguous(ref, found)
		case *observed:
			return resolved{}, fmt.Errorf("runtime %q: %w (see reclaimer ls)", ref.Name, backend.ErrNotFound)
		}
		*observed = true
		if err := a.observeForNames(ctx); err != nil {
			return resolved{}, err
		}
	}
}

// observeForNames lists every source and records what it saw, so that the
// names of runtimes no pass has seen yet resolve.
func (a *App) observeForNames(ctx context.Context) error {
	w, err := a.setupNow().engine.Observe(ctx, engine.ObserveOptions{Record: true, Light: true})
	if err != nil {
		return err
	}
	a.keys.refresh(w)
	a.keys.invalidate() // the ledger has more now: read it again
	return nil
}

// matchName matches an ID, "backend/ID" or "source/ID".
func (a *App) matchName(ctx context.Context, name string, ref Ref) ([]resolved, error) {
	if err := a.checkHints(ref); err != nil {
		return nil, err
	}
	if err := a.keys.load(ctx, a.store); err != nil {
		return nil, err
	}
	type try struct{ backend, source, id string }
	tries := []try{{ref.Backend, ref.Source, name}}
	if b, id, ok := strings.Cut(name, "/"); ok && ref.Backend == "" {
		tries = append(tries, try{b, ref.Source, id})
	}
	for _, src := range a.setupNow().sources {
		if id, ok := strings.CutPrefix(name, src.Name+"/"); ok && (ref.Source == "" || ref.Source == src.Name) {
			tries = append(tries, try{ref.Backend, src.Name, id})
		}
	}
	var found []resolved
	for _, t := range tries {
		for _, k := range a.keys.byID(t.id) {
			if (t.backend == "" || k.Backend == t.backend) && (t.source == "" || k.Source == t.source) {
				if !slices.ContainsFunc(found, func(r resolved) bool { return r.key == k }) {
					state, _ := a.keys.get(k)
					found = append(found, resolved{k, state})
				}
			}
		}
	}
	return found, nil
}

// checkHints refuses a backend or source no configured source has: a
// typo, not a runtime that is not there.
func (a *App) checkHints(ref Ref) error {
	s := a.setupNow()
	if ref.Source != "" {
		if _, ok := s.sourceOf(ref.Source); !ok {
			return Input("source", "no configured source is named %q", ref.Source)
		}
	}
	if ref.Backend != "" && !slices.ContainsFunc(s.sources, func(src engine.Source) bool { return src.Backend.Name() == ref.Backend }) {
		return Input("backend", "no configured source has backend %q", ref.Backend)
	}
	return nil
}

// matchPath matches the runtime whose folder, home or a workspace is path
// or holds it; a runtime with a folder of its own wins over one that only
// mounts it (a container sharing a home).
func (a *App) matchPath(ctx context.Context, path string, ref Ref) ([]resolved, error) {
	if err := a.checkHints(ref); err != nil {
		return nil, err
	}
	path = filepath.Clean(path)
	var own, mounts []resolved
	var after ledger.Key
	for {
		page, err := a.store.ListRuntimes(ctx, ledger.RuntimeFilter{After: after, Limit: 5000, Backend: ref.Backend, Source: ref.Source})
		if err != nil {
			return nil, fmt.Errorf("find runtime %s: %w", path, err)
		}
		for _, r := range page {
			switch {
			case r.Path != "" && within(path, r.Path):
				own = append(own, resolved{r.Key, r.State})
			case r.Home != "" && within(path, r.Home) || slices.ContainsFunc(r.Workspaces, func(w string) bool { return within(path, w) }):
				mounts = append(mounts, resolved{r.Key, r.State})
			}
		}
		if len(page) < 5000 {
			break
		}
		after = page[len(page)-1].Key
	}
	if len(own) > 0 {
		return own, nil
	}
	return mounts, nil
}

// within reports whether p is dir or lies inside it.
func within(p, dir string) bool {
	dir = filepath.Clean(dir)
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func (a *App) ambiguous(ref Ref, found []resolved) error {
	var names []string
	for _, r := range found {
		label := r.key.Source
		if src, ok := a.setupNow().sourceOf(r.key.Source); ok {
			label = src.Label
		}
		names = append(names, fmt.Sprintf("%s (%s)", r.key, label))
	}
	hint := "give source/ID"
	if filepath.IsAbs(ref.Name) {
		hint = "give its ID"
	}
	return fmt.Errorf("runtime %q is ambiguous: %s; %s: %w", ref.Name, strings.Join(names, ", "), hint, ErrAmbiguous)
}

// keyCache knows the key and state of every runtime the ledger holds, by
// ID: an activity report (the hot path) or a command finds its runtime
// without a ledger read. Passes refresh it; a miss reads the ledger.
type keyCache struct {
	mu     sync.RWMutex
	loadMu sync.Mutex // one ledger read at a time: concurrent callers wait for it
	loaded bool
	states map[backend.Key]string
	ids    map[string][]backend.Key
}

func newKeyCache() *keyCache {
	return &keyCache{states: map[backend.Key]string{}, ids: map[string][]backend.Key{}}
}

// load reads every key of the ledger once (again after observeForNames).
func (c *keyCache) load(ctx context.Context, st ledger.Store) error {
	if c.isLoaded() {
		return nil
	}
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	if c.isLoaded() {
		return nil
	}
	states, err := st.RuntimeStates(ctx)
	if err != nil {
		return fmt.Errorf("read runtimes: %w", err)
	}
	for k, s := range states {
		c.set(k, s)
	}
	c.mu.Lock()
	c.loaded = true
	c.mu.Unlock()
	return nil
}

// isLoaded reports whether the whole ledger was read since the last
// invalidate: a key missing then is a runtime the ledger does not hold.
func (c *keyCache) isLoaded() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.loaded
}

func (c *keyCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loaded = false
}

func (c *keyCache) set(k backend.Key, state string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.states[k]; !ok {
		c.ids[k.ID] = append(c.ids[k.ID], k)
	}
	c.states[k] = state
}

func (c *keyCache) get(k backend.Key) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.states[k]
	return s, ok
}

func (c *keyCache) byID(id string) []backend.Key {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.ids[id])
}

// applied records what an apply removed.
func (c *keyCache) applied(res *plan.Applied) {
	if res == nil {
		return
	}
	for _, r := range res.Results {
		if r.Outcome == plan.Done && r.Step.Destructive() {
			state := backend.StateDeleted
			if r.Step == backend.StepArchive {
				state = backend.StateArchived
			}
			c.set(r.Key(), string(state))
		}
	}
}

// refresh records what a pass observed.
func (c *keyCache) refresh(w *engine.World) {
	for _, s := range w.Runtimes {
		c.set(s.Runtime.Key, string(s.Runtime.State))
	}
	for _, g := range w.Gone {
		c.set(g.Key, g.State)
	}
}
