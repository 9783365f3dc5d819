package leader

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// DefaultTTL is the lease of [server] leader_lease's default.
const DefaultTTL = 15 * time.Second

// Config configures an Elector.
type Config struct {
	Lessor Lessor
	// Lease names what is led, e.g. "remote".
	Lease string
	// Replica is this replica's name ([server] name). The lease's holder
	// is Replica plus a random suffix, so a restarted process never
	// mistakes its predecessor's lease for its own.
	Replica string
	// TTL is the lease; default DefaultTTL. Renewals go every TTL/3, and
	// a term ends TTL/5 before the lease can have expired.
	TTL time.Duration
	// OnChange is called when this replica starts or stops leading, or
	// sees another leader: one call at a time, in order, but not always
	// from Run's goroutine (a term that runs out says so at once).
	OnChange func(Status)
	Logger   *slog.Logger
}

// Status is what an Elector knows of the lease.
type Status struct {
	// Leading: this replica may act now.
	Leading bool
	// Lease is the lease in force as last seen: this replica's while
	// leading, another's, or zero when none was seen.
	Lease Lease
	// Since is when this replica began leading (its own clock).
	Since time.Time
}

// Elector takes and keeps a lease for this replica.
type Elector struct {
	cfg    Config
	holder string
	log    *slog.Logger

	mu     sync.Mutex
	term   *Term
	status Status

	changeMu sync.Mutex // one OnChange at a time
}

// errTermEnded is the cause of a term's context when its time ran out.
var errTermEnded = errors.New("leadership term ended: the lease was not renewed in time")

// errResigned is the cause of a term's context when the elector stopped.
var errResigned = errors.New("leadership given up")

// New checks cfg and returns an Elector; Run starts it.
func New(cfg Config) (*Elector, error) {
	if cfg.Lessor == nil || cfg.Lease == "" || cfg.Replica == "" {
		return nil, errors.New("new elector: a lessor, a lease name and a replica name are needed")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL < 10*time.Millisecond {
		return nil, fmt.Errorf("new elector: lease %s is too short", cfg.TTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elector{cfg: cfg, holder: cfg.Replica + "#" + crand.Text()[:8], log: cfg.Logger}, nil
}

// Holder is the name this elector holds the lease under.
func (e *Elector) Holder() string { return e.holder }

// Status returns what the elector knows now.
func (e *Elector) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.status
	s.Leading = e.term != nil && e.term.Valid()
	return s
}

// Term returns the current term while this replica leads.
func (e *Elector) Term() (*Term, bool) {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	if t == nil || !t.Valid() {
		return nil, false
	}
	return t, true
}

// interval is how long between two attempts to take or renew.
func (e *Elector) interval() time.Duration { return e.cfg.TTL / 3 }

// actFor is how long after sending a renewal that succeeded the replica
// may act: TTL/5 short of the lease.
func (e *Elector) actFor() time.Duration { return e.cfg.TTL - e.cfg.TTL/5 }

// Run takes the lease when it is free and keeps it while it can, until
// ctx ends; then it ends the term and resigns, so that another replica
// takes over at once.
func (e *Elector) Run(ctx context.Context) error {
	resigned := e.cfg.Lessor.Resignations(ctx)
	var ours *Lease // ours in the lessor, as far as we know (even when the term ended)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			e.stop(ours)
			return nil
		case <-timer.C:
		case name, ok := <-resigned:
			if !ok {
				resigned = nil
				continue
			}
			if name != e.cfg.Lease || ours != nil {
				continue
			}
		}
		ours = e.attempt(ctx, ours)
		wait := e.interval()
		wait += rand.N(wait/5 + 1)
		timer.Reset(wait)
	}
}

// attempt renews ours, or tries to take the lease; it returns the lease
// the replica holds after it (nil when none).
func (e *Elector) attempt(ctx context.Context, ours *Lease) *Lease {
	sent := time.Now()
	if ours != nil {
		// Not past what is left of the term: a renewal that answers after
		// the term ended could not extend it anyway.
		rctx, cancel := context.WithTimeout(ctx, e.interval())
		l, err := e.cfg.Lessor.Renew(rctx, *ours, e.cfg.TTL)
		cancel()
		switch {
		case err == nil:
			e.extend(l, sent)
			return &l
		case errors.Is(err, ledger.ErrFenced):
			e.end(fmt.Errorf("lease %s lost: %w", ours, err), Lease{})
			return nil
		default:
			// Keep it: the term runs out by itself unless a later renewal
			// succeeds first.
			if ctx.Err() == nil {
				e.log.Warn("cannot renew the leadership lease", "lease", e.cfg.Lease, "err", err)
			}
			return ours
		}
	}
	rctx, cancel := context.WithTimeout(ctx, e.interval())
	l, won, err := e.cfg.Lessor.Elect(rctx, e.cfg.Lease, e.holder, e.cfg.TTL)
	cancel()
	switch {
	case err != nil:
		if ctx.Err() == nil {
			e.log.Warn("cannot take part in the leadership election", "lease", e.cfg.Lease, "err", err)
		}
		return nil
	case won:
		e.extend(l, sent)
		return &l
	}
	e.seen(l)
	return nil
}

