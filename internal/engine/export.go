package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/sink"
)

// countingSink tells report the bytes stored through it so far, at most
// every 64 KiB read (an archive's progress).
type countingSink struct {
	sink.Sink
	report func(total int64)
	total  atomic.Int64
}

func (c *countingSink) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	return c.Sink.Put(ctx, name, &countingReader{r: r, s: c})
}

type countingReader struct {
	r    io.Reader
	s    *countingSink
	last int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	total := c.s.total.Add(int64(n))
	if total-c.last >= 64<<10 || (err != nil && total > c.last) {
		c.last = total
		c.s.report(total)
	}
	return n, err
}

// export writes the runtime's archive into the sink. The exporter reads
// every object back before it returns (archive.ExportWorktree,
// ExportFolders); here the sink is checked first, so an unreachable server
// or a missing bucket fails before anything is read, and the manifest is
// read back once more: the engine does not remove anything on a backend's
// word alone.
// exportOptions are the options an export of s would get, but where it is
// stored (for Discloser at plan time).
func (e *Engine) exportOptions(s *Seen) backend.ExportOptions {
	return backend.ExportOptions{IncludeDependencies: e.opts.IncludeDependencies, ExcludeHome: e.opts.ExcludeHome,
		CacheDirs: s.Source.Settings.CacheDirs, Rebuildable: s.Source.Settings.Rebuildable, Keep: s.Source.Settings.Keep}
}

func (e *Engine) export(ctx context.Context, ex backend.Exporter, rt backend.Runtime, settings policy.Settings, at time.Time, a plan.Action) (backend.Export, error) {
	if e.opts.Sink == nil {
		return backend.Export{}, errors.New("no archive storage configured")
	}
	if err := e.opts.Sink.Check(ctx); err != nil {
		return backend.Export{}, err
	}
	if err := os.MkdirAll(e.opts.ArchiveDir, 0o700); err != nil {
		return backend.Export{}, err
	}
	sweepStaging(e.opts.ArchiveDir, e.opts.Now())
	staging, err := os.MkdirTemp(e.opts.ArchiveDir, ".staging-")
	if err != nil {
		return backend.Export{}, err
	}
	defer os.RemoveAll(staging)
	base := archive.ObjectBase(rt.Backend, rt.ID, at)
	var store sink.Sink = e.opts.Sink
	if f := e.progress.Load(); f != nil {
		store = &countingSink{Sink: store, report: func(n int64) { (*f)(StepProgress{Action: a, Stored: n}) }}
	}
	exp, err := ex.Export(ctx, rt, backend.ExportOptions{Dir: staging, Sink: store,
		Name: base, IncludeDependencies: e.opts.IncludeDependencies, ExcludeHome: e.opts.ExcludeHome, CacheDirs: settings.CacheDirs,
		Rebuildable: settings.Rebuildable, Keep: settings.Keep,
		Conversations: conversations(rt), CreatedAt: at})
	if err != nil {
		return backend.Export{}, err
	}
	if len(exp.Objects) > 0 {
		m, err := archive.ReadManifestFrom(ctx, e.opts.Sink, archive.ManifestName(base))
		if err == nil && len(m.Objects) != len(exp.Objects) {
			err = fmt.Errorf("the stored manifest lists %d objects, the export %d: %w", len(m.Objects), len(exp.Objects), archive.ErrMismatch)
		}
		if err != nil {
			e.dropExport(base, exp)
			return backend.Export{}, err
		}
	}
	return exp, nil
}

