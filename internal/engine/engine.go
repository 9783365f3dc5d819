package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reclaimer/reclaimer/internal/agentserver"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/deletion"
	"github.com/reclaimer/reclaimer/internal/diskusage"
	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/filelock"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/trash"
)

// Source is one configured source of runtimes.
type Source struct {
	// Name is the source's stable name: every runtime key it lists
	// carries it (backend.Key.Source).
	Name string
	// Label names the source as its table was written, for messages:
	// `[[worktrees]] repo = "/x"`. Default: Name.
	Label string
	// Kind is the source's table ("worktrees"); informational.
	Kind     string
	Backend  backend.Backend
	Settings policy.Settings
	// ListTimeout bounds one listing of the source, retries included; past
	// it the source is a problem of the pass. 0: no bound but ctx's.
	ListTimeout time.Duration
	// Shared: the source's runtimes are every replica's of a fleet (a
	// remote provider's sandboxes), acted on by the leader alone (see
	// Options.Lead). Sources of a host's own files are not shared.
	Shared bool
}

// BusyFunc tells, for each path, why it is busy ("" or absent: not busy).
type BusyFunc func(ctx context.Context, paths []string) (map[string]string, error)

// Options configure an Engine.
type Options struct {
	Ledger  ledger.Store
	Sources []Source
	// StateDir holds the lock files (of applies, and of runtimes when
	// Locker is nil).
	StateDir string
	// Locker keeps a runtime still while apply re-checks it and flips its
	// state, against every process sharing the ledger; nil: a file lock
	// per runtime under StateDir/locks (one host).
	Locker ledger.Locker
	// Lead, in a fleet, returns this replica's leadership term while it
	// leads: shared sources are listed and acted on only then, their
	// writes fenced by the term through Fencer (fleet.go). Nil: one host,
	// every source is acted on.
	Lead func() (*leader.Term, bool)
	// Fencer writes under a lease's generation; required with Lead.
	Fencer ledger.Fencer
	// ArchiveDir is where archives are written when Sink is nil, and the
	// parent of the private staging folders of exports.
	ArchiveDir string
	// Sink stores archives; nil means a local folder sink at ArchiveDir.
	Sink sink.Sink
	// IncludeDependencies keeps rebuildable dependency folders in
	// archives ([archive] include_dependencies).
	IncludeDependencies bool
	// ExcludeHome leaves runtimes' homes out of archives ([archive]
	// include_home = false).
	ExcludeHome bool
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Busy scans for processes using local runtimes; nil: nothing is busy.
	Busy BusyFunc
	// Usage measures a filesystem; default diskusage.Of.
	Usage func(path string) (diskusage.Usage, error)
	// Concurrency bounds parallel listing, selection and sizing. Default 4.
	Concurrency int
	// SlowListing is how long a listing holds its Concurrency slot: one
	// still running after it goes on without one, so listings that
	// stall (a provider that does not answer, up to its list_timeout) do
	// not keep the others, local ones included, waiting. Default
	// DefaultSlowListing.
	SlowListing time.Duration
	Logger      *slog.Logger
	// IdleClock reads the OpenHands agent-servers' idle clocks of running
	// runtimes (Runtime.AgentServer, or the URL a host registered);
	// default an agentserver.Clock on Now.
	IdleClock *agentserver.Clock
}

// DefaultSlowListing is Options.SlowListing when unset.
const DefaultSlowListing = 2 * time.Second

// Engine plans and applies passes.
type Engine struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	trashes map[string]*trash.Trash
	// purged collects real freed bytes per trash entry, for apply.
	purgedMu sync.Mutex
	purged   map[string]chan int64
	early    map[string]int64

	// progress is the running apply's Progress (ApplyOptions.Step).
	progress atomic.Pointer[Progress]
}

// New checks opts and returns an Engine.
func New(opts Options) (*Engine, error) {
	opts.Sources = slices.Clone(opts.Sources)
	if opts.Ledger == nil {
		return nil, errors.New("new engine: no ledger")
	}
	if opts.StateDir == "" {
		return nil, errors.New("new engine: no state folder")
	}
	names := map[string]bool{}
	for i := range opts.Sources {
		s := &opts.Sources[i]
		if s.Backend == nil || s.Name == "" {
			return nil, fmt.Errorf("new engine: source %q has no backend", s.Name)
		}
		if s.Label == "" {
			s.Label = s.Name
		}
		if names[s.Name] {
			return nil, fmt.Errorf("new engine: two sources named %q", s.Name)
		}
		names[s.Name] = true
		if _, ok := backend.As[backend.Lister](s.Backend); !ok {
			return nil, fmt.Errorf("new engine: source %q cannot list runtimes", s.Name)
		}
	}
	if opts.Lead != nil && opts.Fencer == nil {
		return nil, errors.New("new engine: a leadership without a fencer")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Usage == nil {
		opts.Usage = diskusage.Of
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.SlowListing <= 0 {
		opts.SlowListing = DefaultSlowListing
	}
	if opts.IdleClock == nil {
		opts.IdleClock = &agentserver.Clock{Now: opts.Now}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Sink == nil && opts.ArchiveDir != "" {
		local, err := sink.NewLocal(opts.ArchiveDir)
		if err != nil {
			return nil, fmt.Errorf("new engine: %w", err)
		}
		opts.Sink = local
	}
	if err := os.MkdirAll(filepath.Join(opts.StateDir, "locks"), 0o700); err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	if opts.Locker == nil {
		l, err := filelock.New(filepath.Join(opts.StateDir, "locks"))
		if err != nil {
			return nil, fmt.Errorf("new engine: %w", err)
		}
		opts.Locker = l
	}
	return &Engine{opts: opts, log: opts.Logger, trashes: map[string]*trash.Trash{}, purged: map[string]chan int64{}, early: map[string]int64{}}, nil
}

// Sources are the engine's sources.
func (e *Engine) Sources() []Source { return e.opts.Sources }

// Source returns the source named name.
func (e *Engine) Source(name string) (*Source, bool) {
	for i := range e.opts.Sources {
		if e.opts.Sources[i].Name == name {
			return &e.opts.Sources[i], true
		}
	}
	return nil, false
}

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.opts.Now() }

// Close stops the trash purgers; what is left is purged at the next start.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, t := range e.trashes {
		errs = append(errs, t.Close())
	}
	e.trashes = map[string]*trash.Trash{}
	return errors.Join(errs...)
}

