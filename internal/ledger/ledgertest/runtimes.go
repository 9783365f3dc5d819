package ledgertest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

func testObserveAndGet(t *testing.T, s ledger.Store) {
	k := key("dir", "run-1")
	first := ledger.Observation{
		Key: k, State: "stopped", Home: "/runs/run-1/home",
		Workspaces: []string{"/runs/run-1/ws-a", "/runs/run-1/ws-b"},
		Labels:     map[string]string{"owner": "ann", "conversation": "c-42", "odd \"key\"": "back\\slash <&>\nnew line, 日本"},
		SizeBytes:  123456789, At: t0.In(elsewhere),
	}
	observe(t, s, first)
	got := getRuntime(t, s, k)
	// The engine relies on knowing a new runtime's record without reading it.
	mustEqual(t, "FirstRecord", got, first.FirstRecord())
	mustEqual(t, "first observation", got, ledger.RuntimeRecord{
		Key: k, State: "stopped", Home: "/runs/run-1/home",
		Workspaces: []string{"/runs/run-1/ws-a", "/runs/run-1/ws-b"},
		Labels:     map[string]string{"owner": "ann", "conversation": "c-42", "odd \"key\"": "back\\slash <&>\nnew line, 日本"},
		SizeBytes:  123456789, FirstSeen: t0, LastSeen: t0,
	})
	if got.FirstSeen.Location() != time.UTC || got.LastSeen.Location() != time.UTC {
		t.Fatalf("times not in UTC: %v, %v", got.FirstSeen.Location(), got.LastSeen.Location())
	}

	// A later pass sees it running, smaller, without labels or workspaces:
	// every observed field follows, FirstSeen stays.
	observe(t, s, ledger.Observation{Key: k, State: "running", Home: "/runs/run-1/home", SizeBytes: 1000, At: at(time.Minute)})
	mustEqual(t, "second observation", getRuntime(t, s, k), ledger.RuntimeRecord{
		Key: k, State: "running", Home: "/runs/run-1/home", SizeBytes: 1000,
		FirstSeen: t0, LastSeen: at(time.Minute),
	})
}

func testRuntimeNotFound(t *testing.T, s ledger.Store) {
	observe(t, s, ledger.Observation{Key: key("dir", "known"), State: "idle", At: t0})

	for _, k := range []ledger.Key{key("dir", "unknown"), key("worktree", "known")} {
		_, err := s.Runtime(ctx(t), k)
		mustBe(t, "Runtime "+k.String(), err, ledger.ErrNotFound)

		called := false
		_, err = s.Update(ctx(t), k, func(*ledger.RuntimeRecord) error { called = true; return nil })
		mustBe(t, "Update "+k.String(), err, ledger.ErrNotFound)
		if called {
			t.Fatalf("Update called fn for unknown runtime %s", k)
		}
	}
	if keys := listKeys(t, s, ledger.RuntimeFilter{}); len(keys) != 1 {
		t.Fatalf("Update of unknown runtimes created records: %v", keys)
	}
}

func testObserveKeepsEngineFields(t *testing.T, s ledger.Store) {
	k := key("worktree", "repo/feature-x")
	observe(t, s, ledger.Observation{Key: k, State: "idle", SizeBytes: 10, At: t0})
	retention := 72 * time.Hour
	decided, err := s.Update(ctx(t), k, func(r *ledger.RuntimeRecord) error {
		r.Pinned, r.PinReason = true, "git worktree lock: demo tomorrow"
		r.LeaseUntil = at(48 * time.Hour).In(elsewhere)
		r.RetentionOverride = &retention
		r.ScheduledStep, r.ScheduledDue, r.ScheduledAt = "archive", at(24*time.Hour), at(time.Second)
		r.ArchiveID = "arch-1"
		return nil
	})
	mustNil(t, "Update", err)

	// Passes go on observing; none of them may undo what was decided.
	for i := 1; i <= 3; i++ {
		observe(t, s, ledger.Observation{
			Key: k, State: "stopped", Home: "/home/x", Labels: map[string]string{"pass": "yes"},
			SizeBytes: int64(100 * i), At: at(time.Duration(i) * time.Minute),
		})
	}
	want := decided
	want.State, want.Home, want.Labels, want.SizeBytes = "stopped", "/home/x", map[string]string{"pass": "yes"}, 300
	want.LastSeen = at(3 * time.Minute)
	got := getRuntime(t, s, k)
	mustEqual(t, "after observations", got, want)
	if !got.Pinned || got.LeaseUntil.IsZero() || got.RetentionOverride == nil || *got.RetentionOverride != retention ||
		got.ScheduledStep != "archive" || got.ArchiveID != "arch-1" {
		t.Fatalf("engine fields lost: %+v", got)
	}
	if !got.LeaseUntil.Equal(at(48*time.Hour)) || got.LeaseUntil.Location() != time.UTC {
		t.Fatalf("LeaseUntil = %v, want %v in UTC", got.LeaseUntil, at(48*time.Hour))
	}
}

