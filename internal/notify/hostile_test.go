package notify

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/remote"
)

// TestReceiverRedirectIsRefused: rule "no redirect carries a credential".
// A receiver answering 302 or 307 towards another port does not get its
// target called (a 302 would have turned the POST into a GET to any
// internal address); the delivery fails, and neither the header
// credential nor the URL's query shows in what it reports.
func TestReceiverRedirectIsRefused(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer target.Close()
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/internal", status)
		}))
		recorded := make(chan Delivery, 1)
		n := New([]Hook{{URL: hook.URL + "/hook?token=q-s3cret-token", Header: "Authorization", HeaderValue: "Bearer hdr-s3cret-value"}},
			Options{Attempts: 2, Backoff: time.Millisecond, Record: func(d Delivery) { recorded <- d }})
		n.Send(Event{Event: Failed, Runtime: "r"})
		d := <-recorded
		n.Close(context.Background())
		hook.Close()
		if !errors.Is(d.Err, remote.ErrRedirect) {
			t.Fatalf("%d: delivery error %v, want a refused redirect", status, d.Err)
		}
		for _, leak := range []string{"q-s3cret-token", "hdr-s3cret-value", target.URL} {
			if strings.Contains(d.Err.Error()+d.URL, leak) {
				t.Errorf("%d: the delivery report quotes %q: %s %v", status, leak, d.URL, d.Err)
			}
		}
	}
	if reached.Load() != 0 {
		t.Fatalf("the redirect's target was called %d times", reached.Load())
	}
}

// TestSignatureCoversTimestampAndDelivery: rule "a signature covers when
// and which delivery, not only what". Every retry of one event keeps its
// delivery id and body and carries a fresh timestamp, each signed; a
// receiver following Verify accepts the first, recognises the retry by its
// id, and rejects a replay (too old), a timestamp or id swapped under the
// same signature, and a body changed.
func TestSignatureCoversTimestampAndDelivery(t *testing.T) {
	type req struct {
		h    http.Header
		body []byte
	}
	var mu sync.Mutex
	var got []req
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, req{r.Header.Clone(), body})
		mu.Unlock()
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC).Unix())
	now := func() time.Time { return time.Unix(clock.Add(7), 0) } // each attempt 7s later
	recorded := make(chan Delivery, 1)
	n := New([]Hook{{URL: srv.URL, Secret: "k3y"}}, Options{Backoff: time.Millisecond, Now: now, Record: func(d Delivery) { recorded <- d }})
	n.Send(Event{Event: Reclaimed, Runtime: "r1", Backend: "dir", Step: "delete"})
	d := <-recorded
	n.Close(context.Background())
	if d.Err != nil || d.Attempts != 3 || len(got) != 3 || d.ID == "" {
		t.Fatalf("delivery %+v, %d requests", d, len(got))
	}
	seen := map[string]bool{}
	var stamps []string
	for i, g := range got {
		if g.h.Get(DeliveryHeader) != d.ID || string(g.body) != string(got[0].body) {
			t.Errorf("attempt %d: delivery %q (want %q), same body %v", i, g.h.Get(DeliveryHeader), d.ID, string(g.body) == string(got[0].body))
		}
		stamps = append(stamps, g.h.Get(TimestampHeader))
		ts, _ := strconv.ParseInt(g.h.Get(TimestampHeader), 10, 64)
		id, err := Verify("k3y", g.h, g.body, time.Unix(ts, 0).Add(2*time.Second), 5*time.Minute)
		if err != nil {
			t.Fatalf("attempt %d does not verify: %v", i, err)
		}
		if i > 0 && !seen[id] {
			t.Errorf("attempt %d: a retry with a new id", i)
		}
		seen[id] = true
	}
	if stamps[0] == stamps[1] || stamps[1] == stamps[2] {
		t.Errorf("retries reuse the timestamp: %v", stamps)
	}
	last := got[2]
	ts, _ := strconv.ParseInt(last.h.Get(TimestampHeader), 10, 64)
	at := time.Unix(ts, 0)
	// A replay an hour later: too old.
	if _, err := Verify("k3y", last.h, last.body, at.Add(time.Hour), 5*time.Minute); !errors.Is(err, ErrStale) {
		t.Errorf("replay an hour later: %v", err)
	}
	// A fresh timestamp pasted onto the old signature.
	h := last.h.Clone()
	h.Set(TimestampHeader, strconv.FormatInt(ts+3600, 10))
	if _, err := Verify("k3y", h, last.body, at.Add(time.Hour), 5*time.Minute); !errors.Is(err, ErrBadSignature) {
		t.Errorf("a moved timestamp: %v", err)
	}
	h = last.h.Clone()
	h.Set(DeliveryHeader, "another")
	if _, err := Verify("k3y", h, last.body, at, 5*time.Minute); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another delivery id: %v", err)
	}
	if _, err := Verify("k3y", last.h, append([]byte(nil), append(last.body[:len(last.body)-2], '}')...), at, 5*time.Minute); !errors.Is(err, ErrBadSignature) {
		t.Errorf("a changed body: %v", err)
	}
	if _, err := Verify("other", last.h, last.body, at, 5*time.Minute); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another secret: %v", err)
	}
}

// TestHeaderCredentialAndRedactedURL: the header read from header_file is
// sent; a failed delivery reports the URL with its query redacted.
func TestHeaderCredentialAndRedactedURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer hdr-value" {
			t.Errorf("Authorization %q", r.Header.Get("Authorization"))
		}
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	recorded := make(chan Delivery, 1)
	n := New([]Hook{{URL: srv.URL + "/h?sig=abc123", Header: "Authorization", HeaderValue: "Bearer hdr-value"}},
		Options{Attempts: 1, Record: func(d Delivery) { recorded <- d }})
	n.Send(Event{Event: Failed})
	d := <-recorded
	n.Close(context.Background())
	if d.Err == nil || strings.Contains(d.URL+d.Err.Error(), "abc123") || !strings.Contains(d.URL, "/h?") {
		t.Fatalf("delivery %q %v", d.URL, d.Err)
	}
	if got := Redact("https://u:p@example.com/x?a=b#f"); got != "https://example.com/x?[redacted]" {
		t.Errorf("Redact = %q", got)
	}
}
