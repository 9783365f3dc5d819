package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ops"
)

// A daemon in a fleet ([ledger] url): its ledger is PostgreSQL, shared by
// every replica. It takes part in the election of the leader of the
// remote sources (package leader; the application layer acts on them
// only under its term), says it is alive in the replicas table, and
// notices when PostgreSQL stops answering: it then skips its passes (no
// action can be journaled, so none could start), says so once, and
// resumes when the database answers again.
type fleetRole struct {
	pg      *postgres.Store
	elector *leader.Elector
	name    string
	lease   time.Duration
	listen  string

	up atomic.Bool // the ledger answered the last heartbeat

	mu           sync.Mutex
	last         leader.Status // as last told by the elector
	recoveredGen int64         // the term whose start recovered the leader's entries
}

// openFleet opens the PostgreSQL ledger and the elector of cfg.
func (d *Daemon) openFleet(ctx context.Context, cfg *config.Config) (*fleetRole, error) {
	st, err := ops.OpenLedger(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pg := st.(*postgres.Store)
	ss := cfg.ServerSettings()
	f := &fleetRole{pg: pg, name: ss.Name, lease: ss.LeaderLease, listen: ss.Listen}
	f.up.Store(true)
	f.elector, err = leader.New(leader.Config{Lessor: pg, Lease: ops.RemoteLease, Replica: ss.Name, TTL: ss.LeaderLease,
		OnChange: d.onLeaderChange, Logger: d.log})
	if err != nil {
		pg.Close()
		return nil, err
	}
	d.log.Info("fleet replica", "replica", ss.Name, "ledger", cfg.RedactedLedgerURL(), "leader_lease", ss.LeaderLease.String(),
		"max_connections", pg.MaxConns()+1)
	return f, nil
}

// lead is the application layer's view of the leadership.
func (f *fleetRole) lead() (*leader.Term, bool) { return f.elector.Term() }

// onLeaderChange counts and shows each change of who leads, and starts a
// pass at once when this replica begins to lead (the remote sources'
// work does not wait for the next interval).
func (d *Daemon) onLeaderChange(s leader.Status) {
	f := d.fleet
	if f == nil {
		return
	}
	f.mu.Lock()
	prev := f.last
	f.last = s
	f.mu.Unlock()
	if s.Leading {
		d.metrics.leader.Set(1)
	} else {
		d.metrics.leader.Set(0)
	}
	if s.Leading != prev.Leading || (s.Lease.Generation != 0 && s.Lease.Generation != prev.Lease.Generation) {
		d.metrics.leaderChanges.Inc()
	}
	if s.Leading && !prev.Leading {
		select {
		case d.fullCh <- struct{}{}:
		default:
		}
	}
	d.event(Event{Kind: "leader"})
}

// heartbeats writes this replica's row every third of the lease, until
// ctx ends, and tracks whether the ledger answers.
func (d *Daemon) heartbeats(ctx context.Context) {
	f := d.fleet
	every := f.lease / 3
	for {
		hctx, cancel := context.WithTimeout(ctx, every)
		err := f.pg.Heartbeat(hctx, postgres.Replica{Name: f.name, Version: d.opts.Version, API: f.listen, Holder: f.elector.Holder()})
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && f.up.Swap(false):
			d.log.Error("the ledger (PostgreSQL) does not answer: passes are paused until it does, and the leadership lapses with its lease",
				"err", err)
			d.event(Event{Kind: "ledger", Err: err})
		case err == nil && !f.up.Swap(true):
			d.log.Info("the ledger (PostgreSQL) answers again: passes resume")
			d.event(Event{Kind: "ledger"})
			select {
			case d.fullCh <- struct{}{}:
			default:
			}
		}
		t := d.clock.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// ledgerDown reports whether a fleet's ledger did not answer the last
// heartbeat.
func (d *Daemon) ledgerDown() bool { return d.fleet != nil && !d.fleet.up.Load() }

// recoverLeaderEntries finishes, once per term, what an earlier leader
// left half done on the remote sources (its journal entries without an
// outcome): the engine recovers only a leader's entries while it leads.
func (d *Daemon) recoverLeaderEntries(ctx context.Context) {
	f := d.fleet
	if f == nil {
		return
	}
	t, ok := f.lead()
	if !ok {
		return
	}
	gen := t.Lease().Generation
	f.mu.Lock()
	done := f.recoveredGen == gen
	f.mu.Unlock()
	if done {
		return
	}
	n, err := d.app.Engine().Recover(ctx)
	if err != nil {
		d.log.Warn("recover what the previous leader left half done", "err", err)
		return
	}
	f.mu.Lock()
	f.recoveredGen = gen
	f.mu.Unlock()
	if n > 0 {
		d.log.Info("recovered what a crash left half done", "entries", n, "generation", gen)
	}
}
