package remote

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// ErrUnavailable is a provider that did not answer usefully: 429 or 5xx
// after every retry, a network failure, or a client cooling down after such
// failures.
// It is backend.ErrUnavailable, the category every edge maps.
var ErrUnavailable = backend.ErrUnavailable

// Defaults of Options.
const (
	DefaultRate        = 10.0
	DefaultConcurrency = 8
	DefaultRetries     = 4
	DefaultTimeout     = 30 * time.Second
	DefaultBackoff     = 250 * time.Millisecond
	DefaultMaxBackoff  = 10 * time.Second
	DefaultRetryAfter  = time.Minute
	DefaultTrip        = 3
	DefaultCooldown    = 30 * time.Second
)

// Auth puts a credential on a request.
type Auth func(h http.Header)

// BearerAuth sends "Authorization: Bearer <secret>".
func BearerAuth(s Secret) Auth {
	return func(h http.Header) { h.Set("Authorization", "Bearer "+s.Reveal()) }
}

// HeaderAuth sends the secret in header name (E2B's X-API-Key).
func HeaderAuth(name string, s Secret) Auth {
	return func(h http.Header) { h.Set(name, s.Reveal()) }
}

// Options configure a Client. Zero values take the defaults above.
type Options struct {
	// Endpoint is the API's base URL, e.g. "https://api.e2b.app".
	Endpoint string
	// Rate is the requests a second sent to this source (burst: the same
	// number, at least 1).
	Rate float64
	// Concurrency bounds the requests in flight.
	Concurrency int
	// Retries is how many times one request is retried after 429, 5xx or
	// a network error.
	Retries int
	// Timeout bounds each attempt.
	Timeout time.Duration
	// Backoff is the first retry's wait ceiling; each retry doubles it up to
	// MaxBackoff, and the wait is drawn uniformly below it (full jitter).
	Backoff, MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a provider asking
	// for more fails the request at once (it is reported, and the next
	// pass tries again).
	MaxRetryAfter time.Duration
	// Trip failed requests in a row (after their retries) open the
	// breaker for Cooldown: requests then fail at once with ErrUnavailable.
	Trip     int
	Cooldown time.Duration
	Auth     Auth
	// Secret is scrubbed from every provider message quoted in an error.
	Secret Secret
	// CredentialErr, when set, says why the credential could not be read:
	// every request fails with it. A source without its credential then
	// fails alone, reported, instead of stopping every other source.
	CredentialErr error
	// HTTP is the transport; default a client without its own timeout.
	// Whatever is given, the Client refuses redirects (RefuseRedirects).
	HTTP *http.Client
	// Now is the clock of the breaker; default time.Now.
	Now func() time.Time
}

// Client sends requests to one provider endpoint within its limits.
type Client struct {
	opts    Options
	base    *url.URL
	limiter *rate.Limiter
	slots   chan struct{}

	sent atomic.Int64 // attempts that reached the network

	mu        sync.Mutex
	failures  int       // requests failed in a row
	openUntil time.Time // breaker open until then
}

// New checks opts and returns a Client.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(opts.Endpoint, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if strings.Contains(opts.Endpoint, "@") {
			// It may hold a credential: not quoted.
			return nil, errors.New("new client: the endpoint is not an http(s) URL")
		}
		return nil, fmt.Errorf("new client: endpoint %q is not an http(s) URL", opts.Endpoint)
	}
	if u.User != nil {
		return nil, errors.New("new client: the endpoint must not hold credentials; use the key settings")
	}
	if opts.Rate < 0 || opts.Concurrency < 0 || opts.Retries < 0 {
		return nil, errors.New("new client: negative rate, concurrency or retries")
	}
	if opts.Rate == 0 {
		opts.Rate = DefaultRate
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Retries == 0 {
		opts.Retries = DefaultRetries
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Backoff == 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.MaxRetryAfter == 0 {
		opts.MaxRetryAfter = DefaultRetryAfter
	}
	if opts.Trip == 0 {
		opts.Trip = DefaultTrip
	}
	if opts.Cooldown == 0 {
		opts.Cooldown = DefaultCooldown
	}
	opts.HTTP = RefuseRedirects(opts.HTTP)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	burst := max(1, int(opts.Rate))
	return &Client{opts: opts, base: u, limiter: rate.NewLimiter(rate.Limit(opts.Rate), burst),
		slots: make(chan struct{}, opts.Concurrency)}, nil
}

// ErrRedirect is a provider answering a call with a redirect. Rule "no
// redirect carries a credential": a provider client never follows one,
// whatever host, port or scheme it names (Go's client would send the bearer
// token to the same host on another port, a custom key header such as E2B's
// X-API-Key anywhere, and follow https to http). The redirect is an error of
// the call; the next pass tries the configured endpoint again.
var ErrRedirect = errors.New("redirect refused: the credential would follow it")

// RefuseRedirects returns a copy of c (a new client when nil) that never
// follows a redirect: the 3xx answer is returned to the caller, which
// treats it as an error. Every provider and webhook client goes through
// it.
func RefuseRedirects(c *http.Client) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	}
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// Sent returns how many requests reached the network (retries included).
func (c *Client) Sent() int64 { return c.sent.Load() }

