package ops

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/sources"
	"github.com/reclaimer/reclaimer/internal/views"
)

// RemoteLease is the name of the leadership lease of the remote sources.
const RemoteLease = "remote"

// CatNotLeader: a request for the remote sources reached a replica that
// does not lead them; the answer says which does (421 Misdirected
// Request: ask that one).
var CatNotLeader = Category{"not_leader", http.StatusMisdirectedRequest, 1}

// NotLeaderError answers a request only the leader can serve.
type NotLeaderError struct {
	// What was asked.
	What string
	// Leader is the leading replica (empty while nobody leads), its API
	// where it listens, Generation its lease's.
	Leader     string
	API        string
	Generation int64
}

func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return fmt.Sprintf("%s: the remote sources are acted on by the fleet's leader, and no replica leads right now; retry in a few seconds", e.What)
	}
	api := ""
	if e.API != "" {
		api = ", its API at " + e.API
	}
	return fmt.Sprintf("%s: the remote sources are acted on by the fleet's leader, %s (generation %d%s): ask it", e.What, e.Leader, e.Generation, api)
}

// Category implements categorized.
func (e *NotLeaderError) Category() Category { return CatNotLeader }

// ReplicaOfHolder is the replica name of a lease holder ("host-a#x1y2").
func ReplicaOfHolder(holder string) string {
	name, _, _ := strings.Cut(holder, "#")
	return name
}

// fleetStore is the PostgreSQL store of a fleet, nil outside one.
func (a *App) fleetStore() *postgres.Store {
	if a.pg != nil {
		return a.pg
	}
	pg, _ := a.store.(*postgres.Store)
	return pg
}

// Fleet is the fleet's replicas and leader, nil outside a fleet.
func (a *App) Fleet(ctx context.Context) (*views.Fleet, error) {
	s := a.setupNow()
	pg := a.fleetStore()
	if !s.cfg.Fleet() || pg == nil {
		return nil, nil
	}
	ss := s.cfg.ServerSettings()
	f := &views.Fleet{Replica: ss.Name, Leading: s.engine.Leads(), Replicas: []views.Replica{}}
	l, err := pg.Current(ctx, RemoteLease)
	switch {
	case err == nil:
		f.Leader, f.Generation, f.LeaderSince, f.LeaseExpiresAt = ReplicaOfHolder(l.Holder), l.Generation, l.ElectedAt, l.ExpiresAt
	case !errors.Is(err, ledger.ErrNotFound):
		return nil, err
	}
	rs, now, err := pg.Replicas(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		v := views.Replica{Name: r.Name, Version: r.Version, API: r.API, StartedAt: r.StartedAt, LastHeartbeat: r.HeartbeatAt,
			Alive: now.Sub(r.HeartbeatAt) < 2*ss.LeaderLease, Leader: f.Leader == r.Name && l.Holder == r.Holder}
		if v.Leader {
			f.LeaderAPI = r.API
		}
		f.Replicas = append(f.Replicas, v)
	}
	return f, nil
}

// notLeading is the error of a request for the remote sources on a
// follower, naming the leader.
func (a *App) notLeading(ctx context.Context, what string) error {
	e := &NotLeaderError{What: what}
	if f, err := a.Fleet(ctx); err == nil && f != nil {
		e.Leader, e.API, e.Generation = f.Leader, f.LeaderAPI, f.Generation
	}
	return e
}

// sharedOnFollower returns the keys of keys whose source only the leader
// acts on, while this replica does not lead.
func (a *App) sharedOnFollower(keys []backend.Key) []backend.Key {
	s := a.setupNow()
	if !s.cfg.Fleet() || s.engine.Leads() {
		return nil
	}
	var out []backend.Key
	for _, k := range keys {
		if src, ok := s.sourceOf(k.Source); ok && src.Shared {
			out = append(out, k)
		}
	}
	return out
}

// followerMessages say, in a follower's plan, that the remote sources
// were left to the leader, and which one leads.
func (a *App) followerMessages(ctx context.Context) []string {
	s := a.setupNow()
	if !s.cfg.Fleet() || s.engine.Leads() {
		return nil
	}
	var labels []string
	for _, src := range s.sources {
		if src.Shared {
			labels = append(labels, src.Label)
		}
	}
	if len(labels) == 0 {
		return nil
	}
	return []string{a.notLeading(ctx, "left alone: "+strings.Join(labels, ", ")).Error()}
}

// isReplicaSource tells a fleet replica's local source name
// ("host-b/dirs:/srv/runs").
func isReplicaSource(name string) bool {
	_, ok := sources.ReplicaOf(name)
	return ok
}
