package ledgertest

import (
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

func takeHold(t *testing.T, s ledger.Store, k ledger.Key, holder string, ttl time.Duration, now time.Time) ledger.Hold {
	t.Helper()
	h, err := s.TakeHold(ctx(t), ledger.HoldRequest{Key: k, Holder: holder, TTL: ttl, Now: now})
	mustNil(t, "TakeHold", err)
	return h
}

func listHolds(t *testing.T, s ledger.Store, k ledger.Key, now time.Time) []ledger.Hold {
	t.Helper()
	hs, err := s.ListHolds(ctx(t), ledger.HoldFilter{Key: k, Now: now})
	mustNil(t, "ListHolds", err)
	if hs == nil {
		hs = []ledger.Hold{}
	}
	return hs
}

func testHoldLifecycle(t *testing.T, s ledger.Store) {
	k := key("worktree", "repo/a")
	h := takeHold(t, s, k, "agent-server-1", 10*time.Minute, t0.In(elsewhere))
	if h.ID == "" {
		t.Fatal("hold without an id")
	}
	mustEqual(t, "taken", h, ledger.Hold{ID: h.ID, Key: k, Holder: "agent-server-1", TakenAt: t0, ExpiresAt: at(10 * time.Minute)})

	mustEqual(t, "active when taken", listHolds(t, s, k, t0), []ledger.Hold{h})
	mustEqual(t, "active just before expiry", listHolds(t, s, k, at(10*time.Minute-1)), []ledger.Hold{h})
	mustEqual(t, "inactive at expiry", listHolds(t, s, k, at(10*time.Minute)), []ledger.Hold{})
	mustEqual(t, "inactive later", listHolds(t, s, k, at(time.Hour)), []ledger.Hold{})
	mustEqual(t, "other runtime", listHolds(t, s, key("worktree", "repo/b"), t0), []ledger.Hold{})

	renewed, err := s.RenewHold(ctx(t), ledger.HoldRenewal{Key: k, ID: h.ID, TTL: 10 * time.Minute, Now: at(5 * time.Minute)})
	mustNil(t, "RenewHold", err)
	want := h
	want.ExpiresAt = at(15 * time.Minute)
	mustEqual(t, "renewed", renewed, want)
	mustEqual(t, "active after old expiry", listHolds(t, s, k, at(12*time.Minute)), []ledger.Hold{want})

	mustNil(t, "ReleaseHold", s.ReleaseHold(ctx(t), k, h.ID))
	mustEqual(t, "after release", listHolds(t, s, k, t0), []ledger.Hold{})
	mustNil(t, "ReleaseHold again", s.ReleaseHold(ctx(t), k, h.ID))
	_, err = s.RenewHold(ctx(t), ledger.HoldRenewal{Key: k, ID: h.ID, TTL: time.Minute, Now: at(6 * time.Minute)})
	mustBe(t, "RenewHold after release", err, ledger.ErrNotFound)
}

func testRenewExpiredOrUnknown(t *testing.T, s ledger.Store) {
	k := key("e2b", "sbx-1")
	h := takeHold(t, s, k, "ci", time.Minute, t0)

	for _, now := range []time.Time{at(time.Minute), at(time.Hour)} {
		_, err := s.RenewHold(ctx(t), ledger.HoldRenewal{Key: k, ID: h.ID, TTL: time.Hour, Now: now})
		mustBe(t, "RenewHold of an expired hold", err, ledger.ErrNotFound)
	}
	// A refused renewal must not have revived it.
	mustEqual(t, "after refused renewals", listHolds(t, s, k, at(time.Minute)), []ledger.Hold{})

	_, err := s.RenewHold(ctx(t), ledger.HoldRenewal{Key: k, ID: "no-such-hold", TTL: time.Hour, Now: t0})
	mustBe(t, "RenewHold of an unknown hold", err, ledger.ErrNotFound)
	mustNil(t, "ReleaseHold of an unknown hold", s.ReleaseHold(ctx(t), k, "no-such-hold"))
}

func testHoldOtherRuntime(t *testing.T, s ledger.Store) {
	mine, theirs := key("docker", "mine"), key("docker", "theirs")
	h := takeHold(t, s, mine, "agent", time.Hour, t0)

	_, err := s.RenewHold(ctx(t), ledger.HoldRenewal{Key: theirs, ID: h.ID, TTL: 2 * time.Hour, Now: t0})
	mustBe(t, "RenewHold through another runtime", err, ledger.ErrConflict)
	mustBe(t, "ReleaseHold through another runtime", s.ReleaseHold(ctx(t), theirs, h.ID), ledger.ErrConflict)

	mustEqual(t, "hold untouched", listHolds(t, s, mine, t0), []ledger.Hold{h})
}

func testHoldsAcrossRuntimes(t *testing.T, s ledger.Store) {
	a, b := key("dir", "a"), key("dir", "b")
	b2 := takeHold(t, s, b, "agent", 2*time.Hour, t0)
	a1 := takeHold(t, s, a, "agent", time.Hour, t0)
	a2 := takeHold(t, s, a, "agent", 3*time.Hour, t0) // same holder again: a second hold
	a0 := takeHold(t, s, a, "cli", 30*time.Minute, at(time.Minute))
	if a1.ID == a2.ID || a1.ID == a0.ID || a1.ID == b2.ID || a2.ID == b2.ID {
		t.Fatalf("hold ids repeat: %s %s %s %s", a0.ID, a1.ID, a2.ID, b2.ID)
	}

	mustEqual(t, "all, by key then expiry", listHolds(t, s, ledger.Key{}, t0), []ledger.Hold{a0, a1, a2, b2})
	mustEqual(t, "only a", listHolds(t, s, a, t0), []ledger.Hold{a0, a1, a2})
	mustEqual(t, "all after 90 min", listHolds(t, s, ledger.Key{}, at(90*time.Minute)), []ledger.Hold{a2, b2})

	// Releasing one of a holder's two holds keeps the other.
	mustNil(t, "ReleaseHold", s.ReleaseHold(ctx(t), a, a1.ID))
	mustEqual(t, "a after release", listHolds(t, s, a, t0), []ledger.Hold{a0, a2})
}

func testPruneHolds(t *testing.T, s ledger.Store) {
	k := key("dir", "x")
	takeHold(t, s, k, "h", time.Minute, t0)
	takeHold(t, s, k, "h", 2*time.Minute, t0)
	keep := takeHold(t, s, k, "h", 3*time.Minute, t0)

	n, err := s.PruneHolds(ctx(t), at(2*time.Minute))
	mustNil(t, "PruneHolds", err)
	if n != 2 {
		t.Fatalf("pruned %d, want 2", n)
	}
	// Before pruning they were still listed at t0; now only keep is.
	mustEqual(t, "after prune", listHolds(t, s, k, t0), []ledger.Hold{keep})
	n, err = s.PruneHolds(ctx(t), at(2*time.Minute))
	mustNil(t, "PruneHolds again", err)
	if n != 0 {
		t.Fatalf("second prune removed %d, want 0", n)
	}
}
