package leader_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reclaimer/reclaimer/internal/leader"
)

const ttl = 15 * time.Second

// network stands between electors and the lessor: it can cut a replica
// off (its calls fail at once) or stall it (its calls hang until their
// deadline, as a stopped process or a partitioned TCP connection does).
type network struct {
	leader.Lessor
	mu      sync.Mutex
	cut     map[string]bool
	stalled map[string]chan struct{}
}

func newNetwork(l leader.Lessor) *network {
	return &network{Lessor: l, cut: map[string]bool{}, stalled: map[string]chan struct{}{}}
}

var errUnreachable = errors.New("the lessor cannot be reached")

func replicaOf(holder string) string { r, _, _ := strings.Cut(holder, "#"); return r }

// pass lets a call of holder through, fails it, or holds it until the
// replica is unstalled or ctx ends.
func (n *network) pass(ctx context.Context, holder string) error {
	n.mu.Lock()
	cut, stall := n.cut[replicaOf(holder)], n.stalled[replicaOf(holder)]
	n.mu.Unlock()
	if cut {
		return errUnreachable
	}
	if stall != nil {
		select {
		case <-stall:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (n *network) setCut(replica string, cut bool) {
	n.mu.Lock()
	n.cut[replica] = cut
	n.mu.Unlock()
}

func (n *network) stall(replica string) {
	n.mu.Lock()
	n.stalled[replica] = make(chan struct{})
	n.mu.Unlock()
}

func (n *network) unstall(replica string) {
	n.mu.Lock()
	close(n.stalled[replica])
	delete(n.stalled, replica)
	n.mu.Unlock()
}

func (n *network) Elect(ctx context.Context, name, holder string, ttl time.Duration) (leader.Lease, bool, error) {
	if err := n.pass(ctx, holder); err != nil {
		return leader.Lease{}, false, err
	}
	return n.Lessor.Elect(ctx, name, holder, ttl)
}

func (n *network) Renew(ctx context.Context, l leader.Lease, ttl time.Duration) (leader.Lease, error) {
	if err := n.pass(ctx, l.Holder); err != nil {
		return leader.Lease{}, err
	}
	return n.Lessor.Renew(ctx, l, ttl)
}

func (n *network) Resign(ctx context.Context, l leader.Lease) error {
	if err := n.pass(ctx, l.Holder); err != nil {
		return err
	}
	return n.Lessor.Resign(ctx, l)
}

// replica is one elector running in the test's bubble.
type replica struct {
	el     *leader.Elector
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	terms  []span // every term, as OnChange told it
}

// span is a term from its start to its end (zero while it lasts).
type span struct {
	gen        int64
	start, end time.Time
}

func start(t *testing.T, lessor leader.Lessor, name string) *replica {
	t.Helper()
	r := &replica{done: make(chan struct{})}
	el, err := leader.New(leader.Config{Lessor: lessor, Lease: "remote", Replica: name, TTL: ttl,
		OnChange: func(s leader.Status) {
			r.mu.Lock()
			defer r.mu.Unlock()
			n := len(r.terms)
			switch {
			case s.Leading && (n == 0 || !r.terms[n-1].end.IsZero()):
				r.terms = append(r.terms, span{gen: s.Lease.Generation, start: time.Now()})
			case !s.Leading && n > 0 && r.terms[n-1].end.IsZero():
				r.terms[n-1].end = time.Now()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	r.el = el
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel = cancel
	go func() { defer close(r.done); el.Run(ctx) }()
	return r
}

func (r *replica) stop() { r.cancel(); <-r.done }

func (r *replica) leading() bool { _, ok := r.el.Term(); return ok }

func leaders(rs []*replica) int {
	n := 0
	for _, r := range rs {
		if r.leading() {
			n++
		}
	}
	return n
}

// waitLeader lets fake time pass in small steps until one replica leads.
func waitLeader(t *testing.T, rs []*replica, within time.Duration) *replica {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, r := range rs {
			if r.leading() {
				return r
			}
		}
		time.Sleep(10 * time.Millisecond) // fake time, in the bubble
	}
	t.Fatalf("nobody leads after %v", within)
	return nil
}

func TestOneLeaderTakesTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leader.Mem{}
		rs := []*replica{start(t, m, "a"), start(t, m, "b"), start(t, m, "c")}
		l := waitLeader(t, rs, time.Second)
		for range 100 { // a minute of renewals
			time.Sleep(600 * time.Millisecond)
			if n := leaders(rs); n != 1 {
				t.Fatalf("%d replicas lead", n)
			}
			if !l.leading() {
				t.Fatal("the leader lost a lease nobody contested")
			}
		}
		term, _ := l.el.Term()
		if g := term.Lease().Generation; g != 1 {
			t.Fatalf("generation %d after one election, want 1", g)
		}
		for _, r := range rs {
			r.stop()
		}
	})
}

// TestResignHandsOverAtOnce: a leader that stops resigns, and another
// takes over at once, not at its next tick.
func TestResignHandsOverAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leader.Mem{}
		a := start(t, m, "a")
		waitLeader(t, []*replica{a}, time.Second)
		b := start(t, m, "b")
		synctest.Wait()
		time.Sleep(time.Second) // b has tried and follows
		a.stop()
		stopped := time.Now()
		waitLeader(t, []*replica{b}, ttl)
		if took := time.Since(stopped); took > 100*time.Millisecond {
			t.Fatalf("the successor took over %v after the resignation, want at once", took)
		}
		if a.leading() {
			t.Fatal("the stopped replica still leads")
		}
		b.stop()
	})
}

