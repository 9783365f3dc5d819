package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/remote"
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
	// Name is the webhook's stable name in the ledger's outbox (the
	// deliveries owed to it, its delivery ids): HookName(URL) unless set.
	Name string
	// URL receives the POSTs. It holds no user or password (the
	// configuration refuses them): a receiver wanting a credential gets
	// Header instead.
	URL    string
	Events []string // empty: every kind
	// Secret signs each delivery (SignatureHeader).
	Secret string
	// Header, when set, is sent with the value HeaderValue on every POST
	// (e.g. "Authorization": "Bearer ..."), read from a file.
	Header, HeaderValue string
}

// Delivery is the outcome of one event to one hook.
type Delivery struct {
	Event Event
	// ID is the delivery id (DeliveryHeader), the same on every retry.
	ID string
	// URL is the hook's URL as it may be shown: its query redacted
	// (Redact).
	URL      string
	Attempts int
	Err      error // nil: delivered; its text quotes no credential
	// Hook is the webhook's Name.
	Hook string
	// Notice is the ledger's id of the notice when it came from the
	// outbox (Offer), 0 for an event given to Send.
	Notice int64
	// Stopped: Close cut the delivery short (Err says so). It is no
	// failure of the webhook: an outbox notice stays owed.
	Stopped bool
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
	// Client is the transport; whatever is given, redirects are refused
	// (rule "no redirect carries a credential").
	Client *http.Client
	// Now is the clock of the timestamps; default time.Now.
	Now func() time.Time
}

// The headers of a delivery. Rule "a signature covers when and which
// delivery, not only what": the signature is the hex HMAC-SHA256, under
// the hook's secret, of
//
//	<timestamp> "." <delivery id> "." <body>
//
// where timestamp is X-Reclaimer-Timestamp (Unix seconds of this attempt)
// and delivery id is X-Reclaimer-Delivery (random, the same on every retry
// of one event to one hook). A receiver recomputes it (Verify), rejects a
// timestamp further than its tolerance (5 minutes, say) from its clock, and
// remembers the delivery ids it accepted for as long: a replayed request
// is then either too old or a delivery already seen, and a retry of one it
// already processed is recognised by its id (idempotent).
const (
	SignatureHeader = "X-Reclaimer-Signature"
	TimestampHeader = "X-Reclaimer-Timestamp"
	DeliveryHeader  = "X-Reclaimer-Delivery"
	EventHeader     = "X-Reclaimer-Event"
)

// Sign returns the signature header value ("sha256=<hex>") of one
// delivery under secret.
func Sign(secret, timestamp, delivery string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write([]byte(delivery))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrBadSignature = errors.New("webhook signature does not match")
	ErrStale        = errors.New("webhook timestamp outside the tolerance")
)

// Verify is what a receiver does with a delivery: the signature must
// match, and the timestamp lie within tolerance of now. It returns the
// delivery id, which the receiver remembers for at least tolerance and
// refuses when seen again (a replay, or a retry it already processed).
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) (string, error) {
	ts, id := h.Get(TimestampHeader), h.Get(DeliveryHeader)
	want := Sign(secret, ts, id, body)
	if id == "" || !hmac.Equal([]byte(h.Get(SignatureHeader)), []byte(want)) {
		return "", ErrBadSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return "", fmt.Errorf("%w: %s", ErrStale, d.Round(time.Second))
	}
	return id, nil
}

// Redact is a hook URL as it may be shown (journal, logs, errors): no
// user or password, the query (which may hold a token) redacted.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unreadable URL)"
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "[redacted]"
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// HookName is the stable name of the webhook at url: the URL itself is not
// kept in the ledger (its query may hold a credential), a digest of it
// is. A webhook whose URL changes is a new one.
func HookName(url string) string {
	sum := sha256.Sum256([]byte(url))
	return "url-" + hex.EncodeToString(sum[:8])
}

// item is one event queued for one hook.
type item struct {
	ev Event
	id string // the delivery id
	// notice is the outbox notice's id (0: an event given to Send), tries
	// the attempts this round may make (0: Options.Attempts).
	notice int64
	tries  int
}

