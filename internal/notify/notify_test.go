package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDeliverSignedWithRetries: a hook that fails twice gets the event on
// the third try, signed; a hook that wants other kinds gets nothing.
func TestDeliverSignedWithRetries(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var got []Event
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if _, err := Verify("s3cret", r.Header, body, time.Now(), time.Minute); err != nil {
			t.Errorf("signature %q: %v", r.Header.Get(SignatureHeader), err)
		}
		if r.Header.Get("X-Reclaimer-Event") != Archived {
			t.Errorf("event header %q", r.Header.Get("X-Reclaimer-Event"))
		}
		if calls.Add(1) < 3 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		var ev Event
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Error(err)
		}
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}))
	defer srv.Close()
	var other atomic.Int32
	otherSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { other.Add(1) }))
	defer otherSrv.Close()

	var deliveries []Delivery
	var dmu sync.Mutex
	n := New([]Hook{{URL: srv.URL, Secret: "s3cret"}, {URL: otherSrv.URL, Events: []string{Failed}}},
		Options{Backoff: time.Millisecond, Record: func(d Delivery) { dmu.Lock(); deliveries = append(deliveries, d); dmu.Unlock() }})
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n.Send(Event{Event: Archived, Runtime: "r1", Backend: "dir", Step: "archive", ArchiveID: "a1", At: at})
	n.Close(context.Background())

	if len(got) != 1 || got[0].Runtime != "r1" || got[0].ArchiveID != "a1" || !got[0].At.Equal(at) {
		t.Fatalf("delivered %+v", got)
	}
	if calls.Load() != 3 || other.Load() != 0 {
		t.Fatalf("calls %d, other hook %d", calls.Load(), other.Load())
	}
	if len(deliveries) != 1 || deliveries[0].Err != nil || deliveries[0].Attempts != 3 {
		t.Fatalf("deliveries %+v", deliveries)
	}
	n.Send(Event{Event: Archived}) // after Close: dropped, no panic
}

// TestGiveUp: a hook that always fails is tried Attempts times, and the
// failure is reported; Close with an ended context stops the backoff.
func TestGiveUp(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	recorded := make(chan Delivery, 4)
	n := New([]Hook{{URL: srv.URL}}, Options{Attempts: 3, Backoff: time.Millisecond, Record: func(d Delivery) { recorded <- d }})
	n.Send(Event{Event: Failed, Runtime: "r"})
	d := <-recorded
	if d.Err == nil || d.Attempts != 3 || calls.Load() != 3 {
		t.Fatalf("delivery %+v after %d calls", d, calls.Load())
	}
	n2 := New([]Hook{{URL: srv.URL}}, Options{Attempts: 100, Backoff: time.Hour, Record: func(d Delivery) { recorded <- d }})
	n2.Send(Event{Event: Failed})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n2.Close(ctx)
	if d := <-recorded; d.Err == nil {
		t.Fatal("gave up without an error")
	}
	n.Close(context.Background())
}

// TestSendNeverBlocks: a full queue drops (and reports) instead of
// waiting for a hook that hangs.
func TestSendNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	var dropped atomic.Int32
	n := New([]Hook{{URL: srv.URL}}, Options{Queue: 1, Record: func(d Delivery) {
		if d.Attempts == 0 && d.Err != nil {
			dropped.Add(1)
		}
	}})
	start := time.Now()
	for range 10 {
		n.Send(Event{Event: Reclaimed})
	}
	if time.Since(start) > time.Second {
		t.Fatal("Send blocked")
	}
	if dropped.Load() < 8 {
		t.Fatalf("dropped %d of 10 with a queue of 1", dropped.Load())
	}
	close(release)
	n.Close(context.Background())
}
