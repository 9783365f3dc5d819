package agentserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// ErrNotRunning refuses to read the clock of a runtime that is not running.
var ErrNotRunning = errors.New("not running: its agent-server is not contacted")

// Defaults of Clock.
const (
	DefaultTimeout     = 5 * time.Second
	DefaultConcurrency = 8
	DefaultTolerance   = 2 * time.Second
)

// SessionHeader carries an agent-server's session key.
const SessionHeader = "X-Session-API-Key"

// Clock reads agent-servers' idle clocks. The zero value is ready to use.
type Clock struct {
	// HTTP is the transport; default a client that refuses redirects.
	HTTP *http.Client
	// Now is the clock the estimates are made on; default time.Now.
	Now func() time.Time
	// Timeout bounds one read; default DefaultTimeout.
	Timeout time.Duration
	// Concurrency bounds the reads Refine makes at once.
	Concurrency int
	// Tolerance is how far a new estimate may move from the previous one
	// and still count as the same moment.
	Tolerance time.Duration

	mu   sync.Mutex
	last map[string]time.Time // URL → the estimate last returned
}

func (c *Clock) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// client is the transport. Rule "no redirect carries a credential"
// (remote.RefuseRedirects): the session key never follows one, an injected
// client included.
func (c *Clock) client() *http.Client {
	return remote.RefuseRedirects(c.HTTP)
}

// serverInfo is the part of ServerInfo read here.
type serverInfo struct {
	Uptime   *float64 `json:"uptime"`
	IdleTime *float64 `json:"idle_time"`
}

// Idle reads the agent-server's idle_time.
func (c *Clock) Idle(ctx context.Context, a backend.AgentServer) (time.Duration, error) {
	u, err := url.Parse(a.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return 0, fmt.Errorf("read idle clock of %q: not an http(s) URL", a.URL)
	}
	if u.User != nil {
		return 0, errors.New("read idle clock: the agent-server URL must not hold credentials")
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/server_info"
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	where := u.Redacted()
	fail := func(format string, args ...any) (time.Duration, error) {
		msg := fmt.Sprintf(format, args...)
		if a.SessionKey != "" {
			msg = strings.ReplaceAll(msg, a.SessionKey, "[redacted]")
		}
		return 0, fmt.Errorf("read idle clock of %s: %s", where, msg)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fail("%v", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "reclaimer")
	if a.SessionKey != "" {
		req.Header.Set(SessionHeader, a.SessionKey)
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return fail("%v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fail("read answer: %v", err)
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return fail("%d: %v", resp.StatusCode, remote.ErrRedirect)
	}
	if resp.StatusCode != http.StatusOK {
		return fail("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	var info serverInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return fail("decode answer: %v", err)
	}
	if info.IdleTime == nil || math.IsNaN(*info.IdleTime) || math.IsInf(*info.IdleTime, 0) {
		return fail("the answer has no usable idle_time")
	}
	idle := max(*info.IdleTime, 0) // a clock running backwards is idle 0
	if info.Uptime != nil && *info.Uptime >= 0 && idle > *info.Uptime {
		idle = *info.Uptime // it cannot have been idle longer than it ran
	}
	if idle > float64(math.MaxInt64/int64(time.Second)) {
		return fail("idle_time %g is out of range", idle)
	}
	return time.Duration(idle * float64(time.Second)), nil
}

// LastActivity is when rt's agent-server last executed something: now
// minus its idle time, in whole seconds, kept stable across readings.
func (c *Clock) LastActivity(ctx context.Context, rt backend.Runtime) (time.Time, error) {
	if rt.AgentServer == nil {
		return time.Time{}, fmt.Errorf("read idle clock of %s: no agent-server known: %w", rt.Key, backend.ErrNotFound)
	}
	if rt.State != backend.StateRunning {
		return time.Time{}, fmt.Errorf("read idle clock of %s: %s, %w", rt.Key, rt.State, ErrNotRunning)
	}
	now := c.now()
	idle, err := c.Idle(ctx, *rt.AgentServer)
	if err != nil {
		return time.Time{}, err
	}
	at := now.Add(-idle).Truncate(time.Second).UTC()
	tol := c.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]time.Time{}
	}
	if prev, ok := c.last[rt.AgentServer.URL]; ok && at.Sub(prev).Abs() <= tol {
		at = prev
	}
	c.last[rt.AgentServer.URL] = at
	return at, nil
}

// Refine reads the clock of every running runtime in rts that has an
// agent-server, in parallel, and moves its LastActivity forward to the
// clock's estimate when that is newer. A clock that cannot be read marks
// the runtime busy (fail closed) and its error is returned with the
// others; the runtimes are refined in place either way.
func (c *Clock) Refine(ctx context.Context, rts []backend.Runtime) error {
	n := c.Concurrency
	if n <= 0 {
		n = DefaultConcurrency
	}
	slots := make(chan struct{}, n)
	errs := make([]error, len(rts))
	var wg sync.WaitGroup
	for i := range rts {
		rt := &rts[i]
		if rt.AgentServer == nil || rt.State != backend.StateRunning {
			continue // never contact a runtime that is not running
		}
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				rt.Busy = "agent-server idle clock not read: " + ctx.Err().Error()
				return
			}
			defer func() { <-slots }()
			at, err := c.LastActivity(ctx, *rt)
			if err != nil {
				errs[i] = err
				rt.Busy = "agent-server idle clock unreadable: " + err.Error()
				return
			}
			if at.After(rt.LastActivity) {
				rt.LastActivity = at
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
