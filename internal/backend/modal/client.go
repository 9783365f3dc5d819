package modal

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/modal/modalpb"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// DefaultEndpoint is Modal's API.
const DefaultEndpoint = "https://api.modal.com"

// ClientOptions configure a Client. Zero values take the defaults of
// package remote, whose HTTP client these limits mirror for gRPC.
type ClientOptions struct {
	// Endpoint is https://host[:port] (TLS) or, for a server on loopback
	// only, http://127.0.0.1:port (plain text); default DefaultEndpoint.
	Endpoint string
	// TokenID and TokenSecret are sent as x-modal-token-id and
	// x-modal-token-secret; both are scrubbed from every error.
	TokenID, TokenSecret remote.Secret
	// CredentialErr, when set, says why the credentials could not be read:
	// every call fails with it.
	CredentialErr error
	Rate          float64
	Concurrency   int
	Retries       int
	// Timeout bounds each attempt.
	Timeout             time.Duration
	Backoff, MaxBackoff time.Duration
	// MaxPushback is the longest server pushback (grpc-retry-pushback-ms)
	// honoured; a server asking for more fails the call at once.
	MaxPushback time.Duration
	Trip        int
	Cooldown    time.Duration
	Now         func() time.Time
}

// Default names of the credential variables.
const (
	TokenIDEnv     = "MODAL_TOKEN_ID"
	TokenSecretEnv = "MODAL_TOKEN_SECRET"
)

// LoadTokens reads the token id and secret from the environment variables
// idEnv and secretEnv (default TokenIDEnv, TokenSecretEnv). Messages name
// the variables, never the values.
func LoadTokens(idEnv, secretEnv string) (id, secret remote.Secret, err error) {
	if idEnv == "" {
		idEnv = TokenIDEnv
	}
	if secretEnv == "" {
		secretEnv = TokenSecretEnv
	}
	if id, err = remote.LoadSecret(idEnv, ""); err != nil {
		return id, secret, err
	}
	secret, err = remote.LoadSecret(secretEnv, "")
	return id, secret, err
}

// Client speaks Modal's gRPC API within the limits of one source: a rate,
// calls in flight, retries of UNAVAILABLE and RESOURCE_EXHAUSTED with
// backoff and full jitter (honouring the server's pushback), a timeout per
// attempt, and a cool-down after calls failed in a row.
type Client struct {
	opts    ClientOptions
	conn    *grpc.ClientConn
	rpc     modalpb.ModalClientClient
	limiter *rate.Limiter
	slots   chan struct{}
	target  string
	sent    atomic.Int64

	mu        sync.Mutex
	failures  int
	openUntil time.Time
}

// tokens puts the credentials on every call.
type tokens struct {
	id, secret remote.Secret
	secure     bool
}

func (t tokens) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"x-modal-token-id": t.id.Reveal(), "x-modal-token-secret": t.secret.Reveal()}, nil
}

func (t tokens) RequireTransportSecurity() bool { return t.secure }

// Dial checks opts and connects lazily (the first call dials).
func Dial(opts ClientOptions) (*Client, error) {
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	u, err := url.Parse(opts.Endpoint)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("dial modal: endpoint %q is not https://host[:port]", opts.Endpoint)
	}
	var creds credentials.TransportCredentials
	switch u.Scheme {
	case "https":
		creds = credentials.NewClientTLSFromCert(nil, "")
	case "http":
		// Plain text sends the token secret in the clear: loopback only.
		if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
			return nil, fmt.Errorf("dial modal: plain-text endpoint %q is allowed on loopback only", opts.Endpoint)
		}
		creds = insecure.NewCredentials()
	default:
		return nil, fmt.Errorf("dial modal: endpoint %q is not https://host[:port]", opts.Endpoint)
	}
	target := u.Host
	if u.Port() == "" {
		target += ":443"
	}
	if opts.Rate < 0 || opts.Concurrency < 0 || opts.Retries < 0 {
		return nil, errors.New("dial modal: negative rate, concurrency or retries")
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if opts.Rate == 0 {
		opts.Rate = remote.DefaultRate
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = remote.DefaultConcurrency
	}
	if opts.Retries == 0 {
		opts.Retries = remote.DefaultRetries
	}
	if opts.Trip == 0 {
		opts.Trip = remote.DefaultTrip
	}
	def(&opts.Timeout, remote.DefaultTimeout)
	def(&opts.Backoff, remote.DefaultBackoff)
	def(&opts.MaxBackoff, remote.DefaultMaxBackoff)
	def(&opts.MaxPushback, remote.DefaultRetryAfter)
	def(&opts.Cooldown, remote.DefaultCooldown)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Client{opts: opts, limiter: rate.NewLimiter(rate.Limit(opts.Rate), max(1, int(opts.Rate))),
		slots: make(chan struct{}, opts.Concurrency), target: u.Scheme + "://" + target}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(tokens{opts.TokenID, opts.TokenSecret, u.Scheme == "https"}),
		grpc.WithUserAgent("reclaimer"), grpc.WithUnaryInterceptor(c.intercept))
	if err != nil {
		return nil, fmt.Errorf("dial modal: %w", err)
	}
	c.conn, c.rpc = conn, modalpb.NewModalClientClient(conn)
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Sent returns how many attempts reached the network.
func (c *Client) Sent() int64 { return c.sent.Load() }