func testObserveWithoutStateKeepsState(t *testing.T, s ledger.Store) {
	k := key("docker", "c0ffee")
	observe(t, s, ledger.Observation{Key: k, State: "stopped", At: t0})
	_, err := s.Update(ctx(t), k, func(r *ledger.RuntimeRecord) error { r.State = "archived"; return nil })
	mustNil(t, "Update", err)

	observe(t, s, ledger.Observation{Key: k, SizeBytes: 5, At: at(time.Minute)})
	got := getRuntime(t, s, k)
	if got.State != "archived" || got.SizeBytes != 5 {
		t.Fatalf("got state %q size %d, want archived and 5", got.State, got.SizeBytes)
	}

	// A first observation without a state records it as empty.
	observe(t, s, ledger.Observation{Key: key("docker", "new"), At: t0})
	if got := getRuntime(t, s, key("docker", "new")); got.State != "" {
		t.Fatalf("new runtime state %q, want empty", got.State)
	}
}

func testOlderObservationIgnored(t *testing.T, s ledger.Store) {
	k := key("e2b", "sbx-1")
	newer := ledger.Observation{Key: k, State: "running", Home: "/new", SizeBytes: 2, At: at(time.Hour)}
	observe(t, s, newer)
	want := getRuntime(t, s, k)

	// A late writer with an older observation cannot roll the record back.
	observe(t, s, ledger.Observation{Key: k, State: "stopped", Home: "/old", SizeBytes: 1, At: t0})
	mustEqual(t, "after older observation", getRuntime(t, s, k), want)

	// Observing the same thing again is harmless.
	observe(t, s, newer)
	mustEqual(t, "after repeated observation", getRuntime(t, s, k), want)
}

func testObserveBatchIsAtomic(t *testing.T, s ledger.Store) {
	err := s.Observe(ctx(t), []ledger.Observation{
		{Key: key("dir", "good"), State: "idle", At: t0},
		{Key: key("dir", ""), State: "idle", At: t0},
	})
	mustFail(t, "Observe with an empty id", err)
	if keys := listKeys(t, s, ledger.RuntimeFilter{}); len(keys) != 0 {
		t.Fatalf("a failed batch left %v behind", keys)
	}
	mustNil(t, "empty batch", s.Observe(ctx(t), nil))
}

// fleet is a mix of backends, states, and IDs that sort differently as bytes
// than as numbers or ignoring case: the order is bytewise (Key.Compare).
var fleet = []struct {
	key   ledger.Key
	state string
}{
	{key("dir", "B"), "idle"},
	{key("dir", "a"), "stopped"},
	{key("dir", "b"), "running"},
	{key("dir", "b0"), "stopped"},
	{key("dir", "b10"), "idle"},
	{key("dir", "b2"), "stopped"},
	{key("docker", "a"), "stopped"},
	{key("docker", "z"), "running"},
	{key("e2b", "sbx"), "stopped"},
	{key("worktree", "repo/a"), "idle"},
	{key("worktree", "repo/b"), "stopped"},
}

func observeFleetShuffled(t *testing.T, s ledger.Store) []ledger.Key {
	t.Helper()
	var obs []ledger.Observation
	var want []ledger.Key
	for _, f := range fleet {
		obs = append(obs, ledger.Observation{Key: f.key, State: f.state, At: t0})
		want = append(want, f.key)
	}
	rand.Shuffle(len(obs), func(i, j int) { obs[i], obs[j] = obs[j], obs[i] })
	// Two batches, so the store cannot rely on one insertion order.
	observe(t, s, obs[:4]...)
	observe(t, s, obs[4:]...)
	return want
}