// TestCutOffLeaderStopsBeforeTheLeaseExpires: a leader that cannot renew
// ends its term while its lease still holds, with TTL/5 to spare, and a
// successor leads within 2 x TTL.
func TestCutOffLeaderStopsBeforeTheLeaseExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leader.Mem{}
		n := newNetwork(m)
		a, b := start(t, n, "a"), start(t, n, "b")
		l := waitLeader(t, []*replica{a, b}, time.Second)
		other := b
		if l == b {
			other = a
		}
		term, _ := l.el.Term()
		n.setCut(replicaOf(l.el.Holder()), true)
		cut := time.Now()
		<-term.Context().Done()
		ended := time.Now()
		lease, err := m.Current(t.Context(), "remote")
		if err != nil || lease.Generation != term.Lease().Generation {
			t.Fatalf("when the term ended the lease was %v, %v; want it still ours", lease, err)
		}
		if left := lease.ExpiresAt.Sub(ended); left < ttl/5-time.Millisecond {
			t.Fatalf("the term ended %v before the lease expired, want at least %v", left, ttl/5)
		}
		if !m.Holds(term.Fence()) {
			t.Fatal("the lease no longer held when the term ended: the leader acted past it")
		}
		waitLeader(t, []*replica{other}, 2*ttl-time.Since(cut))
		if m.Holds(term.Fence()) {
			t.Fatal("the old generation still holds after the takeover")
		}
		n.setCut(replicaOf(l.el.Holder()), false)
		time.Sleep(ttl)
		if l.leading() || !other.leading() {
			t.Fatal("the replica cut off took the lease back")
		}
		a.stop()
		b.stop()
	})
}

// TestStalledLeaderWakesFenced: a leader whose calls hang (a stopped
// process) past its lease wakes to find its lease taken: it does not lead
// again, and its generation no longer holds.
func TestStalledLeaderWakesFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leader.Mem{}
		n := newNetwork(m)
		a := start(t, n, "a")
		waitLeader(t, []*replica{a}, time.Second)
		old, _ := a.el.Term()
		n.stall("a")
		b := start(t, n, "b")
		waitLeader(t, []*replica{b}, 2*ttl)
		if a.leading() || old.Valid() {
			t.Fatal("the stalled leader's term outlived its lease")
		}
		n.unstall("a")
		time.Sleep(2 * ttl)
		if a.leading() {
			t.Fatal("the woken leader leads again")
		}
		if m.Holds(old.Fence()) {
			t.Fatal("the woken leader's generation holds")
		}
		a.stop()
		b.stop()
	})
}

// TestTermsNeverOverlap cuts random replicas off and on for a simulated
// hour: at every moment at most one replica may act, every term's
// generation is above all before, and someone leads whenever everyone
// could reach the lessor for 2 x TTL.
func TestTermsNeverOverlap(t *testing.T) {
	for seed := range uint64(3) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			m := &leader.Mem{}
			n := newNetwork(m)
			names := []string{"a", "b", "c"}
			rs := make([]*replica, len(names))
			for i, name := range names {
				rs[i] = start(t, n, name)
			}
			cutSince := map[string]bool{}
			allUpSince := time.Now()
			for step := range 3600 * 4 { // an hour, every 250 ms
				time.Sleep(250 * time.Millisecond)
				if l := leaders(rs); l > 1 {
					t.Fatalf("seed %d, %v in: %d replicas may act at once", seed, time.Duration(step)*250*time.Millisecond, l)
				}
				if step%20 == 0 && rng.IntN(2) == 0 {
					// Mostly the leader: that is where overlap would be.
					name := names[rng.IntN(len(names))]
					for i, r := range rs {
						if r.leading() && rng.IntN(3) > 0 {
							name = names[i]
						}
					}
					cutSince[name] = !cutSince[name]
					n.setCut(name, cutSince[name])
					if cutSince[name] {
						allUpSince = time.Time{}
					}
				}
				up := true
				for _, c := range cutSince {
					up = up && !c
				}
				if up && allUpSince.IsZero() {
					allUpSince = time.Now()
				}
				if up && time.Since(allUpSince) > 2*ttl && leaders(rs) != 1 {
					t.Fatalf("seed %d: nobody leads %v after every replica could reach the lessor", seed, time.Since(allUpSince))
				}
			}
			for _, r := range rs {
				r.stop()
			}
			var all []span
			for _, r := range rs {
				r.mu.Lock()
				all = append(all, r.terms...)
				r.mu.Unlock()
			}
			for i, x := range all {
				for _, y := range all[i+1:] {
					if x.start.Before(y.end) && y.start.Before(x.end) {
						t.Fatalf("seed %d: terms %+v and %+v overlap", seed, x, y)
					}
					if x.gen == y.gen && x.start != y.start {
						continue // the same lease resumed after a missed renewal
					}
					first, second := x, y
					if y.start.Before(x.start) {
						first, second = y, x
					}
					if second.gen < first.gen {
						t.Fatalf("seed %d: term of generation %d began after one of %d", seed, second.gen, first.gen)
					}
				}
			}
			if len(all) < 3 {
				t.Fatalf("seed %d: only %d terms in an hour of partitions: the test did not move the lease", seed, len(all))
			}
		})
	}
}