// Notifier sends events to hooks.
type Notifier struct {
	opts   Options
	hooks  []Hook
	queues []chan item
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
	opts.Client = remote.RefuseRedirects(opts.Client)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	n := &Notifier{opts: opts, hooks: slices.Clone(hooks), stop: make(chan struct{})}
	for i, h := range n.hooks {
		if h.Name == "" {
			n.hooks[i].Name = HookName(h.URL)
		}
		h = n.hooks[i]
		q := make(chan item, opts.Queue)
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
		case n.queues[i] <- item{ev: ev, id: rand.Text()}:
		default:
			n.opts.Record(Delivery{Event: ev, URL: Redact(h.URL), Hook: h.Name, Err: errors.New("queue full: notice dropped")})
		}
	}
}

// Hooks are the webhooks, each with its Name.
func (n *Notifier) Hooks() []Hook { return slices.Clone(n.hooks) }

// Attempts is how many times one round of a delivery is tried.
func (n *Notifier) Attempts() int { return n.opts.Attempts }

// Offer queues ev for the webhook named hook, as the delivery id of the
// outbox's notice (Record reports it with Notice set), to be tried at
// most tries times (at least once). It never blocks: false when the
// queue is full, the hook unknown or the notifier closed (the notice
// stays owed; the outbox offers it again later). It does not look at the
// hook's Events: the outbox asked the ledger for those kinds only.
func (n *Notifier) Offer(hook string, ev Event, id string, notice int64, tries int) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		return false
	}
	for i, h := range n.hooks {
		if h.Name != hook {
			continue
		}
		select {
		case n.queues[i] <- item{ev: ev, id: id, notice: notice, tries: max(tries, 1)}:
			return true
		default:
			return false
		}
	}
	return false
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

func (n *Notifier) run(h Hook, q <-chan item) {
	defer n.wg.Done()
	for it := range q {
		d := Delivery{Event: it.ev, ID: it.id, URL: Redact(h.URL), Hook: h.Name, Notice: it.notice}
		if it.notice != 0 && n.stopped() {
			// An outbox notice not begun when the wait for the queue
			// ended stays owed to the next start: no POST at all.
			d.Err, d.Stopped = errors.New("not sent before the stop"), true
			n.opts.Record(d)
			continue
		}
		tries := it.tries
		if tries <= 0 {
			tries = n.opts.Attempts
		}
		d.Attempts, d.Stopped, d.Err = n.deliver(h, it.ev, it.id, tries)
		n.opts.Record(d)
	}
}

func (n *Notifier) stopped() bool {
	select {
	case <-n.stop:
		return true
	default:
		return false
	}
}

// deliver sends one event to one hook, retrying: every attempt carries the
// same body and delivery id (a receiver dedupes on it) and a fresh
// timestamp.
func (n *Notifier) deliver(h Hook, ev Event, id string, tries int) (attempts int, stopped bool, err error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, false, err
	}
	wait := n.opts.Backoff
	for attempt := 1; ; attempt++ {
		err = n.post(h, ev.Event, id, body)
		if err == nil || attempt >= tries {
			return attempt, false, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-n.stop:
			t.Stop()
			return attempt, true, fmt.Errorf("%w (gave up at shutdown)", err)
		}
		wait *= 2
	}
}

func (n *Notifier) post(h Hook, kind, id string, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.Timeout)
	defer cancel()
	where := Redact(h.URL)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("POST %s: %w", where, errors.New("bad request"))
	}
	ts := strconv.FormatInt(n.opts.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "reclaimer")
	req.Header.Set(EventHeader, kind)
	req.Header.Set(TimestampHeader, ts)
	req.Header.Set(DeliveryHeader, id)
	if h.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(h.Secret, ts, id, body))
	}
	if h.Header != "" {
		req.Header.Set(h.Header, h.HeaderValue)
	}
	resp, err := n.opts.Client.Do(req)
	if err != nil {
		// The transport's message quotes the URL: shown redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		msg := err.Error()
		if h.HeaderValue != "" {
			msg = remote.NewSecret(h.HeaderValue).Scrub(msg)
		}
		return fmt.Errorf("POST %s: %s", where, msg)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		// Rule "no redirect carries a credential": a receiver's redirect
		// is not followed (it would turn the POST into a GET to wherever
		// it names, an internal address included).
		return fmt.Errorf("POST %s: %d: %w", where, resp.StatusCode, remote.ErrRedirect)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", where, resp.Status)
	}
	return nil
}