func testListOrderAndFilter(t *testing.T, s ledger.Store) {
	all := observeFleetShuffled(t, s)
	if !slices.IsSortedFunc(all, ledger.Key.Compare) {
		t.Fatalf("fleet is not in Key.Compare order: %v", all)
	}
	mustEqual(t, "all", listKeys(t, s, ledger.RuntimeFilter{}), all)

	mustEqual(t, "backend dir", listKeys(t, s, ledger.RuntimeFilter{Backend: "dir"}),
		[]ledger.Key{key("dir", "B"), key("dir", "a"), key("dir", "b"), key("dir", "b0"), key("dir", "b10"), key("dir", "b2")})
	mustEqual(t, "state stopped", listKeys(t, s, ledger.RuntimeFilter{State: "stopped"}),
		[]ledger.Key{key("dir", "a"), key("dir", "b0"), key("dir", "b2"), key("docker", "a"), key("e2b", "sbx"), key("worktree", "repo/b")})
	mustEqual(t, "dir and stopped", listKeys(t, s, ledger.RuntimeFilter{Backend: "dir", State: "stopped"}),
		[]ledger.Key{key("dir", "a"), key("dir", "b0"), key("dir", "b2")})
	mustEqual(t, "unknown backend", listKeys(t, s, ledger.RuntimeFilter{Backend: "modal"}), []ledger.Key{})
	mustEqual(t, "unknown state", listKeys(t, s, ledger.RuntimeFilter{State: "archived"}), []ledger.Key{})

	rs, err := s.ListRuntimes(ctx(t), ledger.RuntimeFilter{State: "running"})
	mustNil(t, "ListRuntimes running", err)
	for _, r := range rs {
		if r.State != "running" || !r.LastSeen.Equal(t0) {
			t.Fatalf("listed record %+v, want state running, last seen %v", r, t0)
		}
	}
}

func testPagination(t *testing.T, s ledger.Store) {
	all := observeFleetShuffled(t, s) // 11 runtimes

	for _, limit := range []int{1, 3, 5, 10, 11, 12} {
		var got []ledger.Key
		var sizes []int
		after := ledger.Key{}
		for page := 0; ; page++ {
			if page > len(all)+1 {
				t.Fatalf("limit %d: pagination does not end", limit)
			}
			keys := listKeys(t, s, ledger.RuntimeFilter{After: after, Limit: limit})
			if len(keys) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(keys))
			}
			if len(keys) == 0 {
				break
			}
			sizes = append(sizes, len(keys))
			got = append(got, keys...)
			after = keys[len(keys)-1]
		}
		mustEqual(t, "pages joined", got, all)
		for i, n := range sizes[:len(sizes)-1] {
			if n != limit {
				t.Fatalf("limit %d: page %d has %d", limit, i, n)
			}
		}
	}

	// The cursor need not be a recorded key; filters combine with it.
	mustEqual(t, "after a gap", listKeys(t, s, ledger.RuntimeFilter{After: key("dir", "b1"), Limit: 2}),
		[]ledger.Key{key("dir", "b10"), key("dir", "b2")})
	mustEqual(t, "after with backend", listKeys(t, s, ledger.RuntimeFilter{Backend: "dir", After: key("dir", "b2")}),
		[]ledger.Key{})
	mustEqual(t, "after with state", listKeys(t, s, ledger.RuntimeFilter{State: "stopped", After: key("dir", "b2"), Limit: 2}),
		[]ledger.Key{key("docker", "a"), key("e2b", "sbx")})
	mustEqual(t, "after the last", listKeys(t, s, ledger.RuntimeFilter{After: all[len(all)-1]}), []ledger.Key{})
}