// conversations are the runtime's conversation IDs from its labels
// ("conversation", or a comma-separated "conversations").
func conversations(rt backend.Runtime) []string {
	var out []string
	if c := rt.Labels["conversation"]; c != "" {
		out = append(out, c)
	}
	for _, c := range strings.Split(rt.Labels["conversations"], ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// dropExport removes the objects of an export that was not recorded, and
// its manifest.
func (e *Engine) dropExport(base string, exp backend.Export) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names := []string{archive.ManifestName(base)}
	for _, o := range exp.Objects {
		names = append(names, o.Name)
	}
	for _, n := range names {
		if err := e.opts.Sink.Remove(ctx, n); err != nil {
			e.log.Warn("remove unused export", "object", n, "err", err)
		}
	}
}

// abandonExport undoes what an export no archive was recorded for left in
// the runtime itself (backend.ExportAbandoner): the ref of a worktree's
// snapshot is kept only for a recorded archive.
func (e *Engine) abandonExport(b backend.Backend, rt backend.Runtime, at time.Time) {
	ab, ok := backend.As[backend.ExportAbandoner](b)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ab.AbandonExport(ctx, rt, at); err != nil {
		e.log.Warn("undo abandoned export", "runtime", rt.Key.String(), "err", err)
	}
}

// failureNotice is the "failed" notice of a destructive action that
// failed: the runtime stays, and whoever watches notices learns why.
// applyOne writes it with the action's outcome.
func failureNotice(planID string, a plan.Action, reason string, now time.Time) ledger.Notice {
	return ledger.Notice{Key: a.Key(), Kind: "failed", Step: string(a.Step), At: now, Message: reason, PlanID: planID}
}

// doneNotice is the "archived" notice (with its archive) or the
// "reclaimed" one of a destructive action done; applyOne writes it with
// the action's outcome.
func doneNotice(planID string, a plan.Action, r plan.Result, now time.Time) ledger.Notice {
	kind := "reclaimed"
	if r.ArchiveID != "" {
		kind = "archived"
	}
	return ledger.Notice{Key: a.Key(), Kind: kind, Step: string(a.Step), At: now, Message: r.Reason, PlanID: planID,
		ArchiveID: r.ArchiveID, FreedBytes: max(r.FreedBytes, 0)}
}

// dropInterruptedExport removes what an export interrupted by a crash left
// in the sink for runtime k and plan planID: the objects its manifest
// lists, the objects a worktree or run folder export writes, and the
// manifest. An archive the ledger recorded is never touched: it may be the
// only copy of the runtime's work. Plan IDs start with the plan's time,
// which names the archive's objects (archive.ObjectBase). What the export
// left in the runtime itself (a worktree's snapshot refs) goes too, through
// the backend's ExportAbandoner, when the runtime is still there (s).
func (e *Engine) dropInterruptedExport(ctx context.Context, k backend.Key, planID string, s *Seen) {
	if e.opts.Sink == nil || len(planID) < len("20060102T150405Z") {
		return
	}
	at, err := time.Parse("20060102T150405Z", planID[:len("20060102T150405Z")])
	if err != nil {
		return
	}
	base := archive.ObjectBase(k.Backend, k.ID, at)
	manifest := archive.ManifestName(base)
	// The archives recorded of the runtime, under its key and under the
	// key it had before keys carried their source: either may be the only
	// copy of its work.
	for _, key := range []backend.Key{k, {Backend: k.Backend, ID: k.ID}} {
		recorded, err := e.opts.Ledger.ListArchives(ctx, key)
		if err != nil {
			return
		}
		for _, a := range recorded {
			if a.Location == e.opts.Sink.URL(manifest) {
				return
			}
		}
	}
	if s != nil && s.Runtime != nil {
		e.abandonExport(s.Source.Backend, *s.Runtime, at)
	}
	exp := backend.Export{}
	if m, err := archive.ReadManifestFrom(ctx, e.opts.Sink, manifest); err == nil {
		for _, o := range m.Objects {
			exp.Objects = append(exp.Objects, backend.ArchiveObject{Name: o.Name})
		}
	}
	for _, ext := range []string{"bundle", "patch", "run.tar.zst"} {
		exp.Objects = append(exp.Objects, backend.ArchiveObject{Name: base + "." + ext})
	}
	e.dropExport(base, exp)
}

// sweepTemporary removes what a killed export left half written: the
// sink's temporary objects (sink.Sweeper) and every staging folder. Called
// under the apply lock, when no export of any process is running, so
// nothing in flight is taken.
func (e *Engine) sweepTemporary(ctx context.Context) {
	if sw, ok := e.opts.Sink.(sink.Sweeper); ok {
		removed, err := sw.SweepTemporary(ctx)
		if err != nil {
			e.log.Warn("sweep temporary archive objects", "err", err)
		}
		if len(removed) > 0 {
			e.log.Info("removed temporary archive objects a killed export left", "objects", len(removed))
		}
	}
	if e.opts.ArchiveDir != "" {
		sweepStaging(e.opts.ArchiveDir, time.Time{})
	}
}

// sweepStaging removes staging folders a crash left behind: those not
// changed for a day (a running export of another process touches its own
// folder far more often than that), or all of them when now is zero
// (under the apply lock, at start).
func sweepStaging(dir string, now time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, ent := range ents {
		if !ent.IsDir() || !strings.HasPrefix(ent.Name(), ".staging-") {
			continue
		}
		if fi, err := ent.Info(); err == nil && (now.IsZero() || now.Sub(fi.ModTime()) > 24*time.Hour) {
			os.RemoveAll(filepath.Join(dir, ent.Name()))
		}
	}
}
