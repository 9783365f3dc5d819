package ops

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/busy"
	"github.com/reclaimer/reclaimer/internal/catalog"
	"github.com/reclaimer/reclaimer/internal/clock"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/sources"
	"github.com/reclaimer/reclaimer/internal/views"
)

// Options configure an App.
type Options struct {
	// Config is the configuration in force; its sources are built with
	// sources.Build.
	Config *config.Config
	// Store is the ledger; nil opens Config's ledger file (and Close
	// closes it).
	Store ledger.Store
	// WrapSources lets tests decorate the configured backends.
	WrapSources func([]engine.Source) []engine.Source
	// Clock is the time; default clock.Real.
	Clock  clock.Clock
	Logger *slog.Logger
	// Busy scans for processes using local runtimes; default the /proc scan.
	Busy engine.BusyFunc
	// Activity records activity reports; nil writes them to the ledger at
	// once. The daemon buffers them (and its Store sees the buffer).
	Activity func(ctx context.Context, batch []ledger.Activity) error
	// OnProtect is called after a hold or lease is taken on a runtime (the
	// daemon pushes it into the provider's own timers at once).
	OnProtect func(k backend.Key)
	// OnPass is called after every pass, dry runs included.
	OnPass func(PassReport)
	// Recover finishes what a crash left half done when the App opens.
	Recover bool
	// Stop, when closed, ends applies between two actions (a graceful
	// stop) and makes every new pass fail with ErrShuttingDown.
	Stop <-chan struct{}
	// Lead, in a fleet ([ledger] url), returns this replica's term while
	// it leads (the daemon's elector); nil there means never: the remote
	// sources are the leader's, and a CLI on a fleet's host leaves them
	// alone. Ignored outside a fleet.
	Lead func() (*leader.Term, bool)
	// Locker and Fencer default to the store's own when it has them
	// (PostgreSQL's); the daemon, which wraps its store, passes them.
	Locker ledger.Locker
	Fencer ledger.Fencer
	// Postgres is the fleet's store under Store when Store wraps it.
	Postgres *postgres.Store
	// SampleUsage records, after every full pass that applies, a usage
	// sample of each managed filesystem in the ledger (the daemon).
	SampleUsage bool
	// Host names this host's usage samples; default its hostname.
	Host string
}

// App is the application layer over one configuration: every operation,
// once, with its resolution of runtime names, locking and rules. The CLI
// holds one for a command; the daemon one for its life (Reload swaps the
// configuration between passes). An App is safe for concurrent use;
// passes run one at a time.
type App struct {
	opts     Options
	store    ledger.Store
	pg       *postgres.Store // a fleet's store, unwrapped (Options.Postgres)
	ownStore bool
	log      *slog.Logger
	clock    clock.Clock

	mu  sync.RWMutex
	cur *setup

	passSem chan struct{} // one pass (or dry run) at a time
	keys    *keyCache

	stateMu  sync.Mutex
	world    *engine.World // the newest full observation
	worldAt  time.Time
	lastDry  *plan.Plan // the newest full dry run, reused by Status for a while
	dryAt    time.Time
	lastPass *views.PassSummary
	nextPass time.Time
	plans    map[string]cachedPlan

	// cleanup removes what the App made for itself (a discovery's
	// temporary state folder) when it closes.
	cleanup func() error
	// usagePruned is when old usage samples were last pruned.
	usagePruned time.Time
}

// setup is what a configuration makes; Reload replaces it whole.
type setup struct {
	cfg     *config.Config
	sources []engine.Source
	engine  *engine.Engine
}

type cachedPlan struct {
	p  *plan.Plan
	at time.Time
}

