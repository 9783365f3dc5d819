package server

import (
	"context"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/notify"
	"github.com/reclaimer/reclaimer/internal/ops"
)

// The notices recorded in the ledger reach the webhooks through the
// outbox (notify.Outbox): the kinds below are sent from what the ledger
// owes each webhook, never from memory, so a daemon that dies before
// sending one sends it after its next start, and in a fleet the replica
// that owns the runtime then (the leader for a shared source, the host
// for its own) does. The engine records a notice of every destructive step
// (archive, delete) scheduled, done or failed; the outcomes of the others
// (caches, dependencies, suspend: frequent, and nothing lost) are not
// notices, and are sent from memory after the pass.
var outboxKinds = []string{notify.Scheduled, notify.Reclaimed, notify.Archived, notify.Failed}

// noticeEvent is the body of a notice of the ledger: the same notice makes
// the same body, so a re-send carries what the first attempt did.
func noticeEvent(n ledger.Notice) notify.Event {
	ev := notify.Event{Event: n.Kind, Runtime: n.Key.ID, Backend: n.Key.Backend, Source: n.Key.Source, Step: n.Step,
		Due: n.Due, Reason: n.Message, PlanID: n.PlanID, ArchiveID: n.ArchiveID, FreedBytes: n.FreedBytes, At: n.At}
	if n.Kind == notify.Scheduled {
		ev.HowToStop = howToCancel(n.Key)
	}
	return ev
}

// engineScope is the outbox's view of the engine in force (a reload
// replaces it): which notices are this replica's, and the fenced write.
type engineScope struct{ app *ops.App }

func (s engineScope) NoticeSources() []string { return s.app.Engine().NoticeSources() }

func (s engineScope) WriteFor(ctx context.Context, k ledger.Key, fn func(context.Context, ledger.Store) error) error {
	return s.app.Engine().WriteFor(ctx, k, fn)
}

// kickOutbox asks the outbox to look at the ledger again.
func (d *Daemon) kickOutbox() {
	select {
	case d.outboxCh <- struct{}{}:
	default:
	}
}

// deliverNotices sweeps the outbox at start, after every pass (which
// records the notices), when this replica begins to lead, after a reload,
// and when a delivery ends (a queue that was full has room), until ctx
// ends. The horizon is the configuration's in force at each sweep.
func (d *Daemon) deliverNotices(ctx context.Context) {
	for {
		if !d.ledgerDown() {
			s := d.setupNow()
			d.outbox.Horizon = s.server.NoticeHorizon
			n, err := d.outbox.Sweep(ctx, s.notifier)
			if err != nil && ctx.Err() == nil {
				d.log.Warn("read the notices owed to the webhooks", "err", err)
			}
			// Told only when it did something: a sweep that found nothing
			// owed (most) is no news, and its event would wake waiters in
			// the middle of the pass it runs beside.
			if n > 0 || err != nil {
				d.log.Debug("notices offered to the webhooks", "notices", n)
				d.event(Event{Kind: "outbox", Notices: n, Err: err})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.outboxCh:
		}
	}
}

// recordOutbox writes an outbox delivery's outcome to the ledger, and
// says whether it is done with it (a stop cut it short: it stays owed,
// nothing is journaled).
func (d *Daemon) recordOutbox(del notify.Delivery) (stopped bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.outbox.Done(ctx, del); err != nil {
		// Not recorded: the notice stays owed, and is sent again (under
		// the same delivery id) by whoever owns the runtime then.
		d.log.Warn("record a notice's delivery; it will be sent again", "event", del.Event.Event, "url", del.URL,
			"delivery", del.ID, "err", err)
	}
	if del.Stopped || d.outbox.Backlogged() {
		d.kickOutbox() // owed again (a reload's stop), or room in a full queue
	}
	if del.Stopped {
		d.log.Info("notice not delivered before the stop: it is sent after the next start", "event", del.Event.Event,
			"url", del.URL, "delivery", del.ID, "attempts", del.Attempts)
		d.event(Event{Kind: "delivery", Err: del.Err})
		return true
	}
	return false
}
