package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// Scope is who delivers which notices: the engine of this replica.
type Scope interface {
	// NoticeSources are the sources whose notices are this replica's to
	// deliver now (nil: every source).
	NoticeSources() []string
	// WriteFor writes for the runtime k as the engine does: fenced by
	// the leader's term for a shared source, refused when not leading.
	WriteFor(ctx context.Context, k ledger.Key, fn func(ctx context.Context, st ledger.Store) error) error
}

// Outbox delivers the notices recorded in the ledger (the transactional
// outbox): what was recorded and not yet delivered to a webhook is
// offered to the Notifier by each Sweep, and each outcome is written back
// (Done). A notice is thus delivered at least once, after a crash or by
// another replica too, always under the same delivery id (DeliveryID), so
// a receiver that dedupes on it sees it once.
//
// Bounds: a Sweep offers only notices recorded within Horizon, of the
// sources Scope owns now, to the webhooks configured now (a removed one is
// not waited for); at most the notifier's queue per webhook is in flight
// (a full queue ends that webhook's sweep, the rest stays in the ledger,
// not in memory); and a delivery is tried at most the notifier's Attempts
// times in all, over every start, then given up (recorded, so never tried
// again).
//
// Sweep and Done are safe for concurrent use. The fields are set before
// a sweep, never during one (the daemon sets Horizon before each, from
// the configuration in force; Done reads none of them but Store, Scope and
// Now).
type Outbox struct {
	Store ledger.Store
	Scope Scope
	// Kinds are the notice kinds delivered through the outbox.
	Kinds []string
	// Event makes the body of a notice: the same notice makes the same
	// body, so a re-send carries what the first attempt did.
	Event func(ledger.Notice) Event
	// Horizon: notices recorded longer ago are not sent any more.
	Horizon time.Duration
	Now     func() time.Time

	mu sync.Mutex
	// inflight maps the deliveries offered and not yet done to the
	// attempts made before this round.
	inflight map[flight]int
	// backlog: the last sweep left notices owed because a queue was full.
	backlog atomic.Bool
}

type flight struct {
	notice int64
	hook   string
}

// sweepPage is how many pending notices one read of the ledger returns.
const sweepPage = 256

// DeliveryID is the delivery id of notice n to the webhook named hook: the
// same on every attempt, after a restart and on every replica. It mixes
// in what the notice is (its runtime, kind and time), not only its id, so
// that two ledgers' notice 7 are not one delivery to a receiver both use.
func DeliveryID(n ledger.Notice, hook string) string {
	sum := sha256.Sum256([]byte("reclaimer notice\x00" + strconv.FormatInt(n.ID, 10) + "\x00" + hook + "\x00" +
		n.Key.Unique() + "\x00" + n.Kind + "\x00" + strconv.FormatInt(n.At.UnixNano(), 10)))
	return "n" + strconv.FormatInt(n.ID, 10) + "-" + hex.EncodeToString(sum[:12])
}

// Sweep offers to n every notice owed to its webhooks that is not in
// flight already, and reports how many it offered. It stops at the first
// error of the ledger.
func (o *Outbox) Sweep(ctx context.Context, n *Notifier) (int, error) {
	sources := o.Scope.NoticeSources()
	since := o.Now().Add(-o.Horizon)
	offered, backlog := 0, false
	defer func() { o.backlog.Store(backlog) }()
	for _, h := range n.Hooks() {
		kinds := o.Kinds
		if len(h.Events) > 0 {
			kinds = slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return !slices.Contains(h.Events, k) })
			if len(kinds) == 0 {
				continue
			}
		}
		var after int64
		for {
			page, err := o.Store.PendingNotices(ctx, ledger.PendingFilter{Hook: h.Name, Kinds: kinds, Sources: sources,
				Since: since, After: after, Limit: sweepPage})
			if err != nil {
				return offered, fmt.Errorf("sweep the notices owed to %s: %w", Redact(h.URL), err)
			}
			full := false
			for _, p := range page {
				after = p.ID
				if !o.take(p.ID, h.Name, p.Attempts) {
					continue // in flight
				}
				if !n.Offer(h.Name, o.Event(p.Notice), DeliveryID(p.Notice, h.Name), p.ID, n.Attempts()-p.Attempts) {
					o.release(p.ID, h.Name)
					full, backlog = true, true
					break
				}
				offered++
			}
			if full || len(page) < sweepPage {
				break
			}
		}
	}
	return offered, nil
}

// take marks a delivery in flight; false when it is already.
func (o *Outbox) take(id int64, hook string, prior int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.inflight == nil {
		o.inflight = map[flight]int{}
	}
	f := flight{id, hook}
	if _, ok := o.inflight[f]; ok {
		return false
	}
	o.inflight[f] = prior
	return true
}

// release ends a delivery's flight and returns the attempts made before
// its round.
func (o *Outbox) release(id int64, hook string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := flight{id, hook}
	prior := o.inflight[f]
	delete(o.inflight, f)
	return prior
}

// Backlogged reports whether the last Sweep found a webhook's queue full
// and left notices for later: a delivery that ends makes room for them.
func (o *Outbox) Backlogged() bool { return o.backlog.Load() }

// InFlight is how many deliveries are offered and not done.
func (o *Outbox) InFlight() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.inflight)
}

// Done writes the outcome of an outbox delivery (d.Notice set) to the
// ledger: delivered, given up (its round failed: the round had the
// attempts left of the notifier's Attempts), or still owed (a stop cut it
// short), with the attempts made in all. The write is
// the engine's for the runtime (WriteFor): a replica that lost the lead
// writes nothing, and the new leader sends it again under the same
// delivery id. It returns the ledger's error, and the delivery stays owed
// then.
func (o *Outbox) Done(ctx context.Context, d Delivery) error {
	// The flight ends after the write: a sweep in between would offer
	// again what was just delivered.
	defer o.release(d.Notice, d.Hook)
	o.mu.Lock()
	prior := o.inflight[flight{d.Notice, d.Hook}]
	o.mu.Unlock()
	if d.Stopped && d.Attempts == 0 {
		return nil // nothing was tried: the ledger says owed already
	}
	now := o.Now().UTC()
	rec := ledger.NoticeDelivery{NoticeID: d.Notice, Hook: d.Hook, Attempts: prior + d.Attempts, At: now}
	switch {
	case d.Err == nil:
		rec.Delivered = now
	case d.Stopped:
		rec.LastError = d.Err.Error()
	default:
		rec.GaveUp, rec.LastError = now, d.Err.Error()
	}
	k := ledger.Key{Source: d.Event.Source, Backend: d.Event.Backend, ID: d.Event.Runtime}
	return o.Scope.WriteFor(ctx, k, func(ctx context.Context, st ledger.Store) error { return st.RecordDelivery(ctx, rec) })
}
