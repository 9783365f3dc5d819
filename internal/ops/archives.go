package ops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/catalog"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/native"
	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/views"
)

// Archives lists the archives, newest first: every one, or, with name, the
// one with that id, or those of the runtime name resolves to (its ID, its
// path, its former path once archived).
func (a *App) Archives(ctx context.Context, name string) ([]views.Archive, error) {
	if name != "" {
		if ar, err := a.store.Archive(ctx, name); err == nil {
			return []views.Archive{catalog.EntryOf(ar)}, nil
		} else if !errors.Is(err, ledger.ErrNotFound) {
			return nil, err
		}
	}
	var k ledger.Key
	if name != "" {
		ks, err := a.resolveKeys(ctx, "id", []Ref{{Name: name}})
		if err != nil {
			return nil, fmt.Errorf("archives: %q is neither an archive ID nor a runtime: %w", name, err)
		}
		k = ks[0]
	}
	all, err := a.store.ListArchives(ctx, k)
	if err != nil {
		return nil, err
	}
	out := make([]views.Archive, 0, len(all))
	for _, ar := range all {
		out = append(out, catalog.EntryOf(ar))
	}
	return out, nil
}

// Archive is one archive, in full.
func (a *App) Archive(ctx context.Context, id string) (*views.Archive, error) {
	ar, err := a.store.Archive(ctx, id)
	if err != nil {
		return nil, err
	}
	e := catalog.EntryOf(ar)
	return &e, nil
}

// PruneRequest removes archives older than OlderThan (its words kept for
// the journal's reason).
type PruneRequest struct {
	OlderThan     time.Duration
	OlderThanText string
	DryRun        bool
}

// Prune removes archives created longer ago than req.OlderThan from their
// sink and the ledger, journaled; archives of pinned or leased runtimes
// stay. A dry run only says what it would remove.
func (a *App) Prune(ctx context.Context, req PruneRequest) (*views.Prune, error) {
	if req.OlderThan <= 0 {
		return nil, Input("older_than", "older_than must be a positive duration")
	}
	p, err := catalog.PlanPrune(ctx, a.store, req.OlderThan, a.now())
	if err != nil {
		return nil, err
	}
	if req.OlderThanText != "" {
		p.OlderThan = req.OlderThanText
	}
	if req.DryRun {
		return &views.Prune{Plan: p}, nil
	}
	res, err := catalog.ApplyPrune(ctx, a.store, a.sinkFor, p, func() time.Time { return a.now() })
	if err != nil {
		return nil, err
	}
	return &views.Prune{Plan: p, Applied: res}, nil
}

func (a *App) sinkFor(ar ledger.Archive) (sink.Sink, error) {
	return catalog.SinkOf(a.setupNow().cfg, ar)
}

// RestoreRequest brings an archived runtime back.
type RestoreRequest struct {
	Runtime Ref
	// ArchiveID picks the archive; default the runtime's newest.
	ArchiveID string
	// To restores elsewhere (an absolute path); default where it was.
	To string
}

