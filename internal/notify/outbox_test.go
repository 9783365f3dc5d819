package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/notify"
)

// hostScope is one host's scope: every source, writes straight to the
// ledger.
type hostScope struct{ st ledger.Store }

func (hostScope) NoticeSources() []string { return nil }
func (h hostScope) WriteFor(ctx context.Context, _ ledger.Key, fn func(context.Context, ledger.Store) error) error {
	return fn(ctx, h.st)
}

// receiver is a webhook on loopback that can be down (answers 503), and
// keeps what it accepted, deduplicated by delivery id as a receiver
// should, and every delivery id it saw.
type receiver struct {
	*httptest.Server
	down     atomic.Bool
	mu       sync.Mutex
	seen     []string // delivery ids of every POST, refused ones too
	accepted map[string]notify.Event
	posts    int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{accepted: map[string]notify.Event{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		id, err := notify.Verify("k3y", req.Header, body, time.Now(), time.Minute)
		if err != nil {
			t.Errorf("a delivery that does not verify: %v", err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.posts++
		r.seen = append(r.seen, id)
		if r.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var ev notify.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Error(err)
		}
		r.accepted[id] = ev
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) state() (seen []string, accepted map[string]notify.Event, posts int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acc := map[string]notify.Event{}
	for k, v := range r.accepted {
		acc[k] = v
	}
	return append([]string(nil), r.seen...), acc, r.posts
}

// daemon is what `serve` makes of the outbox: a notifier whose outcomes
// the outbox writes back, over one ledger.
type daemon struct {
	n    *notify.Notifier
	ob   *notify.Outbox
	done chan notify.Delivery
}

func eventOf(n ledger.Notice) notify.Event {
	return notify.Event{Event: n.Kind, Runtime: n.Key.ID, Backend: n.Key.Backend, Source: n.Key.Source, Step: n.Step,
		Due: n.Due, Reason: n.Message, At: n.At}
}

func start(t *testing.T, st ledger.Store, url string, opts notify.Options, now time.Time) *daemon {
	t.Helper()
	d := &daemon{done: make(chan notify.Delivery, 64)}
	d.ob = &notify.Outbox{Store: st, Scope: hostScope{st}, Kinds: []string{"scheduled", "failed"}, Event: eventOf,
		Horizon: 24 * time.Hour, Now: func() time.Time { return now }}
	opts.Record = func(del notify.Delivery) {
		if err := d.ob.Done(context.Background(), del); err != nil {
			t.Errorf("done: %v", err)
		}
		d.done <- del
	}
	d.n = notify.New([]notify.Hook{{URL: url, Secret: "k3y"}}, opts)
	return d
}

func (d *daemon) sweep(t *testing.T) int {
	t.Helper()
	n, err := d.ob.Sweep(t.Context(), d.n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (d *daemon) wait(t *testing.T) notify.Delivery {
	t.Helper()
	select {
	case del := <-d.done:
		return del
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10 s")
		return notify.Delivery{}
	}
}

func openLedger(t *testing.T) ledger.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func record(t *testing.T, st ledger.Store, n ledger.Notice) ledger.Notice {
	t.Helper()
	id, err := st.RecordNotice(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	n.ID = id
	return n
}

// TestOutboxDeliversAfterRestart: a notice recorded and not delivered
// (the receiver down, the daemon stopped without draining) is delivered
// after a restart, once, with the delivery id of the first attempt; a
// third start sends nothing; a notice recorded before a daemon ever ran
// (one killed right after recording it) is delivered too.
func TestOutboxDeliversAfterRestart(t *testing.T) {
	st := openLedger(t)
	rcv := newReceiver(t)
	k := ledger.Key{Source: "dirs:/runs", Backend: "dir", ID: "run-1"}
	n := record(t, st, ledger.Notice{Key: k, Kind: "scheduled", Step: "archive", Due: now.Add(72 * time.Hour), At: now, Message: "idle 14d"})

	rcv.down.Store(true)
	first := start(t, st, rcv.URL, notify.Options{Attempts: 5, Backoff: time.Hour}, now)
	if got := first.sweep(t); got != 1 {
		t.Fatalf("first start offered %d", got)
	}
	waitFor(t, "the first attempt", func() bool { _, _, posts := rcv.state(); return posts == 1 })
	if got := first.sweep(t); got != 0 {
		t.Fatalf("a second sweep offered %d in flight", got)
	}
	stopNow(first.n) // the stop comes during the backoff: no draining
	if del := first.wait(t); !del.Stopped || del.Attempts != 1 {
		t.Fatalf("the cut round: %+v", del)
	}
	ps, err := st.PendingNotices(t.Context(), ledger.PendingFilter{Hook: notify.HookName(rcv.URL)})
	if err != nil || len(ps) != 1 || ps[0].Attempts != 1 {
		t.Fatalf("owed after the stop: %+v, %v", ps, err)
	}

	rcv.down.Store(false)
	second := start(t, st, rcv.URL, notify.Options{Attempts: 5, Backoff: time.Millisecond}, now.Add(time.Hour))
	if got := second.sweep(t); got != 1 {
		t.Fatalf("the restart offered %d", got)
	}
	if del := second.wait(t); del.Err != nil || del.Notice != n.ID {
		t.Fatalf("after the restart: %+v", del)
	}
	second.n.Close(t.Context())
	seen, accepted, _ := rcv.state()
	if len(seen) != 2 || seen[0] != seen[1] || seen[0] != notify.DeliveryID(n, notify.HookName(rcv.URL)) {
		t.Fatalf("delivery ids %v: want the same one twice", seen)
	}
	if ev := accepted[seen[0]]; len(accepted) != 1 || ev.Runtime != "run-1" || ev.Event != notify.Scheduled || !ev.Due.Equal(n.Due) {
		t.Fatalf("accepted %+v", accepted)
	}

	third := start(t, st, rcv.URL, notify.Options{Backoff: time.Millisecond}, now.Add(2*time.Hour))
	if got := third.sweep(t); got != 0 {
		t.Fatalf("a delivered notice offered again: %d", got)
	}
	// One recorded by a process that died before it could send it.
	n2 := record(t, st, ledger.Notice{Key: k, Kind: "failed", Step: "delete", At: now.Add(90 * time.Minute), Message: "disk error"})
	if got := third.sweep(t); got != 1 {
		t.Fatalf("offered %d of one new notice", got)
	}
	if del := third.wait(t); del.Err != nil || del.Notice != n2.ID || del.ID != notify.DeliveryID(n2, notify.HookName(rcv.URL)) {
		t.Fatalf("the new notice: %+v", del)
	}
	third.n.Close(t.Context())
	if _, accepted, posts := rcv.state(); len(accepted) != 2 || posts != 3 {
		t.Fatalf("accepted %d in %d POSTs, want 2 in 3", len(accepted), posts)
	}
}

// TestOutboxBounds: notices older than the horizon, and kinds the outbox
// does not carry or the webhook does not want, are not offered; a webhook
// that keeps failing gets the attempts left over every start, then the
// delivery is given up and never offered again; a webhook that hangs
// holds no more than its queue in flight, the rest stays in the ledger.
func TestOutboxBounds(t *testing.T) {
	st := openLedger(t)
	rcv := newReceiver(t)
	k := ledger.Key{Source: "dirs:/runs", Backend: "dir", ID: "run-1"}
	record(t, st, ledger.Notice{Key: k, Kind: "scheduled", Step: "archive", At: now.Add(-25 * time.Hour)}) // past the horizon
	record(t, st, ledger.Notice{Key: k, Kind: "canceled", Step: "archive", At: now})                       // not a webhook's kind
	record(t, st, ledger.Notice{Key: k, Kind: "failed", Step: "delete", At: now.Add(-23 * time.Hour)})

	rcv.down.Store(true)
	first := start(t, st, rcv.URL, notify.Options{Attempts: 3, Backoff: time.Hour}, now)
	if got := first.sweep(t); got != 1 {
		t.Fatalf("offered %d, want only the failed notice within the horizon", got)
	}
	waitFor(t, "the first attempt", func() bool { _, _, posts := rcv.state(); return posts == 1 })
	stopNow(first.n)
	first.wait(t)

	second := start(t, st, rcv.URL, notify.Options{Attempts: 3, Backoff: time.Millisecond}, now)
	if got := second.sweep(t); got != 1 {
		t.Fatalf("offered %d after the restart", got)
	}
	if del := second.wait(t); del.Err == nil || del.Stopped || del.Attempts != 2 {
		t.Fatalf("the second round: %+v (want the 2 attempts left, failed)", del)
	}
	if _, _, posts := rcv.state(); posts != 3 {
		t.Fatalf("%d POSTs in all, want 3", posts)
	}
	if got := second.sweep(t); got != 0 {
		t.Fatalf("a given-up delivery offered again: %d", got)
	}
	second.n.Close(t.Context())

	// A webhook that wants only "scheduled" is owed nothing here.
	picky := notify.New([]notify.Hook{{URL: rcv.URL, Events: []string{notify.Scheduled}}}, notify.Options{})
	ob := &notify.Outbox{Store: st, Scope: hostScope{st}, Kinds: []string{"scheduled", "failed"}, Event: eventOf,
		Horizon: 24 * time.Hour, Now: func() time.Time { return now }}
	if got, err := ob.Sweep(t.Context(), picky); err != nil || got != 0 {
		t.Fatalf("offered %d, %v to a webhook of other kinds", got, err)
	}
	picky.Close(t.Context())

	// A hanging webhook: 10 notices, a queue of 2.
	release := make(chan struct{})
	var posts atomic.Int32
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { posts.Add(1); <-release }))
	defer hang.Close()
	for i := range 10 {
		record(t, st, ledger.Notice{Key: k, Kind: "scheduled", Step: "delete", At: now.Add(time.Duration(i) * time.Second)})
	}
	h := start(t, st, hang.URL, notify.Options{Queue: 2, Backoff: time.Millisecond}, now.Add(time.Minute))
	total := h.sweep(t)
	waitFor(t, "the first POST to hang", func() bool { return posts.Load() == 1 })
	total += h.sweep(t)
	if total != 3 || h.ob.InFlight() != 3 {
		t.Fatalf("offered %d, %d in flight: want one POSTing and a queue of 2", total, h.ob.InFlight())
	}
	close(release)
	for total < 11 { // the 10 and the failed one, owed to this new webhook
		h.wait(t)
		total += h.sweep(t)
	}
	for h.ob.InFlight() > 0 {
		h.wait(t)
	}
	h.n.Close(t.Context())
	if got := h.sweep(t); got != 0 {
		t.Fatalf("offered %d after all were delivered", got)
	}
}

// stopNow closes a notifier at once: what waits to retry gives up.
func stopNow(n *notify.Notifier) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n.Close(ctx)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
