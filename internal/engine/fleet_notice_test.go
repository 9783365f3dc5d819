package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
	"github.com/reclaimer/reclaimer/internal/notify"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// outboxOf is what `serve` makes of one replica's engine: an outbox over
// the shared ledger whose outcomes are written back through the engine.
func outboxOf(t *testing.T, eng *engine.Engine, st ledger.Store, url string) (*notify.Outbox, *notify.Notifier, chan notify.Delivery) {
	t.Helper()
	ob := &notify.Outbox{Store: st, Scope: eng, Kinds: []string{notify.Scheduled, notify.Failed}, Horizon: 24 * time.Hour,
		Now: time.Now, Event: func(n ledger.Notice) notify.Event {
			return notify.Event{Event: n.Kind, Runtime: n.Key.ID, Backend: n.Key.Backend, Source: n.Key.Source, Step: n.Step, At: n.At}
		}}
	done := make(chan notify.Delivery, 8)
	n := notify.New([]notify.Hook{{URL: url}}, notify.Options{Backoff: time.Millisecond, Record: func(d notify.Delivery) {
		d.Err = ob.Done(context.Background(), d) // the ledger's answer
		done <- d
	}})
	t.Cleanup(func() { n.Close(context.Background()) })
	return ob, n, done
}

func sweep(t *testing.T, ob *notify.Outbox, n *notify.Notifier) int {
	t.Helper()
	got, err := ob.Sweep(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestNoticesFollowTheLeader: a shared runtime's notice that the leader
// recorded and could not mark delivered (it lost the lead while the POST
// was in flight) is sent again by the new leader, under the same delivery
// id, and marked delivered under its fence; a follower sends nothing of
// the shared source, and no replica sends another host's notices.
func TestNoticesFollowTheLeader(t *testing.T) {
	url := pgtest.NewDatabase(t)
	fake := fakes.NewE2B(t, "key", time.Now)
	a, elA, stopA := replicaOf(t, url, fake, "a")
	waitLeading(t, elA)
	b, elB, _ := replicaOf(t, url, fake, "b")
	st, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	now := time.Now().UTC()
	shared := ledger.Notice{Key: ledger.Key{Source: "sandboxes", Backend: "e2b", ID: "sb-1"}, Kind: "scheduled", Step: "delete", At: now}
	if shared.ID, err = st.RecordNotice(t.Context(), shared); err != nil {
		t.Fatal(err)
	}
	elsewhere := ledger.Notice{Key: ledger.Key{Source: "host-c/dirs:/runs", Backend: "dir", ID: "r1"}, Kind: "scheduled", Step: "archive", At: now}
	if elsewhere.ID, err = st.RecordNotice(t.Context(), elsewhere); err != nil {
		t.Fatal(err)
	}

	// The receiver holds the first POST until told: the leader's round is
	// in flight when it loses the lead.
	var mu sync.Mutex
	var ids []string
	entered, release := make(chan struct{}, 4), make(chan struct{})
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get(notify.DeliveryHeader))
		first := len(ids) == 1
		mu.Unlock()
		entered <- struct{}{}
		if first {
			<-release
		}
	}))
	defer rcv.Close()
	obA, nA, doneA := outboxOf(t, a, st, rcv.URL)
	obB, nB, doneB := outboxOf(t, b, st, rcv.URL)

	if got := sweep(t, obB, nB); got != 0 {
		t.Fatalf("a follower offered %d notices", got)
	}
	if got := sweep(t, obA, nA); got != 1 {
		t.Fatalf("the leader offered %d notices, want its shared one only", got)
	}
	<-entered
	stopA()
	waitLeading(t, elB)
	close(release)
	if d := <-doneA; d.Err == nil {
		t.Fatal("a replica that lost the lead recorded the delivery")
	}
	if got := sweep(t, obA, nA); got != 0 {
		t.Fatalf("the old leader offered %d notices", got)
	}

	// The new leader sends it again, and marks it under its fence.
	if got := sweep(t, obB, nB); got != 1 {
		t.Fatalf("the new leader offered %d notices", got)
	}
	<-entered
	if d := <-doneB; d.Err != nil || d.Notice != shared.ID {
		t.Fatalf("the new leader's delivery: %+v", d)
	}
	mu.Lock()
	got := append([]string(nil), ids...)
	mu.Unlock()
	hook := notify.HookName(rcv.URL)
	if len(got) != 2 || got[0] != got[1] || got[0] != notify.DeliveryID(shared, hook) {
		t.Fatalf("delivery ids %v: want the same one from both leaders", got)
	}
	if got := sweep(t, obB, nB); got != 0 {
		t.Fatalf("the leader offered %d again after delivering", got)
	}
	owed, err := st.PendingNotices(t.Context(), ledger.PendingFilter{Hook: hook})
	if err != nil || len(owed) != 1 || owed[0].ID != elsewhere.ID {
		t.Fatalf("owed at the end: %+v, %v; want another host's notice only", owed, err)
	}
}