// Restore brings an archived runtime back from its archive, read from the
// sink it was written to and verified first. Restored where it was, the
// runtime is stopped again and its retention clock starts again; restored
// elsewhere (--to DIR: backend.RestoreTarget), it is a copy for the user:
// the archived record stays, and no source manages it (a worktree there
// is locked). Either way the restore is journaled.
func (a *App) Restore(ctx context.Context, req RestoreRequest) (*views.Restored, error) {
	if req.To != "" && !filepath.IsAbs(req.To) {
		return nil, Input("to", "%q: give an absolute path", req.To)
	}
	ks, err := a.resolveKeys(ctx, "id", []Ref{req.Runtime})
	if err != nil {
		return nil, err
	}
	k := ks[0]
	archives, err := a.store.ListArchives(ctx, k)
	if err != nil {
		return nil, err
	}
	var ar *ledger.Archive
	for i := range archives {
		if req.ArchiveID == "" || archives[i].ID == req.ArchiveID {
			ar = &archives[i]
			break
		}
	}
	if ar == nil {
		which := ""
		if req.ArchiveID != "" {
			which = " " + req.ArchiveID
		}
		return nil, fmt.Errorf("restore %s: no archive%s: %w", k, which, backend.ErrNotFound)
	}
	r, err := a.restorerOf(k)
	if err != nil {
		return nil, err
	}
	store, err := a.sinkFor(*ar)
	if err != nil {
		return nil, fmt.Errorf("restore %s from archive %s: %w", k, ar.ID, err)
	}
	cfg := a.setupNow().cfg
	if err := os.MkdirAll(cfg.Archive.Dir, 0o700); err != nil {
		return nil, err
	}
	staging, err := os.MkdirTemp(cfg.Archive.Dir, ".staging-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(staging)
	// Journaled like every action: the intent first, then how it ended.
	why := "restore from archive " + ar.ID
	var paths []string
	if req.To != "" {
		why += " into " + req.To + " (a copy: the runtime stays archived)"
		paths = []string{req.To}
	}
	entry, jerr := a.store.AppendIntent(ctx, ledger.Intent{Key: k, Step: "restore", Paths: paths, Reason: why, At: a.now()})
	if jerr != nil {
		return nil, fmt.Errorf("restore %s: journal: %w", k, jerr)
	}
	path, err := r.Restore(ctx, k, backend.RestoreOptions{Location: ar.Location, Formats: ar.Formats, Manifest: ar.Manifest,
		To: req.To, Sink: store, Staging: staging})
	var manual backend.ManualRestore
	if errors.As(err, &manual) && manual.RestoreCommand() != "" {
		// Nothing was restored: the answer is how to do it.
		if jerr := a.store.RecordOutcome(context.WithoutCancel(ctx), entry, ledger.Outcome{Result: ledger.ResultSkipped,
			Reason: "not restored here: its backend does not bring it back; start it with: " + manual.RestoreCommand(), At: a.now()}); jerr != nil {
			return nil, fmt.Errorf("restore %s: journal: %w", k, jerr)
		}
		return &views.Restored{ID: k.ID, Backend: k.Backend, Source: k.Source, ArchiveID: ar.ID, Command: manual.RestoreCommand()}, nil
	}
	ended := ledger.Outcome{Result: ledger.ResultDone, Reason: "restored into " + path, At: a.now()}
	if err != nil {
		ended.Result, ended.Reason = ledger.ResultFailed, err.Error()
	}
	if jerr := a.store.RecordOutcome(context.WithoutCancel(ctx), entry, ended); jerr != nil && err == nil {
		err = fmt.Errorf("restore %s: restored into %s, but the journal: %w", k, path, jerr)
	}
	if err != nil {
		return nil, err
	}
	out := &views.Restored{ID: k.ID, Backend: k.Backend, Source: k.Source, ArchiveID: ar.ID, Path: path, Elsewhere: req.To != ""}
	if req.To != "" {
		return out, nil
	}
	if _, err := a.store.Update(ctx, k, func(r *ledger.RuntimeRecord) error {
		r.State = string(backend.StateStopped)
		return nil
	}); err != nil {
		return nil, err
	}
	a.keys.set(k, string(backend.StateStopped))
	// Restoring is using it: the retention clock starts again.
	return out, a.record(ctx, []ledger.Activity{{Key: k, At: a.now()}})
}

// restorerOf is the backend that restores k: its source's, or, for a
// record of a source no longer configured (or from before keys carried
// sources), the first source of its backend.
func (a *App) restorerOf(k backend.Key) (backend.Restorer, error) {
	s := a.setupNow()
	var b backend.Backend
	if src, ok := s.sourceOf(k.Source); ok {
		b = src.Backend
	} else {
		for _, src := range s.sources {
			if src.Backend.Name() == k.Backend {
				b = src.Backend
				break
			}
		}
	}
	if b == nil {
		return nil, fmt.Errorf("restore %s: no configured source of backend %s: %w", k, k.Backend, backend.ErrNotFound)
	}
	r, ok := backend.As[backend.Restorer](b)
	if !ok {
		return nil, fmt.Errorf("restore %s: its backend cannot restore: %w", k, errors.ErrUnsupported)
	}
	return r, nil
}

// Native shows (or, with sync, writes) the policy in the providers' own
// timers of remote sources.
func (a *App) Native(ctx context.Context, sync bool, only []backend.Key) (*views.NativeReport, error) {
	s := a.setupNow()
	// The remote sources' timers are the leader's to keep: a follower
	// shows and writes only its own sources', and the leader's writes
	// stop with its term.
	opts := native.Options{Sources: s.engine.ActingSources(), Ledger: a.store, Now: a.clock.Now, Only: only}
	if s.cfg.Fleet() && sync && a.opts.Lead != nil {
		if t, ok := a.opts.Lead(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(t.Context(), cancel)()
		}
	}
	if sync {
		return native.Sync(ctx, opts)
	}
	return native.Plan(ctx, opts)
}

// HasNative tells whether any source has provider timers (a daemon syncs
// them after each pass).
func (a *App) HasNative(k *backend.Key) bool {
	for _, src := range a.setupNow().sources {
		if _, ok := backend.As[backend.NativeLifecycle](src.Backend); ok && (k == nil || k.Source == src.Name) {
			return true
		}
	}
	return false
}
