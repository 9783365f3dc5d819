package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// Lease is one holding of a named lease.
type Lease struct {
	Name       string
	Holder     string
	Generation int64
	ElectedAt  time.Time // by the lessor's clock
	ExpiresAt  time.Time // by the lessor's clock
}

// Fence is the token writes under this lease are conditioned on.
func (l Lease) Fence() ledger.Fence { return ledger.Fence{Lease: l.Name, Generation: l.Generation} }

func (l Lease) String() string {
	return fmt.Sprintf("%s held by %s (generation %d)", l.Name, l.Holder, l.Generation)
}

// Lessor keeps leases: the rules of Table, on a store every replica
// shares. A lease that is not held reads as ledger.ErrNotFound; one that
// no longer holds a generation, as ledger.ErrFenced.
type Lessor interface {
	// Elect takes lease name for holder for ttl when nobody holds it or
	// its holder's lease expired; won tells whether it did. Either way it
	// returns the lease in force (zero when none could be read).
	Elect(ctx context.Context, name, holder string, ttl time.Duration) (l Lease, won bool, err error)
	// Renew extends l to ttl from now while it still holds l's holder
	// and generation and has not expired; ledger.ErrFenced otherwise.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// Resign gives l up, if it still holds, and tells the replicas
	// waiting on Resignations. Resigning a lease that is gone is not an
	// error.
	Resign(ctx context.Context, l Lease) error
	// Current returns the lease of name in force, or ledger.ErrNotFound.
	Current(ctx context.Context, name string) (Lease, error)
	// Resignations receives (best effort) when some lease was given up,
	// until ctx ends; then it is closed.
	Resignations(ctx context.Context) <-chan string
}

// Table is the lease rules with the clock passed in: pure, and the
// reference a Lessor's behaviour is compared against. The zero Table is
// empty and ready.
type Table struct {
	leases map[string]Lease
	gen    int64
}

// Elect applies Lessor.Elect's rule at now.
func (t *Table) Elect(name, holder string, ttl time.Duration, now time.Time) (Lease, bool) {
	if l, ok := t.leases[name]; ok && !now.Before(l.ExpiresAt) {
		delete(t.leases, name) // expired: anyone may take it
	}
	if l, ok := t.leases[name]; ok {
		return l, false
	}
	t.gen++
	l := Lease{Name: name, Holder: holder, Generation: t.gen, ElectedAt: now, ExpiresAt: now.Add(ttl)}
	if t.leases == nil {
		t.leases = map[string]Lease{}
	}
	t.leases[name] = l
	return l, true
}

// Renew applies Lessor.Renew's rule at now.
func (t *Table) Renew(l Lease, ttl time.Duration, now time.Time) (Lease, error) {
	cur, ok := t.leases[l.Name]
	if !ok || cur.Holder != l.Holder || cur.Generation != l.Generation || !now.Before(cur.ExpiresAt) {
		return Lease{}, fmt.Errorf("renew %s: %w", l, ledger.ErrFenced)
	}
	cur.ExpiresAt = now.Add(ttl)
	t.leases[l.Name] = cur
	return cur, nil
}

// Resign applies Lessor.Resign's rule; it reports whether l was in force.
func (t *Table) Resign(l Lease) bool {
	cur, ok := t.leases[l.Name]
	if !ok || cur.Generation != l.Generation {
		return false
	}
	delete(t.leases, l.Name)
	return true
}

// Current returns the lease of name, expired or not, as the store holds
// it until someone takes it over.
func (t *Table) Current(name string) (Lease, bool) {
	l, ok := t.leases[name]
	return l, ok
}

// Holds reports whether a write fenced by f commits at now: the rule of
// ledger.Fencer.
func (t *Table) Holds(f ledger.Fence, now time.Time) bool {
	cur, ok := t.leases[f.Lease]
	return ok && cur.Generation == f.Generation && now.Before(cur.ExpiresAt)
}
