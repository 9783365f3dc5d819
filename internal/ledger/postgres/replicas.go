package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Replica is one replica of a fleet as it last reported itself.
type Replica struct {
	Name    string
	Version string
	// API is where its API listens ([server] listen), as configured.
	API string
	// Holder is the name it takes the leadership lease under.
	Holder      string
	StartedAt   time.Time // by the database's clock
	HeartbeatAt time.Time // by the database's clock
}

// Heartbeat records that replica r is alive, now by the database's clock
// (StartedAt and HeartbeatAt of r are ignored; a replica that restarts
// under its name gets a new StartedAt when its holder changed).
func (s *Store) Heartbeat(ctx context.Context, r Replica) error {
	_, err := s.db.Exec(ctx, `INSERT INTO replicas (name, version, api, holder, started_at, heartbeat_at)
		SELECT $1, $2, $3, $4, c, c FROM reclaimer_clock() AS c
		ON CONFLICT (name) DO UPDATE SET version = EXCLUDED.version, api = EXCLUDED.api, holder = EXCLUDED.holder,
			heartbeat_at = EXCLUDED.heartbeat_at,
			started_at = CASE WHEN replicas.holder = EXCLUDED.holder THEN replicas.started_at ELSE EXCLUDED.started_at END`,
		r.Name, r.Version, r.API, r.Holder)
	if err != nil {
		return fmt.Errorf("heartbeat of %s: %w", r.Name, err)
	}
	return nil
}

// Replicas lists every replica that ever reported, by name, and the
// database's time now (to judge the heartbeats by).
func (s *Store) Replicas(ctx context.Context) ([]Replica, time.Time, error) {
	var now int64
	if err := s.db.QueryRow(ctx, `SELECT reclaimer_clock()`).Scan(&now); err != nil {
		return nil, time.Time{}, fmt.Errorf("list replicas: %w", err)
	}
	out, err := collect(ctx, s.db, func(row pgx.Row) (Replica, error) {
		var (
			r            Replica
			started, hbt int64
		)
		err := row.Scan(&r.Name, &r.Version, &r.API, &r.Holder, &started, &hbt)
		r.StartedAt, r.HeartbeatAt = utc(started), utc(hbt)
		return r, err
	}, `SELECT name, version, api, holder, started_at, heartbeat_at FROM replicas ORDER BY name`)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list replicas: %w", err)
	}
	return out, utc(now), nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if s.pool == nil {
		return fmt.Errorf("ping: %w", errInView)
	}
	return s.pool.Ping(ctx)
}
