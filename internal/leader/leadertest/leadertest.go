// Package leadertest is the conformance suite of leader.Lessor: any
// lessor must do what leader.Table says, operation by operation, and keep
// its invariants under concurrency (a renewal racing a takeover). A
// lessor's test calls Run with a function that opens it with a clock the
// test sets.
package leadertest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger"
)

// Subject is a lessor under test.
type Subject struct {
	Lessor leader.Lessor
	// SetClock sets the lessor's clock (the time its rules compare with)
	// for every later call, until set again.
	SetClock func(time.Time)
	// Holds reports whether a write fenced by f would commit now
	// (ledger.Fencer, for a lessor that keeps its leases in the ledger).
	Holds func(f ledger.Fence) (bool, error)
}

// Run runs every conformance subtest against subjects made by open; each
// subtest opens one.
func Run(t *testing.T, open func(t *testing.T) Subject) {
	t.Run("AgreesWithTable", func(t *testing.T) { testModel(t, open(t)) })
	t.Run("RenewalRacingTakeover", func(t *testing.T) { testRace(t, open(t)) })
	t.Run("ResignationsHeard", func(t *testing.T) { testResignations(t, open(t)) })
}

var base = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

const ttl = 10 * time.Second

var lap atomic.Int64

// newName gives each run of a test a lease of its own: a lessor (a
// database) is opened once for the many runs of a property.
func newName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, lap.Add(1)) }

// testModel drives the lessor and Table with the same random operations
// and clock and compares every answer; it checks Table's invariants on
// the way: at most one generation holds at any time, a generation that
// stopped holding never holds again, and each takeover's generation is
// higher than all before.
func testModel(t *testing.T, s Subject) {
	holders := []string{"a#1", "b#1", "c#1"}
	rapid.Check(t, func(rt *rapid.T) {
		name := newName("model")
		var (
			model  leader.Table
			now    = base
			last   = map[string]leader.Lease{} // each holder's newest lease, as the lessor gave it
			lastM  = map[string]leader.Lease{} // the same as the model gave it
			issued []ledger.Fence              // every generation the lessor issued, oldest first
			realOf = map[int64]int64{}         // model generation -> the lessor's
			dead   = map[int64]bool{}          // real generations seen not holding
		)
		s.SetClock(now)
		ctx := t.Context()
		// checkFences compares the newest fences (all of them at the end):
		// a fenced write is a transaction, and a run makes many.
		checkFences := func(all bool) {
			holding := 0
			from := 0
			if !all {
				from = max(0, len(issued)-2)
			}
			for _, f := range issued[from:] {
				got, err := s.Holds(f)
				if err != nil {
					rt.Fatalf("Holds %v: %v", f, err)
				}
				want := false
				for mg, g := range realOf {
					if g == f.Generation {
						want = model.Holds(ledger.Fence{Lease: name, Generation: mg}, now)
					}
				}
				if got != want {
					rt.Fatalf("at %v fence %v holds: %v, Table says %v", now.Sub(base), f, got, want)
				}
				if got {
					holding++
					if dead[f.Generation] {
						rt.Fatalf("fence %v holds again after it stopped", f)
					}
					if f != issued[len(issued)-1] {
						rt.Fatalf("fence %v holds though %v was issued after it", f, issued[len(issued)-1])
					}
				} else {
					dead[f.Generation] = true
				}
			}
			if holding > 1 {
				rt.Fatalf("%d generations hold at once", holding)
			}
		}
		steps := rapid.IntRange(1, 20).Draw(rt, "steps")
		for range steps {
			h := rapid.SampledFrom(holders).Draw(rt, "holder")
			switch op := rapid.IntRange(0, 3).Draw(rt, "op"); op {
			case 0: // time passes: often across an expiry, sometimes onto it
				d := rapid.SampledFrom([]time.Duration{0, time.Nanosecond, time.Second, ttl / 2, ttl - 1, ttl, ttl + 1, 3 * ttl}).Draw(rt, "advance")
				now = now.Add(d)
				s.SetClock(now)
			case 1:
				l, won, err := s.Lessor.Elect(ctx, name, h, ttl)
				if err != nil {
					rt.Fatalf("Elect: %v", err)
				}
				ml, mwon := model.Elect(name, h, ttl, now)
				if won != mwon || l.Holder != ml.Holder || !l.ExpiresAt.Equal(ml.ExpiresAt) {
					rt.Fatalf("Elect(%s) at %v: won %v lease %v until %v; Table: won %v lease %v until %v",
						h, now.Sub(base), won, l, l.ExpiresAt, mwon, ml, ml.ExpiresAt)
				}
				if won {
					if len(issued) > 0 && l.Generation <= issued[len(issued)-1].Generation {
						rt.Fatalf("takeover got generation %d, not above %d", l.Generation, issued[len(issued)-1].Generation)
					}
					issued = append(issued, l.Fence())
					realOf[ml.Generation] = l.Generation
					last[h], lastM[h] = l, ml
				}
			case 2:
				l, ok := last[h]
				if !ok {
					continue
				}
				got, err := s.Lessor.Renew(ctx, l, ttl)
				mgot, merr := model.Renew(lastM[h], ttl, now)
				if (err == nil) != (merr == nil) || (err != nil && !errors.Is(err, ledger.ErrFenced)) {
					rt.Fatalf("Renew(%v) at %v: %v; Table: %v", l, now.Sub(base), err, merr)
				}
				if err == nil {
					if !got.ExpiresAt.Equal(mgot.ExpiresAt) || got.Generation != l.Generation {
						rt.Fatalf("Renew(%v): %v until %v; Table: until %v", l, got, got.ExpiresAt, mgot.ExpiresAt)
					}
					last[h], lastM[h] = got, mgot
				}
			case 3:
				l, ok := last[h]
				if !ok {
					continue
				}
				if err := s.Lessor.Resign(ctx, l); err != nil {
					rt.Fatalf("Resign(%v): %v", l, err)
				}
				model.Resign(lastM[h])
			}
			cur, err := s.Lessor.Current(ctx, name)
			mcur, mok := model.Current(name)
			switch {
			case errors.Is(err, ledger.ErrNotFound) && !mok:
			case err != nil:
				rt.Fatalf("Current: %v (Table has %v, %v)", err, mcur, mok)
			case !mok || cur.Holder != mcur.Holder || realOf[mcur.Generation] != cur.Generation || !cur.ExpiresAt.Equal(mcur.ExpiresAt):
				rt.Fatalf("Current: %v until %v; Table: %v until %v (%v)", cur, cur.ExpiresAt, mcur, mcur.ExpiresAt, mok)
			}
			checkFences(false)
		}
		checkFences(true)
	})
}

