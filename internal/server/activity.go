package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/clock"
	"github.com/reclaimer/reclaimer/internal/ledger"
)

// activityBuffer coalesces activity reports in memory (newest per runtime)
// and writes them in batches: one SQLite transaction per batch instead of
// one per report is what makes 20,000 reports a second cheap.
type activityBuffer struct {
	store ledger.Store // the real one
	clock clock.Clock

	mu       sync.Mutex
	pending  map[ledger.Key]time.Time
	inflight map[ledger.Key]time.Time // being written; still visible to readers

	flushMu sync.Mutex // one write at a time, in order
	kick    chan struct{}
	// batch is the pending count that starts a write before the tick.
	batch int
}

func newActivityBuffer(store ledger.Store, c clock.Clock) *activityBuffer {
	return &activityBuffer{store: store, clock: c, pending: map[ledger.Key]time.Time{}, kick: make(chan struct{}, 1), batch: 5000}
}

// record takes a batch of reports (ops.Options.Activity): acknowledged
// once in memory, written by the next flush.
func (b *activityBuffer) record(_ context.Context, batch []ledger.Activity) error {
	for _, a := range batch {
		b.add(a.Key, a.At)
	}
	return nil
}

// add records one report; it is never lost across a clean stop.
func (b *activityBuffer) add(k ledger.Key, at time.Time) {
	b.mu.Lock()
	if at.After(b.pending[k]) {
		b.pending[k] = at
	}
	n := len(b.pending)
	b.mu.Unlock()
	if n >= b.batch {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// newest returns the pending time of k, if any.
func (b *activityBuffer) newest(k ledger.Key) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.pending[k]
	if u, ok2 := b.inflight[k]; ok2 && u.After(t) {
		t, ok = u, true
	}
	return t, ok
}

func (b *activityBuffer) all() map[ledger.Key]time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[ledger.Key]time.Time, len(b.pending)+len(b.inflight))
	for _, m := range []map[ledger.Key]time.Time{b.inflight, b.pending} {
		for k, t := range m {
			if t.After(out[k]) {
				out[k] = t
			}
		}
	}
	return out
}

// flush writes what is pending. On failure the reports go back into the
// buffer, to be written by the next flush.
func (b *activityBuffer) flush(ctx context.Context) error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	batch := b.pending
	if len(batch) == 0 {
		b.mu.Unlock()
		return nil
	}
	b.pending, b.inflight = map[ledger.Key]time.Time{}, batch
	b.mu.Unlock()

	list := make([]ledger.Activity, 0, len(batch))
	for k, t := range batch {
		list = append(list, ledger.Activity{Key: k, At: t})
	}
	err := b.store.RecordActivity(ctx, list)
	b.mu.Lock()
	if err != nil {
		for k, t := range batch {
			if t.After(b.pending[k]) {
				b.pending[k] = t
			}
		}
	}
	b.inflight = nil
	b.mu.Unlock()
	return err
}

// run flushes every interval, or sooner when a batch fills, until ctx
// ends; flushed is told the outcome of each flush (nil: written).
func (b *activityBuffer) run(ctx context.Context, interval time.Duration, flushed func(error)) {
	t := b.clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-b.kick:
		}
		if err := b.flush(ctx); !errors.Is(err, context.Canceled) {
			flushed(err)
		}
	}
}

// pendingStore is the ledger as the engine sees it: activity reads include
// reports acknowledged but not yet written, so a pass never acts on a
// runtime that reported activity a moment ago.
type pendingStore struct {
	ledger.Store
	buf *activityBuffer
}

func (p pendingStore) LastActivity(ctx context.Context, k ledger.Key) (time.Time, error) {
	t, err := p.Store.LastActivity(ctx, k)
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return t, err
	}
	if u, ok := p.buf.newest(k); ok && u.After(t) {
		return u, nil
	}
	return t, err
}

// RuntimeStatesIn and ActivityTimesIn make the store a
// ledger.ScopedReader when the ledger is one (a fleet's).
func (p pendingStore) RuntimeStatesIn(ctx context.Context, sources []string) (map[ledger.Key]string, error) {
	sr, ok := p.Store.(ledger.ScopedReader)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sr.RuntimeStatesIn(ctx, sources)
}

func (p pendingStore) ActivityTimesIn(ctx context.Context, sources []string) (map[ledger.Key]time.Time, error) {
	sr, ok := p.Store.(ledger.ScopedReader)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	m, err := sr.ActivityTimesIn(ctx, sources)
	if err != nil {
		return m, err
	}
	for k, t := range p.buf.all() {
		if slices.Contains(sources, k.Source) && t.After(m[k]) {
			m[k] = t
		}
	}
	return m, nil
}

func (p pendingStore) ActivityTimes(ctx context.Context) (map[ledger.Key]time.Time, error) {
	m, err := p.Store.ActivityTimes(ctx)
	if err != nil {
		return m, err
	}
	for k, t := range p.buf.all() {
		if t.After(m[k]) {
			m[k] = t
		}
	}
	return m, nil
}
