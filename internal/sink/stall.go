package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStalled is a transfer that stopped making progress.
var ErrStalled = errors.New("the transfer stalled")

// Defaults of the stall detector.
const (
	DefaultStallTimeout = 30 * time.Second
	DefaultStallBytes   = 16 << 10
)

// stallTransport is rule "a transfer that does not move ends": every
// request it carries (an upload's parts, a read-back, a removal) must move
// at least minBytes, counting what is sent and what is received, in every
// window of the given length, from the moment it is sent until its
// answer's body is closed; the time spent waiting for an answer counts as
// no bytes. A request that falls short is canceled with ErrStalled. So a
// server that trickles a byte every 2 s, accepts an upload and stops
// reading, or never answers, fails within a window or two (the client's
// retries aside), where a timeout per call would have to be as long as
// the largest transfer.
type stallTransport struct {
	rt       http.RoundTripper
	window   time.Duration
	minBytes int64
}

func (t *stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watchdog{window: t.window, min: t.minBytes, cancel: cancel}
	w.start()
	req = req.Clone(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &countingBody{ReadCloser: req.Body, w: w}
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		w.stop()
		stalled := errors.Is(context.Cause(ctx), ErrStalled)
		cancel(nil)
		if stalled {
			return nil, fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
		return nil, err
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, w: w, ctx: ctx, close: func() { w.stop(); cancel(nil) }}
	return resp, nil
}

// watchdog cancels a request whose bytes did not grow by min in a window.
type watchdog struct {
	window time.Duration
	min    int64
	cancel context.CancelCauseFunc

	moved atomic.Int64
	mu    sync.Mutex
	timer *time.Timer
	last  int64
	done  bool
}

func (w *watchdog) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = time.AfterFunc(w.window, w.check)
}

func (w *watchdog) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	now := w.moved.Load()
	if now-w.last < w.min {
		w.done = true
		w.cancel(fmt.Errorf("%w: %d bytes moved in %s, fewer than %d", ErrStalled, now-w.last, w.window, w.min))
		return
	}
	w.last = now
	w.timer.Reset(w.window)
}

func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// countingBody counts the bytes through a request or answer body.
type countingBody struct {
	io.ReadCloser
	w     *watchdog
	ctx   context.Context // an answer's: its cause names a stall
	close func()
	once  sync.Once
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.w.moved.Add(int64(n))
	if err != nil && err != io.EOF && b.ctx != nil {
		if cause := context.Cause(b.ctx); errors.Is(cause, ErrStalled) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
	}
	return n, err
}

func (b *countingBody) Close() error {
	err := b.ReadCloser.Close()
	if b.close != nil {
		b.once.Do(b.close)
	}
	return err
}