// testRace renews a lease while two others try to take it over, all at
// once, at the instant before its expiry or at the instant of it: exactly
// one side wins, by the clock alone, whatever order the calls land in.
func testRace(t *testing.T, s Subject) {
	ctx := t.Context()
	for round := range 30 {
		name := newName("race")
		now := base.Add(time.Duration(round) * time.Hour)
		s.SetClock(now)
		a, won, err := s.Lessor.Elect(ctx, name, "a#1", ttl)
		if err != nil || !won {
			t.Fatalf("round %d: first Elect: won %v, %v", round, won, err)
		}
		atExpiry := round%2 == 1
		at := a.ExpiresAt.Add(-time.Nanosecond)
		if atExpiry {
			at = a.ExpiresAt
		}
		s.SetClock(at)
		var (
			wg      sync.WaitGroup
			renewed error
			takers  [2]bool
			errs    [2]error
		)
		wg.Go(func() { _, renewed = s.Lessor.Renew(ctx, a, ttl) })
		for i, h := range []string{"b#1", "c#1"} {
			wg.Go(func() { _, takers[i], errs[i] = s.Lessor.Elect(ctx, name, h, ttl) })
		}
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			t.Fatalf("round %d: Elect: %v", round, err)
		}
		if renewed != nil && !errors.Is(renewed, ledger.ErrFenced) {
			t.Fatalf("round %d: Renew: %v", round, renewed)
		}
		wins := 0
		for _, w := range takers {
			if w {
				wins++
			}
		}
		holdsA, err := s.Holds(a.Fence())
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case atExpiry && (renewed == nil || wins != 1 || holdsA):
			t.Fatalf("round %d, at the expiry: renew %v, %d takeovers, old fence holds %v; want the renewal refused and one takeover",
				round, renewed, wins, holdsA)
		case !atExpiry && (renewed != nil || wins != 0 || !holdsA):
			t.Fatalf("round %d, before the expiry: renew %v, %d takeovers, old fence holds %v; want the renewal and no takeover",
				round, renewed, wins, holdsA)
		}
	}
}

// testResignations: a resignation reaches a listener at once (it is how
// a successor takes over without waiting for the lease to run out).
func testResignations(t *testing.T, s Subject) {
	s.SetClock(base)
	name := newName("resign")
	heard := s.Lessor.Resignations(t.Context())
	l, won, err := s.Lessor.Elect(t.Context(), name, "a#1", ttl)
	if err != nil || !won {
		t.Fatalf("Elect: won %v, %v", won, err)
	}
	// A listener may need a moment to be listening: resign again until
	// heard (resigning what is gone is harmless and tells nobody, so take
	// it again each time).
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := s.Lessor.Resign(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-heard:
			if got == name {
				if _, err := s.Lessor.Current(t.Context(), name); !errors.Is(err, ledger.ErrNotFound) {
					t.Fatalf("Current after resigning: %v, want ErrNotFound", err)
				}
				return
			}
		case <-tick.C:
		case <-deadline:
			t.Fatal("a resignation was not heard within 30 s")
		}
		if l, won, err = s.Lessor.Elect(t.Context(), name, "a#1", ttl); err != nil || !won {
			t.Fatalf("Elect again: won %v, %v", won, err)
		}
	}
}
