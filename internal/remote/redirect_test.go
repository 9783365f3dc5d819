package remote_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/remote"
)

// TestRedirectsAreRefused: rule "no redirect carries a credential". A
// provider answering 302 or 307 towards another port (same host), another
// host name or plain http (from https) gets an error back, and the place
// it names is never called: neither the bearer token nor a custom key
// header travels.
func TestRedirectsAreRefused(t *testing.T) {
	var reached atomic.Int32
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if strings.Contains(r.Header.Get("Authorization"), secret) || r.Header.Get("X-API-Key") == secret {
			leaked.Add(1)
		}
	}))
	defer elsewhere.Close()
	otherHost := strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)

	for _, tc := range []struct {
		name   string
		status int
		to     string
		tls    bool
		auth   func(remote.Secret) remote.Auth
	}{
		{"302 other port, bearer", http.StatusFound, elsewhere.URL, false, remote.BearerAuth},
		{"307 other port, bearer", http.StatusTemporaryRedirect, elsewhere.URL, false, remote.BearerAuth},
		{"302 other host, key header", http.StatusFound, otherHost, false, func(s remote.Secret) remote.Auth { return remote.HeaderAuth("X-API-Key", s) }},
		{"307 other host, key header", http.StatusTemporaryRedirect, otherHost, false, func(s remote.Secret) remote.Auth { return remote.HeaderAuth("X-API-Key", s) }},
		{"302 https to http", http.StatusFound, elsewhere.URL, true, remote.BearerAuth},
		{"308 https to http", http.StatusPermanentRedirect, elsewhere.URL, true, remote.BearerAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tc.to+r.URL.Path, tc.status)
			})
			var srv *httptest.Server
			if tc.tls {
				srv = httptest.NewTLSServer(h)
			} else {
				srv = httptest.NewServer(h)
			}
			defer srv.Close()
			s := remote.NewSecret(secret)
			o := remote.Options{Endpoint: srv.URL, Secret: s, Auth: tc.auth(s), HTTP: srv.Client()}
			c, err := remote.New(o)
			if err != nil {
				t.Fatal(err)
			}
			before := reached.Load()
			_, err = c.Do(context.Background(), remote.Request{Method: "POST", Path: "/sandboxes/a/pause", Body: map[string]int{}}, nil)
			if !errors.Is(err, remote.ErrRedirect) {
				t.Fatalf("err = %v, want a refused redirect", err)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), tc.to) {
				t.Errorf("message quotes the key or the target: %v", err)
			}
			if reached.Load() != before {
				t.Errorf("the redirect's target was called")
			}
			if c.Sent() != 1 {
				t.Errorf("sent %d requests; a redirect is not retried", c.Sent())
			}
		})
	}
	if leaked.Load() != 0 {
		t.Errorf("the credential reached the redirect's target %d times", leaked.Load())
	}
}

// TestProviderBytesAreScrubbed: rule "no provider byte carries our
// credential onward", at the client: the key in an answer's header, in a
// time field (a decode error quotes it), JSON-escaped in a label, and in
// an error message where a cut at remote.MaxQuoted would straddle it.
func TestProviderBytesAreScrubbed(t *testing.T) {
	const key = "sk/live<0123456789>"
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{"time field", 200, `{"at":"` + key + `"}`},
		{"escaped label", 200, `{"label":"sk\/live\u003c0123456789\u003e","at":"2026-01-01T00:00:00Z"}`},
		{"message across the cut", 400, `{"message":"` + strings.Repeat("y", remote.MaxQuoted-6) + key + `"}`},
		{"plain text", 500, strings.Repeat("z", 150) + key},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Next-Token", "n-"+key)
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			s := remote.NewSecret(key)
			c, err := remote.New(remote.Options{Endpoint: srv.URL, Secret: s, Auth: remote.BearerAuth(s), Retries: 1, Backoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				At    time.Time `json:"at"`
				Label string    `json:"label"`
			}
			h, err := c.Do(context.Background(), remote.Request{Method: "GET", Path: "/x"}, &out)
			text := fmt.Sprint(err, h, out)
			for i := 0; i+6 <= len(key); i++ {
				if strings.Contains(text, key[i:i+6]) {
					t.Fatalf("%q of the key survives: %s", key[i:i+6], text)
				}
			}
			if tc.status == 200 && tc.name == "escaped label" && (err != nil || out.Label != "[redacted]" || h.Get("X-Next-Token") != "n-[redacted]") {
				t.Fatalf("label %q, header %q, err %v", out.Label, h.Get("X-Next-Token"), err)
			}
			if tc.status != 200 || tc.name == "time field" {
				if err == nil || !strings.Contains(err.Error(), "[redacted]") {
					t.Fatalf("err = %v", err)
				}
			}
		})
	}
}
