// Package clock is the time the daemon and the application layer run by:
// Real in production, Fake in tests, which move time themselves instead of
// sleeping and wait for the timers they expect instead of polling.
//
// A Fake fires a timer or ticker when Advance moves its time to or past
// the deadline, in deadline order, delivering on the timer's channel
// without blocking (a channel of one, like time.Timer's). BlockUntil waits,
// without sleeping, until so many timers and tickers are armed: a test
// knows the code under test is waiting before it moves time.
package clock

import (
	"slices"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
	NewTicker(d time.Duration) Ticker
}

// Timer is time.Timer's interface.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker is time.Ticker's interface.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the system clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                   { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer   { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.Timer.C }

type realTicker struct{ *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.Ticker.C }

// Fake is a clock that moves only when told.
type Fake struct {
	mu      sync.Mutex
	cond    *sync.Cond
	now     time.Time
	waiting []*fakeTimer // armed, by deadline
}

// NewFake returns a Fake at now.
func NewFake(now time.Time) *Fake {
	f := &Fake{now: now}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Now implements Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer implements Clock.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	f.arm(t, d)
	f.mu.Unlock()
	return t
}

// NewTicker implements Clock.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTimer{f: f, c: make(chan time.Time, 1), period: d}
	f.mu.Lock()
	f.arm(t, d)
	f.mu.Unlock()
	return fakeTicker{t}
}

type fakeTicker struct{ t *fakeTimer }

func (k fakeTicker) C() <-chan time.Time { return k.t.c }
func (k fakeTicker) Stop()               { k.t.Stop() }

// Advance moves the time forward by d, firing every timer due by then.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.now.Add(d)
	for len(f.waiting) > 0 && !f.waiting[0].deadline.After(end) {
		t := f.waiting[0]
		f.waiting = f.waiting[1:]
		f.now = t.deadline
		t.armed = false
		select {
		case t.c <- f.now:
		default: // a tick nobody took: dropped, as time.Ticker does
		}
		if t.period > 0 {
			f.arm(t, t.period)
		}
	}
	f.now = end
	f.cond.Broadcast()
}

// Waiters is how many timers and tickers are armed.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiting)
}

// BlockUntil waits until at least n timers and tickers are armed.
func (f *Fake) BlockUntil(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.waiting) < n {
		f.cond.Wait()
	}
}

// arm schedules t d from now; f.mu is held.
func (f *Fake) arm(t *fakeTimer, d time.Duration) {
	f.disarm(t)
	t.deadline, t.armed = f.now.Add(d), true
	i, _ := slices.BinarySearchFunc(f.waiting, t.deadline, func(x *fakeTimer, at time.Time) int {
		if x.deadline.After(at) {
			return 1
		}
		return -1 // equal deadlines keep their order of arming
	})
	f.waiting = slices.Insert(f.waiting, i, t)
	f.cond.Broadcast()
}

// disarm unschedules t, reporting whether it was armed; f.mu is held.
func (f *Fake) disarm(t *fakeTimer) bool {
	if !t.armed {
		return false
	}
	t.armed = false
	f.waiting = slices.DeleteFunc(f.waiting, func(x *fakeTimer) bool { return x == t })
	f.cond.Broadcast()
	return true
}

type fakeTimer struct {
	f        *Fake
	c        chan time.Time
	deadline time.Time
	period   time.Duration // tickers
	armed    bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.disarm(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.f.disarm(t)
	t.f.arm(t, d)
	return was
}
