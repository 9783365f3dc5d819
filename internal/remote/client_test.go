package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/remote"
)

const secret = "sk_live_abcdef123456"

func client(t *testing.T, url string, o remote.Options) *remote.Client {
	t.Helper()
	o.Endpoint = url
	o.Secret = remote.NewSecret(secret)
	o.Auth = remote.BearerAuth(o.Secret)
	if o.Backoff == 0 {
		o.Backoff = time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 2 * time.Millisecond
	}
	c, err := remote.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRetriesThenSucceeds(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.WriteHeader(http.StatusTooManyRequests)
		case 2, 3:
			w.WriteHeader(http.StatusBadGateway)
		default:
			json.NewEncoder(w).Encode(map[string]int{"ok": 1})
		}
	}))
	defer srv.Close()
	c := client(t, srv.URL, remote.Options{})
	var out map[string]int
	if _, err := c.Do(context.Background(), remote.Request{Method: "GET", Path: "/x"}, &out); err != nil || out["ok"] != 1 {
		t.Fatalf("%v %v", out, err)
	}
	if c.Sent() != 4 {
		t.Errorf("sent %d", c.Sent())
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	var first time.Time
	var gap time.Duration
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			first = time.Now()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		gap = time.Since(first)
	}))
	defer srv.Close()
	c := client(t, srv.URL, remote.Options{MaxBackoff: time.Second})
	if _, err := c.Do(context.Background(), remote.Request{Method: "POST", Path: "/x"}, nil); err != nil {
		t.Fatal(err)
	}
	if gap < 900*time.Millisecond {
		t.Fatalf("retried after %v despite Retry-After: 1", gap)
	}
}

func TestCategoriesAndNoRetryOn4xx(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		switch r.URL.Path {
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
		case "/conflict":
			w.WriteHeader(http.StatusConflict)
		default:
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"message":"bad key %s"}`, secret)
		}
	}))
	defer srv.Close()
	c := client(t, srv.URL, remote.Options{})
	ctx := context.Background()
	if _, err := c.Do(ctx, remote.Request{Method: "GET", Path: "/missing"}, nil); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("404: %v", err)
	}
	if _, err := c.Do(ctx, remote.Request{Method: "GET", Path: "/conflict"}, nil); !errors.Is(err, backend.ErrConflict) {
		t.Errorf("409: %v", err)
	}
	_, err := c.Do(ctx, remote.Request{Method: "GET", Path: "/bad"}, nil)
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("400 message not scrubbed: %v", err)
	}
	if n.Load() != 3 {
		t.Errorf("4xx were retried: %d requests", n.Load())
	}
}

func TestOutageTripsTheBreaker(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := client(t, srv.URL, remote.Options{Retries: 1, Trip: 2, Cooldown: time.Minute, Now: clock})
	ctx := context.Background()
	for range 2 {
		if _, err := c.Do(ctx, remote.Request{Method: "GET", Path: "/x"}, nil); !errors.Is(err, remote.ErrUnavailable) {
			t.Fatalf("want unavailable, got %v", err)
		}
	}
	sent := n.Load()
	start := time.Now()
	_, err := c.Do(ctx, remote.Request{Method: "GET", Path: "/x"}, nil)
	if !errors.Is(err, remote.ErrUnavailable) || n.Load() != sent || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("breaker did not fail fast: %v, %d more requests", err, n.Load()-sent)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	c.Do(ctx, remote.Request{Method: "GET", Path: "/x"}, nil)
	if n.Load() == sent {
		t.Fatal("breaker never closed")
	}
}

func TestConcurrencyBound(t *testing.T) {
	var in, peak atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := in.Add(1)
		for {
			p := peak.Load()
			if v <= p || peak.CompareAndSwap(p, v) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		in.Add(-1)
	}))
	defer srv.Close()
	c := client(t, srv.URL, remote.Options{Concurrency: 3, Rate: 100000})
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() { c.Do(context.Background(), remote.Request{Method: "GET", Path: "/"}, nil) })
	}
	wg.Wait()
	if peak.Load() > 3 {
		t.Fatalf("%d requests in flight, bound 3", peak.Load())
	}
}

func TestRateLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	c := client(t, srv.URL, remote.Options{Rate: 50})
	start := time.Now()
	for range 75 {
		c.Do(context.Background(), remote.Request{Method: "GET", Path: "/"}, nil)
	}
	// A burst of 50, then 25 more at 50 a second: at least ~0.5 s.
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("75 requests at 50/s took %v", d)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := remote.NewSecret(secret)
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		if out := fmt.Sprintf(f, s); strings.Contains(out, secret) {
			t.Errorf("%s printed the secret", f)
		}
	}
	if b, _ := json.Marshal(struct{ S remote.Secret }{s}); strings.Contains(string(b), secret) {
		t.Error("JSON printed the secret")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	os.WriteFile(file, []byte(secret+"\n"), 0o600)
	got, err := remote.LoadSecret("", file)
	if err != nil || got.Reveal() != secret {
		t.Fatalf("file: %v", err)
	}
	t.Setenv("RECLAIMER_TEST_KEY", "")
	if _, err := remote.LoadSecret("RECLAIMER_TEST_KEY", ""); err == nil || !strings.Contains(err.Error(), "RECLAIMER_TEST_KEY") {
		t.Errorf("missing variable: %v", err)
	}
	if _, err := remote.New(remote.Options{Endpoint: "https://user:pw@host"}); err == nil {
		t.Error("an endpoint with credentials was accepted")
	}
}

func TestPagesRefusesARepeatedCursor(t *testing.T) {
	_, err := remote.Pages(context.Background(), remote.Bounds{}, nil, func(_ context.Context, c string) ([]int, string, error) {
		return []int{1}, "same", nil
	})
	if err == nil {
		t.Fatal("endless pagination was not stopped")
	}
}

func TestEscapedPathsArriveIntact(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.URL.EscapedPath() }))
	defer srv.Close()
	c := client(t, srv.URL+"/api", remote.Options{})
	id := "team a/sb#1%"
	if _, err := c.Do(context.Background(), remote.Request{Method: "GET", Path: "/sandbox/" + url.PathEscape(id)}, nil); err != nil {
		t.Fatal(err)
	}
	if want := "/api/sandbox/" + url.PathEscape(id); got != want {
		t.Fatalf("server saw %q, want %q", got, want)
	}
}