// Endpoint returns the base URL, for messages.
func (c *Client) Endpoint() string { return c.base.String() }

// Request is one call.
type Request struct {
	Method string
	// Path is appended to the endpoint's path; its segments must already be
	// escaped (use url.PathEscape for IDs).
	Path  string
	Query url.Values
	// Body, when not nil, is sent as JSON.
	Body any
}

// StatusError is an answer outside 2xx.
type StatusError struct {
	Method, Path string
	Status       int
	// Message is the provider's text, shortened and scrubbed of the secret.
	Message string
}

func (e *StatusError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, msg)
}

// Unwrap maps the status to a category.
func (e *StatusError) Unwrap() error {
	switch {
	case e.Status == http.StatusNotFound || e.Status == http.StatusGone:
		return backend.ErrNotFound
	case e.Status == http.StatusConflict:
		return backend.ErrConflict
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		return ErrUnavailable
	}
	return nil
}

// Do sends r and decodes a JSON answer into out (when not nil). It returns
// the answer's headers (pagination cursors travel there).
func (c *Client) Do(ctx context.Context, r Request, out any) (http.Header, error) {
	if c.opts.CredentialErr != nil {
		return nil, fmt.Errorf("%s %s: %w", r.Method, r.Path, c.opts.CredentialErr)
	}
	if err := c.breaker(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.Method, r.Path, err)
	}
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = json.Marshal(r.Body); err != nil {
			return nil, fmt.Errorf("%s %s: encode body: %w", r.Method, r.Path, err)
		}
	}
	u := *c.base
	u.RawPath = c.base.EscapedPath() + r.Path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.Method, r.Path, err)
	}
	u.Path = p
	u.RawQuery = r.Query.Encode()

	var lastErr error
	for attempt := 0; ; attempt++ {
		h, retryAfter, err := c.attempt(ctx, r, u.String(), body, out)
		if err == nil {
			c.record(true)
			return h, nil
		}
		lastErr = err
		if retryable(err) && retryAfter > 0 && retryAfter <= c.opts.MaxRetryAfter && withinDeadline(ctx, retryAfter) {
			// The provider says when to come back, and the caller's bound
			// (a source's list_timeout) allows it: such waits do not use
			// up the retries; the deadline bounds them.
			if err := sleep(ctx, retryAfter); err != nil {
				break
			}
			attempt--
			continue
		}
		if !retryable(err) || attempt >= c.opts.Retries || ctx.Err() != nil {
			break
		}
		if retryAfter > c.opts.MaxRetryAfter {
			// Waiting that long would hold up the pass; report instead.
			lastErr = fmt.Errorf("%w (the provider asks to wait %s)", lastErr, retryAfter)
			break
		}
		if err := sleep(ctx, c.backoff(attempt, retryAfter)); err != nil {
			break
		}
	}
	if retryable(lastErr) {
		c.record(false)
	}
	return nil, lastErr
}

func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status == http.StatusTooManyRequests || se.Status >= 500
	}
	return errors.Is(err, ErrUnavailable)
}

// attempt sends the request once within the rate and concurrency limits.
func (c *Client) attempt(ctx context.Context, r Request, u string, body []byte, out any) (http.Header, time.Duration, error) {
	if err := c.limiter.Wait(ctx); err != nil {
		if ctx.Err() == nil {
			// The limiter refuses a wait that would pass the deadline:
			// the caller's bound is what ends the call.
			return nil, 0, fmt.Errorf("%s %s: the rate limit would pass the deadline: %w", r.Method, r.Path, context.DeadlineExceeded)
		}
		return nil, 0, fmt.Errorf("%s %s: %w", r.Method, r.Path, err)
	}
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("%s %s: %w", r.Method, r.Path, ctx.Err())
	}
	defer func() { <-c.slots }()

	actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, r.Method, u, rd)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", r.Method, r.Path, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "reclaimer")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.opts.Auth != nil {
		c.opts.Auth(req.Header)
	}
	c.sent.Add(1)
	resp, err := c.opts.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("%s %s: %w", r.Method, r.Path, ctx.Err())
		}
		// The URL holds no credential (New refuses one), so the transport's
		// message may be quoted.
		return nil, 0, fmt.Errorf("%s %s: %w: %s", r.Method, r.Path, ErrUnavailable, c.scrub(err.Error()))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w: read answer: %s", r.Method, r.Path, ErrUnavailable, c.scrub(err.Error()))
	}
	// Rule "no provider byte carries our credential onward": the answer
	// is scrubbed before anything decodes it, so an id, a label, a time
	// field or a message echoing the key holds "[redacted]" instead, and
	// so does every error or view made from it.
	data = c.opts.Secret.ScrubBytes(data)
	header := c.scrubHeader(resp.Header)
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		// Where it points is provider text: not quoted.
		return nil, 0, fmt.Errorf("%s %s: %d: %w", r.Method, r.Path, resp.StatusCode, ErrRedirect)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, retryAfter(header.Get("Retry-After"), c.opts.Now()),
			&StatusError{Method: r.Method, Path: r.Path, Status: resp.StatusCode, Message: c.message(data)}
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			// A decode error quotes what it could not read: scrubbed.
			return nil, 0, fmt.Errorf("%s %s: decode answer: %s", r.Method, r.Path, c.scrub(err.Error()))
		}
	}
	return header, 0, nil
}

