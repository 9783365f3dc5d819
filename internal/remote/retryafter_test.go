package remote_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reclaimer/reclaimer/internal/remote"
)

// busyProvider answers its first n requests 429 with Retry-After, then 200,
// in process: no network, so the test runs in a synctest bubble and its
// waits take no time.
type busyProvider struct {
	n, calls   atomic.Int32
	retryAfter string
}

func (p *busyProvider) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.calls.Add(1) <= p.n.Load() {
		return &http.Response{StatusCode: http.StatusTooManyRequests, Status: "429 Too Many Requests",
			Header: http.Header{"Retry-After": {p.retryAfter}}, Body: io.NopCloser(strings.NewReader(`{}`)), Request: r}, nil
	}
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"ok":1}`)), Request: r}, nil
}

// TestRetryAfterHonouredWithinTheDeadline: a provider answering the first
// five requests 429 with Retry-After: 2 is waited for, past the retries it
// would otherwise use up, as long as the caller's deadline (a source's
// list_timeout) allows; past that deadline the request fails, as a
// provider unavailable.
func TestRetryAfterHonouredWithinTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &busyProvider{retryAfter: "2"}
		p.n.Store(5)
		c, err := remote.New(remote.Options{Endpoint: "https://provider.example", Retries: 1, HTTP: &http.Client{Transport: p}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		var out map[string]int
		if _, err := c.Do(ctx, remote.Request{Method: "GET", Path: "/sandboxes"}, &out); err != nil || out["ok"] != 1 {
			t.Fatalf("within a minute: %v %v", out, err)
		}
		if waited := time.Since(start); waited < 10*time.Second || p.calls.Load() != 6 {
			t.Fatalf("waited %s over %d calls, want the 5 Retry-Afters of 2s", waited, p.calls.Load())
		}

		p.calls.Store(0)
		p.n.Store(1000)
		short, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel2()
		_, err = c.Do(short, remote.Request{Method: "GET", Path: "/sandboxes"}, nil)
		var se *remote.StatusError
		if !errors.As(err, &se) || se.Status != http.StatusTooManyRequests {
			t.Fatalf("past the deadline: %v, want the 429", err)
		}
		if n := p.calls.Load(); n < 2 || n > 4 {
			t.Fatalf("%d calls within 5s of Retry-After: 2", n)
		}
	})
}