// Drain waits until every trash is empty.
func (e *Engine) Drain(ctx context.Context) error {
	e.mu.Lock()
	ts := make([]*trash.Trash, 0, len(e.trashes))
	for _, t := range e.trashes {
		ts = append(ts, t)
	}
	e.mu.Unlock()
	var errs []error
	for _, t := range ts {
		errs = append(errs, t.Drain(ctx))
	}
	return errors.Join(errs...)
}

// trashFor opens (once) the trash of a managed root.
func (e *Engine) trashFor(root string) (*trash.Trash, error) {
	if root == "" {
		return nil, errors.New("open trash: runtime has no managed root")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if t, ok := e.trashes[root]; ok {
		return t, nil
	}
	t, err := trash.Open(root, trash.Options{OnPurged: e.onPurged, Deletion: deletion.Options{Progress: e.purgeProgress}})
	if err != nil {
		return nil, err
	}
	e.trashes[root] = t
	return t, nil
}

func (e *Engine) onPurged(p trash.Purged) {
	if p.Err != nil {
		e.log.Warn("purge trash entry", "entry", p.Name, "origin", p.Origin, "err", p.Err)
	}
	e.purgedMu.Lock()
	ch, ok := e.purged[p.Name]
	delete(e.purged, p.Name)
	if !ok && p.Origin != "" {
		// Purged before discard registered it: leave the figure there.
		e.early[p.Name] = p.Result.FreedBytes
	}
	e.purgedMu.Unlock()
	if ok {
		ch <- p.Result.FreedBytes
	}
}

// discard renames path into its root's trash and returns a channel that
// receives the bytes really freed once the purge is done.
func (e *Engine) discard(root, path string) (<-chan int64, error) {
	t, err := e.trashFor(root)
	if err != nil {
		return nil, err
	}
	ch := make(chan int64, 1)
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		// A link (a planted cache link) is unlinked, never followed.
		if err := t.RemoveLink(path); err != nil {
			return nil, err
		}
		ch <- 0
		return ch, nil
	}
	name, err := t.Discard(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", err, backend.ErrNotFound) // the DeleteOptions.Discard contract
	}
	if err != nil {
		return nil, err
	}
	e.purgedMu.Lock()
	if freed, ok := e.early[name]; ok {
		delete(e.early, name)
		ch <- freed
	} else {
		e.purged[name] = ch
	}
	e.purgedMu.Unlock()
	return ch, nil
}

// PurgeLeftovers opens the trash of every managed root of w, which purges
// what an earlier process left there: a crash in mid-purge converges on the
// next apply. Read-only commands (plan, ls, status) do not call it: a dry
// run neither creates trash folders nor deletes anything.
func (e *Engine) PurgeLeftovers(w *World) {
	seen := map[string]bool{}
	for _, s := range w.Runtimes {
		rt := s.Runtime
		if rt.Root == "" || seen[rt.Root] {
			continue
		}
		if rt.Pinned != "" {
			// A root only a protected runtime gives (a locked worktree,
			// such as a copy restored elsewhere) gets no trash made in
			// it: nothing there will be removed. One left there is
			// still purged.
			if _, err := os.Lstat(filepath.Join(rt.Root, trash.DirName)); err != nil {
				continue
			}
		}
		seen[rt.Root] = true
		if _, err := e.trashFor(rt.Root); err != nil {
			e.log.Warn("open trash", "root", rt.Root, "err", err)
		}
	}
}

// Progress is told how a long step goes: an archive's bytes stored so far,
// a removal's entries and bytes purged so far (its trash entry's). It is
// called from many goroutines; it must be quick.
type Progress func(p StepProgress)

// StepProgress is one report of a long step.
type StepProgress struct {
	// Action is the action (zero for a purge: the trash does not know
	// which action put the entry there).
	Action plan.Action
	// Archive: bytes of the archive stored so far.
	Stored int64
	// Purge: entries removed and bytes freed so far.
	Removed, Freed int64
}

func (e *Engine) purgeProgress(removed, freed int64) {
	if f := e.progress.Load(); f != nil {
		(*f)(StepProgress{Removed: removed, Freed: freed})
	}
}

// setProgress installs f for the apply in progress (nil: none).
func (e *Engine) setProgress(f Progress) func() {
	if f == nil {
		return func() {}
	}
	e.progress.Store(&f)
	return func() { e.progress.Store(nil) }
}
