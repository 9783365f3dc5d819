package clock_test

import (
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/clock"
)

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(t0)
	late, early := f.NewTimer(2*time.Minute), f.NewTimer(time.Minute)
	tick := f.NewTicker(30 * time.Second)
	if f.Waiters() != 3 {
		t.Fatalf("waiters %d", f.Waiters())
	}
	f.Advance(59 * time.Second)
	select {
	case <-early.C():
		t.Fatal("fired early")
	default:
	}
	if at := <-tick.C(); !at.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("tick at %v", at)
	}
	f.Advance(time.Second)
	if at := <-early.C(); !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("timer at %v", at)
	}
	if !late.Stop() || late.Stop() {
		t.Fatal("Stop of an armed timer, then of a stopped one")
	}
	f.Advance(time.Hour)
	select {
	case <-late.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if !f.Now().Equal(t0.Add(time.Hour + time.Minute)) {
		t.Fatalf("now %v", f.Now())
	}
	tick.Stop()
	done := make(chan struct{})
	go func() { f.BlockUntil(1); close(done) }()
	late.Reset(time.Second)
	<-done
}
