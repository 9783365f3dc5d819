package postgres

import (
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// TestSourceScopedReads: a replica's reads see its own sources' runtimes only.
func TestSourceScopedReads(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	mine := ledger.Key{Source: "host-a/dirs:/srv", Backend: "dir", ID: "r1"}
	theirs := ledger.Key{Source: "host-b/dirs:/srv", Backend: "dir", ID: "r1"}
	shared := ledger.Key{Source: "sandboxes", Backend: "e2b", ID: "s1"}
	var obs []ledger.Observation
	var acts []ledger.Activity
	for _, k := range []ledger.Key{mine, theirs, shared} {
		obs = append(obs, ledger.Observation{Key: k, State: "stopped", At: at})
		acts = append(acts, ledger.Activity{Key: k, At: at})
	}
	if err := s.Observe(ctx, obs); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordActivity(ctx, acts); err != nil {
		t.Fatal(err)
	}
	scope := []string{mine.Source, shared.Source}
	states, err := s.RuntimeStatesIn(ctx, scope)
	if err != nil || len(states) != 2 || states[mine] != "stopped" || states[shared] != "stopped" {
		t.Errorf("RuntimeStatesIn = %v, %v", states, err)
	}
	times, err := s.ActivityTimesIn(ctx, scope)
	if _, other := times[theirs]; err != nil || len(times) != 2 || other || !times[mine].Equal(at) {
		t.Errorf("ActivityTimesIn = %v, %v", times, err)
	}
	if none, err := s.RuntimeStatesIn(ctx, nil); err != nil || len(none) != 0 {
		t.Errorf("RuntimeStatesIn(nil) = %v, %v", none, err)
	}
}

// TestReplicas: heartbeats by the database's clock, one row a replica.
func TestReplicas(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	for _, r := range []Replica{{Name: "b", Version: "v1", API: "10.0.0.2:7390", Holder: "b#1"}, {Name: "a", Version: "v1", Holder: "a#1"}} {
		if err := s.Heartbeat(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	first, _, err := s.Replicas(ctx)
	if err != nil || len(first) != 2 || first[0].Name != "a" || first[1].API != "10.0.0.2:7390" {
		t.Fatalf("Replicas = %+v, %v", first, err)
	}
	// Again, and restarted under a new holder: a later heartbeat, and
	// for the restart a new start.
	if err := s.Heartbeat(ctx, Replica{Name: "a", Version: "v2", Holder: "a#1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(ctx, Replica{Name: "b", Version: "v2", Holder: "b#2"}); err != nil {
		t.Fatal(err)
	}
	second, now, err := s.Replicas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !second[0].StartedAt.Equal(first[0].StartedAt) || second[0].Version != "v2" || second[0].HeartbeatAt.Before(first[0].HeartbeatAt) {
		t.Errorf("a after a heartbeat: %+v (was %+v)", second[0], first[0])
	}
	if !second[1].StartedAt.After(first[1].StartedAt) {
		t.Errorf("b restarted: started %s, was %s", second[1].StartedAt, first[1].StartedAt)
	}
	if now.Before(second[1].HeartbeatAt) {
		t.Errorf("the database's now %s is before a heartbeat %s", now, second[1].HeartbeatAt)
	}
}
