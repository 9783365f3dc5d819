package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/busy"
	"github.com/reclaimer/reclaimer/internal/catalog"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
)

// session is an opened configuration: ledger, sources and engine.
type session struct {
	cfg     *config.Config
	store   ledger.Store
	engine  *engine.Engine
	sources []engine.Source
}

func (c *command) open(ctx context.Context, src *sourceFlags) (*session, error) {
	cfg, err := c.loadConfig(src)
	if err != nil {
		return nil, err
	}
	sources, err := buildSources(cfg)
	if err != nil {
		return nil, usageError{err}
	}
	store, err := sqlite.Open(ctx, cfg.Ledger.Path)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	eng, err := engine.New(engine.Options{
		Ledger: store, Sources: sources, StateDir: filepath.Dir(cfg.Ledger.Path), ArchiveDir: cfg.Archive.Dir,
		Sink: catalog.NewSink(cfg), IncludeDependencies: cfg.Archive.IncludeDependencies,
		Busy: busy.Options{}.Reasons,
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	s := &session{cfg: cfg, store: store, engine: eng, sources: sources}
	if _, err := eng.Recover(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *session) close() {
	s.engine.Close()
	s.store.Close()
}

func (s *session) backendNamed(name string) backend.Backend {
	for _, src := range s.sources {
		if src.Backend.Name() == name {
			return src.Backend
		}
	}
	return nil
}

// resolve turns an ID, "backend/ID" or a runtime's path into its key.
func (s *session) resolve(ctx context.Context, id string) (backend.Key, error) {
	w, err := s.engine.Observe(ctx, engine.ObserveOptions{Light: true})
	if err != nil {
		return backend.Key{}, err
	}
	var matches []backend.Key
	path := ""
	if strings.HasPrefix(id, "/") || strings.HasPrefix(id, ".") {
		path = absPath(id)
	}
	for _, r := range w.Runtimes {
		rt := r.Runtime
		if rt.ID == id || rt.Key.String() == id || (path != "" && rt.Path == path) {
			matches = append(matches, rt.Key)
		}
	}
	for _, g := range w.Gone {
		if g.Key.ID == id || g.Key.String() == id {
			matches = append(matches, backend.Key{Backend: g.Key.Backend, ID: g.Key.ID})
		}
	}
	switch len(matches) {
	case 0:
		return backend.Key{}, usageError{fmt.Errorf("runtime %q: %w (see reclaimer ls)", id, backend.ErrNotFound)}
	case 1:
		return matches[0], nil
	}
	var names []string
	for _, m := range matches {
		names = append(names, m.String())
	}
	return backend.Key{}, usagef("runtime %q is ambiguous: %s", id, strings.Join(names, ", "))
}

func (s *session) resolveAll(ctx context.Context, ids []string) ([]backend.Key, error) {
	var keys []backend.Key
	for _, id := range ids {
		k, err := s.resolve(ctx, id)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ensureRecord makes sure the ledger has a record for k (resolve found it
// among the listed runtimes, so an observation is the truth).
func (s *session) ensureRecord(ctx context.Context, k backend.Key) error {
	_, err := s.store.Runtime(ctx, ledger.Key{Backend: k.Backend, ID: k.ID})
	if errors.Is(err, ledger.ErrNotFound) {
		_, err = s.engine.Observe(ctx, engine.ObserveOptions{Record: true, Light: true})
	}
	return err
}

func (s *session) update(ctx context.Context, c *command, k backend.Key, f func(*ledger.RuntimeRecord) string) error {
	if err := s.ensureRecord(ctx, k); err != nil {
		return err
	}
	var msg string
	_, err := s.store.Update(ctx, ledger.Key{Backend: k.Backend, ID: k.ID}, func(r *ledger.RuntimeRecord) error {
		msg = f(r)
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.env.Stdout, "%s: %s\n", k, msg)
	return nil
}