// extend starts a term, or lengthens the current one, until sent+actFor.
func (e *Elector) extend(l Lease, sent time.Time) {
	until := sent.Add(e.actFor())
	e.mu.Lock()
	t := e.term
	if t != nil && t.Lease().Generation == l.Generation && t.extend(l, until) {
		e.mu.Unlock()
		return
	}
	if t != nil {
		t.end(errTermEnded)
	}
	t = newTerm(l, until)
	e.term = t
	e.status = Status{Leading: true, Lease: l, Since: time.Now()}
	s := e.status
	e.mu.Unlock()
	e.log.Info("leading", "lease", l.Name, "generation", l.Generation, "holder", l.Holder)
	e.changed(s)
	// A term that runs out tells OnChange too.
	context.AfterFunc(t.Context(), func() { e.ended(t) })
}

// ended reports a term whose context ended, once.
func (e *Elector) ended(t *Term) {
	e.mu.Lock()
	if e.term != t {
		e.mu.Unlock()
		return
	}
	e.term = nil
	e.status.Leading = false
	s := e.status
	e.mu.Unlock()
	l := t.Lease()
	e.log.Info("no longer leading", "lease", l.Name, "generation", l.Generation,
		"why", context.Cause(t.Context()).Error())
	e.changed(s)
}

// end ends the current term with cause; other is the lease now in force.
func (e *Elector) end(cause error, other Lease) {
	e.mu.Lock()
	t := e.term
	e.status.Lease = other
	e.mu.Unlock()
	if t != nil {
		t.end(cause)
	}
}

// seen records another replica's lease, telling OnChange when the
// leader changed.
func (e *Elector) seen(l Lease) {
	e.mu.Lock()
	changed := e.status.Lease.Generation != l.Generation
	e.status.Lease = l
	s := e.status
	e.mu.Unlock()
	if changed && l.Generation != 0 {
		e.log.Info("following", "lease", l.Name, "leader", l.Holder, "generation", l.Generation)
		e.changed(s)
	}
}

func (e *Elector) changed(s Status) {
	if e.cfg.OnChange != nil {
		e.changeMu.Lock()
		defer e.changeMu.Unlock()
		e.cfg.OnChange(s)
	}
}

// stop ends the term, says so, and gives the lease up.
func (e *Elector) stop(ours *Lease) {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	e.end(errResigned, Lease{})
	if t != nil {
		e.ended(t) // before Run returns, not whenever the term's AfterFunc runs
	}
	if ours == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.cfg.Lessor.Resign(ctx, *ours); err != nil {
		e.log.Warn("cannot give the leadership lease up; it expires by itself", "lease", ours.Name, "err", err)
	}
}

// Term is one stretch of leading: one lease generation, while it was
// renewed in time.
type Term struct {
	lease  Lease
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	until time.Time // monotonic: the reading time.Now carries
	timer *time.Timer
}

func newTerm(l Lease, until time.Time) *Term {
	t := &Term{lease: l, until: until}
	t.ctx, t.cancel = context.WithCancelCause(context.Background())
	t.timer = time.AfterFunc(time.Until(until), func() { t.end(errTermEnded) })
	return t
}

// Lease is the lease of this term, as last renewed.
func (t *Term) Lease() Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lease
}

// Fence is the token to condition this term's writes on (ledger.Fencer).
func (t *Term) Fence() ledger.Fence { return t.Lease().Fence() }

// Context is canceled when the term ends: work done as the leader runs
// under it and stops with it.
func (t *Term) Context() context.Context { return t.ctx }

// Valid reports whether the replica may still act: the term's time, by
// the monotonic clock, has not run out and it was not ended.
func (t *Term) Valid() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ctx.Err() == nil && time.Now().Before(t.until)
}

// Remaining is how long the term can still last unless renewed (zero
// once it ended).
func (t *Term) Remaining() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx.Err() != nil {
		return 0
	}
	return max(0, time.Until(t.until))
}

// extend moves the end of a term still running to until.
func (t *Term) extend(l Lease, until time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx.Err() != nil || !time.Now().Before(t.until) {
		return false
	}
	if until.After(t.until) {
		t.until = until
		t.timer.Reset(time.Until(until))
	}
	t.lease = l
	return true
}

func (t *Term) end(cause error) {
	t.mu.Lock()
	t.timer.Stop()
	t.mu.Unlock()
	t.cancel(cause)
}