func testUpdateSetsAndClears(t *testing.T, s ledger.Store) {
	k := key("dir", "run-7")
	observe(t, s, ledger.Observation{Key: k, State: "idle", Labels: map[string]string{"a": "1"}, At: t0})

	retention := 14 * 24 * time.Hour
	set, err := s.Update(ctx(t), k, func(r *ledger.RuntimeRecord) error {
		r.State = "scheduled"
		r.Pinned, r.PinReason = true, "user pinned"
		r.LeaseUntil = at(time.Hour)
		r.RetentionOverride = &retention
		r.ScheduledStep, r.ScheduledDue, r.ScheduledAt = "delete", at(2*time.Hour), at(time.Minute)
		r.ArchiveID = "arch-7"
		r.Conversations = []string{"conv-1", "conv-2"}
		r.RegisteredAt, r.ReleasedAt = at(3*time.Minute), at(4*time.Minute)
		r.AgentServerURL = "http://10.0.0.7:8000"
		r.Labels["b"] = "2"
		return nil
	})
	mustNil(t, "Update set", err)
	mustEqual(t, "Update returns what Runtime reads", set, getRuntime(t, s, k))
	mustEqual(t, "after set", set, ledger.RuntimeRecord{
		Key: k, State: "scheduled", Labels: map[string]string{"a": "1", "b": "2"},
		FirstSeen: t0, LastSeen: t0,
		Pinned: true, PinReason: "user pinned", LeaseUntil: at(time.Hour), RetentionOverride: ptr(retention),
		ScheduledStep: "delete", ScheduledDue: at(2 * time.Hour), ScheduledAt: at(time.Minute), ArchiveID: "arch-7",
		Conversations: []string{"conv-1", "conv-2"}, RegisteredAt: at(3 * time.Minute), ReleasedAt: at(4 * time.Minute),
		AgentServerURL: "http://10.0.0.7:8000",
	})
	mustEqual(t, "registered runtime counts as decided", listKeys(t, s, ledger.RuntimeFilter{Decided: true}), []ledger.Key{k})
	mustEqual(t, "listed by new state", listKeys(t, s, ledger.RuntimeFilter{State: "scheduled"}), []ledger.Key{k})

	// Zero values mean "none" and must read back as none.
	cleared, err := s.Update(ctx(t), k, func(r *ledger.RuntimeRecord) error {
		r.State = "idle"
		r.Pinned, r.PinReason = false, ""
		r.LeaseUntil = time.Time{}
		r.RetentionOverride = nil
		r.ScheduledStep, r.ScheduledDue, r.ScheduledAt = "", time.Time{}, time.Time{}
		r.Conversations, r.RegisteredAt, r.ReleasedAt = []string{}, time.Time{}, time.Time{}
		r.AgentServerURL = ""
		return nil
	})
	mustNil(t, "Update clear", err)
	mustEqual(t, "after clear", getRuntime(t, s, k), cleared)
	mustEqual(t, "after clear", cleared, ledger.RuntimeRecord{
		Key: k, State: "idle", Labels: map[string]string{"a": "1", "b": "2"},
		FirstSeen: t0, LastSeen: t0, ArchiveID: "arch-7",
	})

	// A zero retention override is a real value ("keep nothing"), not "none".
	_, err = s.Update(ctx(t), k, func(r *ledger.RuntimeRecord) error { r.RetentionOverride = ptr(time.Duration(0)); return nil })
	mustNil(t, "Update zero retention", err)
	if got := getRuntime(t, s, k).RetentionOverride; got == nil || *got != 0 {
		t.Fatalf("RetentionOverride = %v, want pointer to 0", got)
	}
}

func testUpdateWritesNothingOnError(t *testing.T, s ledger.Store) {
	k := key("dir", "run-8")
	observe(t, s, ledger.Observation{Key: k, State: "idle", At: t0})
	before := getRuntime(t, s, k)

	refused := errors.New("policy refused")
	_, err := s.Update(ctx(t), k, func(r *ledger.RuntimeRecord) error {
		r.Pinned = true
		r.State = "archived"
		return refused
	})
	mustBe(t, "Update returning an error", err, refused)
	mustEqual(t, "after failed update", getRuntime(t, s, k), before)

	_, err = s.Update(ctx(t), k, func(r *ledger.RuntimeRecord) error {
		r.Key.ID = "someone-else"
		r.Pinned = true
		return nil
	})
	mustFail(t, "Update changing the key", err)
	mustEqual(t, "after key change", getRuntime(t, s, k), before)
	if _, err := s.Runtime(ctx(t), key("dir", "someone-else")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("key change created a record: %v", err)
	}
}