// Open builds the sources and the engine of opts.Config, opens the ledger
// unless given, and (with Recover) finishes what a crash left half done.
func Open(ctx context.Context, opts Options) (*App, error) {
	if opts.Config == nil {
		return nil, errors.New("open: no configuration")
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Busy == nil {
		opts.Busy = busy.Options{}.Reasons
	}
	if opts.Host == "" {
		opts.Host, _ = os.Hostname()
	}
	a := &App{opts: opts, log: opts.Logger, clock: opts.Clock, passSem: make(chan struct{}, 1),
		keys: newKeyCache(), plans: map[string]cachedPlan{}, store: opts.Store, pg: opts.Postgres}
	if a.store == nil {
		st, err := OpenLedger(ctx, opts.Config)
		if err != nil {
			return nil, err
		}
		a.store, a.ownStore = st, true
	}
	if l, ok := a.store.(ledger.Locker); ok && a.opts.Locker == nil {
		a.opts.Locker = l
	}
	if f, ok := a.store.(ledger.Fencer); ok && a.opts.Fencer == nil {
		a.opts.Fencer = f
	}
	s, err := a.build(opts.Config)
	if err != nil {
		a.closeStore()
		return nil, err
	}
	a.cur = s
	if opts.Recover {
		n, err := s.engine.Recover(ctx)
		if err != nil {
			a.Close()
			return nil, err
		}
		if n > 0 {
			a.log.Info("recovered what a crash left half done", "entries", n)
		}
	}
	return a, nil
}

// build makes the sources and engine of cfg.
func (a *App) build(cfg *config.Config) (*setup, error) {
	srcs, err := sources.BuildWith(cfg, sources.Options{Registered: a.registered})
	if err != nil {
		return nil, &InputError{Msg: err.Error()}
	}
	if a.opts.WrapSources != nil {
		srcs = a.opts.WrapSources(srcs)
	}
	var lead func() (*leader.Term, bool)
	if cfg.Fleet() {
		if lead = a.opts.Lead; lead == nil {
			lead = neverLeads
		}
		if a.opts.Fencer == nil {
			return nil, errors.New("open: a fleet's ledger that cannot fence writes")
		}
	}
	eng, err := engine.New(engine.Options{Ledger: a.store, Sources: srcs, StateDir: filepath.Dir(cfg.Ledger.Path),
		Locker: a.opts.Locker, Lead: lead, Fencer: a.opts.Fencer,
		ArchiveDir: cfg.Archive.Dir, Sink: catalog.NewSink(cfg), IncludeDependencies: cfg.Archive.IncludeDependencies,
		ExcludeHome: !cfg.Archive.HomeIncluded(), Busy: a.opts.Busy, Logger: a.log, Now: a.clock.Now})
	if err != nil {
		sources.Close(srcs)
		return nil, err
	}
	return &setup{cfg: cfg, sources: eng.Sources(), engine: eng}, nil
}

// Reload swaps in cfg between passes: its sources and engine replace the
// old ones, which are closed. A configuration whose sources cannot be
// built changes nothing.
func (a *App) Reload(ctx context.Context, cfg *config.Config) error {
	select {
	case a.passSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-a.passSem }()
	s, err := a.build(cfg)
	if err != nil {
		return err
	}
	a.mu.Lock()
	old := a.cur
	a.cur = s
	a.mu.Unlock()
	a.stateMu.Lock()
	a.world, a.lastDry = nil, nil // what they showed is of the old sources
	a.stateMu.Unlock()
	if err := old.close(); err != nil {
		a.log.Warn("close the old engine and sources", "err", err)
	}
	return nil
}

// close ends a setup: the engine's trash purgers, and what the sources'
// backends hold (watch caches, connections).
func (s *setup) close() error {
	return errors.Join(s.engine.Close(), sources.Close(s.sources))
}

// registered lists the runtimes hosts registered for a source and that
// are still there (not archived or deleted): the runtimes of a backend
// that has no listing of its own (cloudflare).
func (a *App) registered(ctx context.Context, source, backendName string) ([]string, error) {
	recs, err := a.store.ListRuntimes(ctx, ledger.RuntimeFilter{Source: source, Backend: backendName})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range recs {
		if r.RegisteredAt.IsZero() || r.State == string(backend.StateArchived) || r.State == string(backend.StateDeleted) {
			continue
		}
		out = append(out, r.Key.ID)
	}
	return out, nil
}

// now is the App's clock, in UTC.
func (a *App) now() time.Time { return a.clock.Now().UTC() }

func (a *App) setupNow() *setup {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.cur
}

// Config is the configuration in force.
func (a *App) Config() *config.Config { return a.setupNow().cfg }

// Sources are the sources in force.
func (a *App) Sources() []engine.Source { return a.setupNow().sources }

// Engine is the engine in force (the daemon's watchers and tests use it).
func (a *App) Engine() *engine.Engine { return a.setupNow().engine }

// Store is the ledger.
func (a *App) Store() ledger.Store { return a.store }

// Close closes the engine (the trash purgers stop; what is left is purged
// at the next start) and the ledger the App opened.
func (a *App) Close() error {
	err := errors.Join(a.setupNow().close(), a.closeStore())
	if a.cleanup != nil {
		err = errors.Join(err, a.cleanup())
	}
	return err
}

func (a *App) closeStore() error {
	if a.ownStore {
		return a.store.Close()
	}
	return nil
}

// Drain waits until every trash is empty (the CLI, before it exits).
func (a *App) Drain(ctx context.Context) error { return a.setupNow().engine.Drain(ctx) }

// SetNextPass records when the daemon's next scheduled pass is due, for
// Status.
func (a *App) SetNextPass(at time.Time) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	a.nextPass = at
}

// LastWorld is the newest full observation, and when it was made (nil
// before the first).
func (a *App) LastWorld() (*engine.World, time.Time) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.world, a.worldAt
}

// sourceOf returns the source named name in force.
func (s *setup) sourceOf(name string) (*engine.Source, bool) { return s.engine.Source(name) }
