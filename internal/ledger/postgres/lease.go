package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger"
)

// The leases of package leader, in the table leader_leases (see
// migrations/0001_init.sql), with the rules of leader.Table. Every time is
// the server's (reclaimer_clock), so replicas' clocks never count.

var _ leader.Lessor = (*Store)(nil)

// resignChannel is what Resign notifies and Resignations listens on; the
// payload is the lease's name.
const resignChannel = "reclaimer_leader"

const leaseColumns = `name, holder, generation, elected_at, expires_at`

func scanLease(row pgx.Row) (leader.Lease, error) {
	var (
		l                    leader.Lease
		electedAt, expiresAt int64
	)
	if err := row.Scan(&l.Name, &l.Holder, &l.Generation, &electedAt, &expiresAt); err != nil {
		return leader.Lease{}, err
	}
	l.ElectedAt, l.ExpiresAt = utc(electedAt), utc(expiresAt)
	return l, nil
}

// Elect implements leader.Lessor: delete the row if it expired, then
// insert ours unless another is there (River's elector, plus a generation
// from a sequence).
func (s *Store) Elect(ctx context.Context, name, holder string, ttl time.Duration) (leader.Lease, bool, error) {
	var (
		l   leader.Lease
		won bool
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM leader_leases WHERE name = $1 AND expires_at <= reclaimer_clock()`, name); err != nil {
			return err
		}
		var err error
		l, err = scanLease(tx.QueryRow(ctx, `INSERT INTO leader_leases (`+leaseColumns+`)
			SELECT $1, $2, nextval('leader_generation'), c, c + $3 FROM reclaimer_clock() AS c
			ON CONFLICT (name) DO NOTHING
			RETURNING `+leaseColumns, name, holder, ttl.Nanoseconds()))
		if err == nil {
			won = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// Another's: read it (a statement of its own sees the row the
		// insert ran into). Gone again meanwhile: no lease to report.
		l, err = scanLease(tx.QueryRow(ctx, `SELECT `+leaseColumns+` FROM leader_leases WHERE name = $1`, name))
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
		return err
	})
	if err != nil {
		return leader.Lease{}, false, fmt.Errorf("elect %s: %w", name, err)
	}
	return l, won, nil
}

// Renew implements leader.Lessor.
func (s *Store) Renew(ctx context.Context, l leader.Lease, ttl time.Duration) (leader.Lease, error) {
	renewed, err := scanLease(s.db.QueryRow(ctx, `UPDATE leader_leases SET expires_at = reclaimer_clock() + $4
		WHERE name = $1 AND holder = $2 AND generation = $3 AND expires_at > reclaimer_clock()
		RETURNING `+leaseColumns, l.Name, l.Holder, l.Generation, ttl.Nanoseconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		err = ledger.ErrFenced
	}
	if err != nil {
		return leader.Lease{}, fmt.Errorf("renew %s: %w", l, err)
	}
	return renewed, nil
}

// Resign implements leader.Lessor: the row goes, and the NOTIFY reaches
// the listeners when the transaction commits.
func (s *Store) Resign(ctx context.Context, l leader.Lease) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM leader_leases WHERE name = $1 AND generation = $2`, l.Name, l.Generation)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, resignChannel, l.Name)
		return err
	})
	if err != nil {
		return fmt.Errorf("resign %s: %w", l, err)
	}
	return nil
}

// Current implements leader.Lessor.
func (s *Store) Current(ctx context.Context, name string) (leader.Lease, error) {
	l, err := scanLease(s.db.QueryRow(ctx, `SELECT `+leaseColumns+` FROM leader_leases WHERE name = $1`, name))
	if err != nil {
		return leader.Lease{}, fmt.Errorf("lease %s: %w", name, notFound(err))
	}
	return l, nil
}

// listenRetry is how long Resignations waits before connecting again.
const listenRetry = time.Second

// Resignations implements leader.Lessor with LISTEN on a connection of
// its own (outside the pool: it is held for as long as ctx lasts), made
// again after an error. Notifications missed while it reconnects are
// lost; the elector's own timer covers them.
func (s *Store) Resignations(ctx context.Context) <-chan string {
	ch := make(chan string, 1)
	if s.pool == nil {
		close(ch)
		return ch
	}
	go func() {
		defer close(ch)
		for ctx.Err() == nil {
			s.listen(ctx, ch) // until the connection breaks: then again, shortly
			t := time.NewTimer(listenRetry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return ch
}

func (s *Store) listen(ctx context.Context, ch chan<- string) {
	conn, err := pgx.ConnectConfig(ctx, s.url.ConnConfig.Copy())
	if err != nil {
		return
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, `LISTEN `+resignChannel); err != nil {
		return
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		select {
		case ch <- n.Payload:
		default: // one is pending already: the elector wakes for it anyway
		}
	}
}