// testStatesAndDecided: RuntimeStates gives every runtime's state; the
// Decided filter lists exactly the runtimes with an engine-owned field set,
// and a runtime whose decisions were all cleared drops out again.
func testStatesAndDecided(t *testing.T, s ledger.Store) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	plain, pinned, leased, kept, scheduled, archived, cleared :=
		key("dir", "plain"), key("dir", "pinned"), key("dir", "leased"), key("dir", "kept"),
		key("worktree", "scheduled"), key("worktree", "archived"), key("worktree", "cleared")
	var obs []ledger.Observation
	for _, k := range []ledger.Key{plain, pinned, leased, kept, scheduled, archived, cleared} {
		obs = append(obs, ledger.Observation{Key: k, State: "stopped", At: at})
	}
	obs[0].State = "running"
	observe(t, s, obs...)
	week := 7 * 24 * time.Hour
	for k, fn := range map[ledger.Key]func(*ledger.RuntimeRecord){
		pinned: func(r *ledger.RuntimeRecord) { r.Pinned = true },
		leased: func(r *ledger.RuntimeRecord) { r.LeaseUntil = at.Add(time.Hour) },
		kept:   func(r *ledger.RuntimeRecord) { r.RetentionOverride = &week },
		scheduled: func(r *ledger.RuntimeRecord) {
			r.ScheduledStep, r.ScheduledAt, r.ScheduledDue = "archive", at, at.Add(time.Hour)
		},
		archived: func(r *ledger.RuntimeRecord) { r.ArchiveID = "a1" },
		cleared:  func(r *ledger.RuntimeRecord) { r.Pinned = true },
	} {
		_, err := s.Update(ctx(t), k, func(r *ledger.RuntimeRecord) error { fn(r); return nil })
		mustNil(t, "Update "+k.String(), err)
	}
	_, err := s.Update(ctx(t), cleared, func(r *ledger.RuntimeRecord) error { r.Pinned = false; return nil })
	mustNil(t, "Update cleared", err)

	states, err := s.RuntimeStates(ctx(t))
	mustNil(t, "RuntimeStates", err)
	mustEqual(t, "states", states, map[ledger.Key]string{plain: "running", pinned: "stopped", leased: "stopped",
		kept: "stopped", scheduled: "stopped", archived: "stopped", cleared: "stopped"})
	mustEqual(t, "decided", listKeys(t, s, ledger.RuntimeFilter{Decided: true}),
		[]ledger.Key{kept, leased, pinned, archived, scheduled})
	mustEqual(t, "decided in one backend", listKeys(t, s, ledger.RuntimeFilter{Decided: true, Backend: "worktree"}),
		[]ledger.Key{archived, scheduled})
}

// testSourcesAreDistinct: two sources of one backend may both have a
// runtime "dev"; their keys differ by source, and nothing written for one
// (a pin, activity, a hold, the path) reads back for the other. A source
// filter lists one source's runtimes, and the order is backend, source, ID.
func testSourcesAreDistinct(t *testing.T, s ledger.Store) {
	a := ledger.Key{Source: "http:https://a.example", Backend: "http", ID: "dev"}
	b := ledger.Key{Source: "http:https://b.example", Backend: "http", ID: "dev"}
	if err := s.Observe(ctx(t), []ledger.Observation{
		{Key: b, State: "running", Path: "", At: at(0)},
		{Key: a, State: "stopped", Path: "/srv/a/dev", At: at(0)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx(t), a, func(r *ledger.RuntimeRecord) error { r.Pinned = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordActivity(ctx(t), []ledger.Activity{{Key: a, At: at(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeHold(ctx(t), ledger.HoldRequest{Key: a, Holder: "h", TTL: time.Hour, Now: at(0)}); err != nil {
		t.Fatal(err)
	}
	rb, err := s.Runtime(ctx(t), b)
	if err != nil || rb.Pinned || rb.State != "running" || rb.Path != "" {
		t.Fatalf("b after writes to a: %+v, %v", rb, err)
	}
	if ra, err := s.Runtime(ctx(t), a); err != nil || ra.Path != "/srv/a/dev" || !ra.Pinned {
		t.Fatalf("a: %+v, %v", ra, err)
	}
	if _, err := s.LastActivity(ctx(t), b); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("activity of b: %v, want not found", err)
	}
	if hs, err := s.ListHolds(ctx(t), ledger.HoldFilter{Key: b, Now: at(0)}); err != nil || len(hs) != 0 {
		t.Fatalf("holds of b: %v, %v", hs, err)
	}
	list, err := s.ListRuntimes(ctx(t), ledger.RuntimeFilter{})
	if err != nil || len(list) != 2 || list[0].Key != a || list[1].Key != b {
		t.Fatalf("order: %+v, %v", list, err)
	}
	only, err := s.ListRuntimes(ctx(t), ledger.RuntimeFilter{Source: b.Source})
	if err != nil || len(only) != 1 || only[0].Key != b {
		t.Fatalf("source filter: %+v, %v", only, err)
	}
	page, err := s.ListRuntimes(ctx(t), ledger.RuntimeFilter{After: a})
	if err != nil || len(page) != 1 || page[0].Key != b {
		t.Fatalf("after a: %+v, %v", page, err)
	}
}
