package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger"
)

// A fleet (DESIGN §6): every replica shares one ledger; the sources of a
// host's own files are its own, and the sources every replica shares (the
// remote sandboxes, Source.Shared) are acted on by the leader alone, with
// its writes fenced by the lease's generation.
//
// With Options.Lead set, a shared source is listed, planned, applied and
// recovered only while Lead returns a valid term. Every write of a shared
// source's runtimes (what its listing saw, notices, journal intents, state
// marks, archive records, outcomes, recovery's) goes through
// Options.Fencer under the term's fence, and the backend is called only
// after that write committed, while the term is still valid, with a
// context that ends with the term. A replica that lost the lead (or never
// had it) leaves the shared sources' records as they are: not listed is
// not missing.

// errNotLeading is why an action of a shared source was not taken.
var errNotLeading = errors.New("this replica does not lead (any more): the leader acts on remote sources")

// Refused tells whether err is a write refused because this replica's
// term ended: by the lease row (ledger.ErrFenced), or by its own clock
// before the write was tried.
func Refused(err error) bool {
	return errors.Is(err, ledger.ErrFenced) || errors.Is(err, errNotLeading)
}

// gated reports whether src is acted on only by the leader.
func (e *Engine) gated(src *Source) bool { return e.opts.Lead != nil && src.Shared }

// termOf returns the term under which src may be acted on now: nil with
// ok for a source that needs none (not shared, or not a fleet).
func (e *Engine) termOf(src *Source) (t *leader.Term, ok bool) {
	if !e.gated(src) {
		return nil, true
	}
	t, ok = e.opts.Lead()
	if !ok || !t.Valid() {
		return nil, false
	}
	return t, true
}

// Leads reports whether this engine may act on its shared sources now
// (always true outside a fleet).
func (e *Engine) Leads() bool {
	if e.opts.Lead == nil {
		return true
	}
	t, ok := e.opts.Lead()
	return ok && t.Valid()
}

// ActingSources are the sources this engine may act on now: all of them
// but the shared ones while it does not lead.
func (e *Engine) ActingSources() []Source {
	out := make([]Source, 0, len(e.opts.Sources))
	for i := range e.opts.Sources {
		if _, ok := e.termOf(&e.opts.Sources[i]); ok {
			out = append(out, e.opts.Sources[i])
		}
	}
	return out
}

// write runs fn on the ledger: fenced by t when t is set (a shared
// source's runtime), directly otherwise.
func (e *Engine) write(ctx context.Context, t *leader.Term, fn func(ctx context.Context, st ledger.Store) error) error {
	if t == nil {
		return fn(ctx, e.opts.Ledger)
	}
	if !t.Valid() {
		return fmt.Errorf("write: %w", errNotLeading)
	}
	return e.opts.Fencer.Fenced(ctx, t.Fence(), fn)
}

// writeFor runs fn as write does for the runtime k: fenced when k's
// source is shared (refused when this replica does not lead).
func (e *Engine) writeFor(ctx context.Context, k backend.Key, fn func(ctx context.Context, st ledger.Store) error) error {
	src, ok := e.Source(k.Source)
	if !ok {
		return fn(ctx, e.opts.Ledger)
	}
	t, ok := e.termOf(src)
	if !ok {
		return fmt.Errorf("write %s: %w", k, errNotLeading)
	}
	return e.write(ctx, t, fn)
}

// WriteFor runs fn on the ledger for the runtime k: fenced by the
// current term when k's source is shared (refused, Refused(err), when this
// replica does not lead or its lease was taken over), directly otherwise.
// It is for what the daemon writes of a runtime beside a pass: the journal
// rows of a notice's delivery, and the outbox's record that it was
// delivered (so a replica that lost the lead never marks delivered what
// the leader owes).
func (e *Engine) WriteFor(ctx context.Context, k backend.Key, fn func(ctx context.Context, st ledger.Store) error) error {
	return e.writeFor(ctx, k, fn)
}

// NoticeSources are the sources whose notices this engine delivers now:
// nil (every source, those of an earlier configuration too) on one host;
// in a fleet, this replica's own sources and, while it leads, the shared
// ones (never another host's).
func (e *Engine) NoticeSources() []string {
	if e.opts.Lead == nil {
		return nil
	}
	names := []string{}
	for _, s := range e.ActingSources() {
		names = append(names, s.Name)
	}
	return names
}

// callCtx is the context of a backend call under term t: it ends when
// the term ends, so a leader stopped in the middle does not go on after
// its lease. It fails at once when the term is over already.
func callCtx(ctx context.Context, t *leader.Term) (context.Context, context.CancelFunc, error) {
	if t == nil {
		return ctx, func() {}, nil
	}
	if !t.Valid() {
		return nil, nil, errNotLeading
	}
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(t.Context(), func() { cancel(errNotLeading) })
	return cctx, func() { stop(); cancel(nil) }, nil
}

// readScoped is readLedger in a fleet: the records of the sources this
// replica acts on now, not every host's (records of other sources are
// never this engine's business: attachLedger skips them anyway).
func (e *Engine) readScoped(ctx context.Context, sr ledger.ScopedReader, v *ledgerView, now time.Time) (*ledgerView, error) {
	var names []string
	for _, s := range e.ActingSources() {
		names = append(names, s.Name)
	}
	var err error
	if v.activity, err = sr.ActivityTimesIn(ctx, names); err != nil {
		return nil, fmt.Errorf("observe: read activity: %w", err)
	}
	holds, err := e.opts.Ledger.ListHolds(ctx, ledger.HoldFilter{Now: now})
	if err != nil {
		return nil, fmt.Errorf("observe: read holds: %w", err)
	}
	for _, h := range holds {
		v.held[h.Key] = h.Holder
	}
	if v.states, err = sr.RuntimeStatesIn(ctx, names); err != nil {
		return nil, fmt.Errorf("observe: read runtimes: %w", err)
	}
	for _, name := range names {
		if err := readDecided(ctx, e.opts.Ledger, name, v.records); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// recoverable reports whether an unfinished journal entry of k is this
// engine's to recover: its source is one of this engine's, and a shared
// one only while leading. Another replica's entries may be in flight.
func (e *Engine) recoverable(k backend.Key) bool {
	if k.Source == "" {
		return e.opts.Lead == nil // a legacy entry: one host's, never a fleet's
	}
	src, ok := e.Source(k.Source)
	if !ok {
		return e.opts.Lead == nil // one host: entries of an earlier configuration too
	}
	_, ok = e.termOf(src)
	return ok
}