// Endpoint names the server, for messages.
func (c *Client) Endpoint() string { return c.target }

// RPC is the generated client, its calls going through the limits.
func (c *Client) RPC() modalpb.ModalClientClient { return c.rpc }

// intercept applies the limits to every unary call.
func (c *Client) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	name := method[strings.LastIndex(method, "/")+1:]
	if c.opts.CredentialErr != nil {
		return fmt.Errorf("%s: %w", name, c.opts.CredentialErr)
	}
	if err := c.breaker(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var last error
	for attempt := 0; ; attempt++ {
		pushback, err := c.attempt(ctx, method, req, reply, cc, invoker, opts)
		if err == nil {
			c.record(true)
			return nil
		}
		last = err
		if !retryable(err) || attempt >= c.opts.Retries || ctx.Err() != nil {
			break
		}
		if pushback < 0 {
			break // the server asks not to retry
		}
		if pushback > c.opts.MaxPushback {
			last = fmt.Errorf("%w (the server asks to wait %s)", last, pushback)
			break
		}
		wait := pushback
		if wait == 0 {
			ceiling := min(c.opts.Backoff<<min(attempt, 20), c.opts.MaxBackoff)
			wait = rand.N(max(ceiling, 1)) + 1
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if retryable(last) {
		c.record(false)
	}
	return c.wrap(name, last)
}

// attempt makes one call within the rate and concurrency limits and
// returns the server's pushback (0 none, negative: do not retry).
func (c *Client) attempt(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) (time.Duration, error) {
	if err := c.limiter.Wait(ctx); err != nil {
		return 0, err
	}
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-c.slots }()
	actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var trailer metadata.MD
	c.sent.Add(1)
	err := invoker(actx, method, req, reply, cc, append(opts, grpc.Trailer(&trailer))...)
	if err != nil && ctx.Err() == nil && status.Code(err) == codes.DeadlineExceeded {
		// This attempt's own timeout, not the caller's: the server did
		// not answer in time, which is worth another try.
		err = status.Error(codes.Unavailable, "no answer within "+c.opts.Timeout.String())
	}
	var pushback time.Duration
	if v := trailer.Get("grpc-retry-pushback-ms"); len(v) > 0 {
		if ms, perr := strconv.ParseInt(v[0], 10, 64); perr == nil {
			pushback = time.Duration(ms) * time.Millisecond
		} else {
			pushback = -1
		}
	}
	return pushback, err
}

func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted:
		return true
	}
	return false
}

// Error is a call that failed; it wraps a category of package backend or
// remote so callers test with errors.Is.
type Error struct {
	RPC     string
	Code    codes.Code
	Message string // scrubbed of the credentials
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s: %s", e.RPC, e.Code, e.Message) }

// Unwrap maps the code to a category.
func (e *Error) Unwrap() error {
	switch e.Code {
	case codes.NotFound:
		return backend.ErrNotFound
	case codes.AlreadyExists, codes.FailedPrecondition, codes.Aborted:
		return backend.ErrConflict
	case codes.Unavailable, codes.ResourceExhausted:
		return remote.ErrUnavailable
	}
	return nil
}

func (c *Client) wrap(name string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %s", name, c.scrub(err.Error()))
	}
	return &Error{RPC: name, Code: st.Code(), Message: c.scrub(st.Message())}
}

// scrub is rule "no provider byte carries our credential onward" for the
// messages a Modal server sends (remote.Secret.Scrub: escaped echoes too).
func (c *Client) scrub(s string) string {
	return c.opts.TokenID.Scrub(c.opts.TokenSecret.Scrub(s))
}

func (c *Client) breaker() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.opts.Now(); now.Before(c.openUntil) {
		return fmt.Errorf("%w: %d calls failed in a row; not calling it again before %s",
			remote.ErrUnavailable, c.failures, c.openUntil.UTC().Format(time.RFC3339))
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