// message extracts a short provider message from an error body (already
// scrubbed as it arrived; Quote scrubs again, then cuts).
func (c *Client) message(data []byte) string {
	var e struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	msg := ""
	if json.Unmarshal(data, &e) == nil {
		msg = strings.TrimSpace(e.Message + " " + e.Error)
	}
	if msg == "" {
		msg = string(data)
	}
	return Quote(c.opts.Secret, []byte(msg))
}

func (c *Client) scrub(s string) string { return c.opts.Secret.Scrub(s) }

// scrubHeader is a copy of h scrubbed of the secret (cursors and
// Retry-After travel in headers, and a hostile provider may echo the key
// there).
func (c *Client) scrubHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		for _, v := range vs {
			out[k] = append(out[k], c.scrub(v))
		}
	}
	return out
}

// backoff is the wait before retry attempt+1.
func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	ceiling := c.opts.Backoff << min(attempt, 20)
	if ceiling <= 0 || ceiling > c.opts.MaxBackoff {
		ceiling = c.opts.MaxBackoff
	}
	return rand.N(ceiling) + 1
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// withinDeadline tells whether ctx has a deadline, and lets d pass before it.
func withinDeadline(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) > d
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// breaker fails at once while the provider is cooling down.
func (c *Client) breaker() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.opts.Now(); now.Before(c.openUntil) {
		return fmt.Errorf("%w: %d requests failed in a row; not calling it again before %s",
			ErrUnavailable, c.failures, c.openUntil.UTC().Format(time.RFC3339))
	}
	return nil
}

func (c *Client) record(ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.failures = 0
		return
	}
	c.failures++
	if c.failures >= c.opts.Trip {
		c.openUntil = c.opts.Now().Add(c.opts.Cooldown)
	}
}

// Bounds limit one listing. Rule "a listing ends": a provider's
// pagination is someone else's code, and one that hands out a fresh
// next-page token every time, empty pages forever, or items without end
// must not hold a pass or fill memory. Past a bound the listing fails
// (ErrUnbounded): an incomplete listing is never used, as it cannot tell
// what is gone. Time is bounded by the caller's context (the source's
// list_timeout).
type Bounds struct {
	// MaxPages is the most pages one listing fetches. Default
	// DefaultMaxPages.
	MaxPages int
	// MaxItems is the most in-scope items one listing keeps. Default
	// DefaultMaxItems.
	MaxItems int
	// MaxEmptyPages is the most pages in a row without a single item
	// that still name a next page. Default DefaultMaxEmptyPages.
	MaxEmptyPages int
}

// Defaults of Bounds.
const (
	DefaultMaxPages      = 2000
	DefaultMaxItems      = 20000
	DefaultMaxEmptyPages = 5
)

// ErrUnbounded is a listing stopped at one of its Bounds.
var ErrUnbounded = errors.New("the listing does not end")

// Pages fetches every page: fetch gets the cursor of the page to fetch (""
// for the first) and returns its items and the next cursor ("" at the end).
// Only the items keep accepts (nil: all) are kept, page by page, so what
// is out of scope never accumulates (rule "keep only what is in scope
// while paging"). A cursor seen twice, and a listing past its Bounds, are
// errors rather than an endless loop.
func Pages[T any](ctx context.Context, b Bounds, keep func(T) bool, fetch func(ctx context.Context, cursor string) ([]T, string, error)) ([]T, error) {
	maxPages, maxItems, maxEmpty := cmp.Or(b.MaxPages, DefaultMaxPages), cmp.Or(b.MaxItems, DefaultMaxItems), cmp.Or(b.MaxEmptyPages, DefaultMaxEmptyPages)
	var all []T
	seen := map[string]bool{}
	cursor := ""
	empty := 0
	for pages := 1; ; pages++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list: after %d pages: %w", pages-1, err)
		}
		items, next, err := fetch(ctx, cursor)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if keep == nil || keep(it) {
				all = append(all, it)
			}
		}
		if len(all) > maxItems {
			return nil, fmt.Errorf("list: more than %d items in scope: %w", maxItems, ErrUnbounded)
		}
		if next == "" {
			return all, nil
		}
		if len(items) == 0 {
			empty++
			if empty >= maxEmpty {
				return nil, fmt.Errorf("list: %d empty pages in a row, each naming another: %w", empty, ErrUnbounded)
			}
		} else {
			empty = 0
		}
		if pages >= maxPages {
			return nil, fmt.Errorf("list: still a next page after %d pages: %w", pages, ErrUnbounded)
		}
		if seen[next] {
			// The cursor is provider text: not quoted.
			return nil, errors.New("list: the provider returned the same next-page cursor twice")
		}
		seen[next] = true
		cursor = next
	}
}

// MatchLabels tells whether labels hold every key and value of selector.
func MatchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
