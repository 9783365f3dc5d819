package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Event kinds.
const (
	Scheduled = "scheduled"
	Reclaimed = "reclaimed"
	Archived  = "archived"
	Failed    = "failed"
)

// Event is one notice, as POSTed.
type Event struct {
	Event      string    `json:"event"`
	Runtime    string    `json:"runtime"`
	Backend    string    `json:"backend"`
	Source     string    `json:"source,omitempty"`
	Step       string    `json:"step"`
	Reason     string    `json:"reason,omitempty"`
	Due        time.Time `json:"due,omitzero"`
	HowToStop  string    `json:"how_to_cancel,omitempty"`
	FreedBytes int64     `json:"freed_bytes,omitempty"`
	ArchiveID  string    `json:"archive_id,omitempty"`
	PlanID     string    `json:"plan_id,omitempty"`
	At         time.Time `json:"at"`
}

// Hook is one webhook.
type Hook struct {
	URL    string
	Events []string // empty: every kind
	Secret string
}

// Delivery is the outcome of one event to one hook.
type Delivery struct {
	Event    Event
	URL      string
	Attempts int
	Err      error // nil: delivered
}

// Options tune a Notifier.
type Options struct {
	// Attempts is how many times a delivery is tried. Default 5.
	Attempts int
	// Backoff is the wait after the first failure, doubled after each.
	// Default 1s.
	Backoff time.Duration
	// Timeout bounds one POST. Default 10s.
	Timeout time.Duration
	// Queue is how many events wait per hook. Default 1024.
	Queue int
	// Record is called once per event and hook with the outcome.
	Record func(Delivery)
	Client *http.Client
}

// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the body.
const SignatureHeader = "X-Reclaimer-Signature"

// Sign returns the signature header value of body under secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Notifier sends events to hooks.
type Notifier struct {
	opts   Options
	hooks  []Hook
	queues []chan Event
	stop   chan struct{} // closed by Close: backoffs end early
	wg     sync.WaitGroup

	mu     sync.RWMutex
	closed bool
}

// New starts one sender per hook.
func New(hooks []Hook, opts Options) *Notifier {
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	if opts.Record == nil {
		opts.Record = func(Delivery) {}
	}
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	n := &Notifier{opts: opts, hooks: hooks, stop: make(chan struct{})}
	for _, h := range hooks {
		q := make(chan Event, opts.Queue)
		n.queues = append(n.queues, q)
		n.wg.Add(1)
		go n.run(h, q)
	}
	return n
}

// Send queues ev for every hook that wants its kind; it never blocks.
func (n *Notifier) Send(ev Event) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		return
	}
	for i, h := range n.hooks {
		if len(h.Events) > 0 && !slices.Contains(h.Events, ev.Event) {
			continue
		}
		select {
		case n.queues[i] <- ev:
		default:
			n.opts.Record(Delivery{Event: ev, URL: h.URL, Err: errors.New("queue full: notice dropped")})
		}
	}
}

// Close stops taking events, and waits until the queued ones are delivered
// or ctx ends (then pending retries give up at once).
func (n *Notifier) Close(ctx context.Context) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	for _, q := range n.queues {
		close(q)
	}
	n.mu.Unlock()
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		close(n.stop)
		<-done
	}
}

func (n *Notifier) run(h Hook, q <-chan Event) {
	defer n.wg.Done()
	for ev := range q {
		attempts, err := n.deliver(h, ev)
		n.opts.Record(Delivery{Event: ev, URL: h.URL, Attempts: attempts, Err: err})
	}
}

func (n *Notifier) deliver(h Hook, ev Event) (int, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, err
	}
	wait := n.opts.Backoff
	for attempt := 1; ; attempt++ {
		err = n.post(h, ev.Event, body)
		if err == nil || attempt >= n.opts.Attempts {
			return attempt, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-n.stop:
			t.Stop()
			return attempt, fmt.Errorf("%w (gave up at shutdown)", err)
		}
		wait *= 2
	}
}

func (n *Notifier) post(h Hook, kind string, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Reclaimer-Event", kind)
	if h.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(h.Secret, body))
	}
	resp, err := n.opts.Client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", h.URL, resp.Status)
	}
	return nil
}
