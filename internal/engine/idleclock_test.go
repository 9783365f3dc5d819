package engine_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// machines is a backend of running machines that can be suspended; the
// backend itself knows some machines' agent-servers (as Docker's labelled
// port or OpenHands Cloud's exposed URL give them).
type machines struct {
	mu   sync.Mutex
	rts  map[string]backend.Runtime
	sent []string // suspended
}

func (m *machines) Name() string { return "machine" }

func (m *machines) List(_ context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []backend.Runtime
	for id, rt := range m.rts {
		if len(opts.IDs) > 0 && !contains(opts.IDs, id) {
			continue
		}
		rt.Fingerprint = string(rt.State) + "@" + rt.LastActivity.String()
		out = append(out, rt)
	}
	return out, nil
}

func (m *machines) Suspend(_ context.Context, rt backend.Runtime, _ backend.SuspendOptions) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rts[rt.ID]
	if !ok {
		return backend.ErrNotFound
	}
	r.State = backend.StateSuspended
	m.rts[rt.ID] = r
	m.sent = append(m.sent, rt.ID)
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestIdleClockThroughTheEngine: a running runtime's agent-server idle clock
// is its last activity at each pass, whether the backend knows the server
// or a host registered its URL; reading it records no activity, a runtime
// that is not running is never contacted, and a clock that cannot be read
// keeps the runtime (busy).
func TestIdleClockThroughTheEngine(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	clock := fakes.NewClock(t0)
	old := t0.Add(-3 * time.Hour) // what the backend alone would say
	// The backend knows this one's server (with its session key); the
	// agent worked 5 minutes ago: not idle.
	busyAgent := fakes.NewAgentServer(t, "sess-0123456789", clock.Now, t0.Add(-5*time.Minute))
	// Registered by a host: idle for 2 hours.
	idleAgent := fakes.NewAgentServer(t, "", clock.Now, t0.Add(-2*time.Hour))
	// Registered, recently active.
	activeAgent := fakes.NewAgentServer(t, "", clock.Now, t0.Add(-time.Minute))
	// Registered, but its runtime is suspended: a read fails the test.
	sleeping := fakes.NewAgentServer(t, "", clock.Now, t0.Add(-time.Minute))
	sleeping.SetRunning(false)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing answers there

	m := &machines{rts: map[string]backend.Runtime{
		"known":      {Key: backend.Key{Backend: "machine", ID: "known"}, State: backend.StateRunning, LastActivity: old, AgentServer: &backend.AgentServer{URL: busyAgent.URL, SessionKey: "sess-0123456789"}},
		"idle":       {Key: backend.Key{Backend: "machine", ID: "idle"}, State: backend.StateRunning, LastActivity: old},
		"active":     {Key: backend.Key{Backend: "machine", ID: "active"}, State: backend.StateRunning, LastActivity: old},
		"asleep":     {Key: backend.Key{Backend: "machine", ID: "asleep"}, State: backend.StateSuspended, LastActivity: old},
		"unreadable": {Key: backend.Key{Backend: "machine", ID: "unreadable"}, State: backend.StateRunning, LastActivity: old},
		"plain":      {Key: backend.Key{Backend: "machine", ID: "plain"}, State: backend.StateRunning, LastActivity: old},
	}}
	const src = "machines"
	eng, store := fakes.Engine(t, clock, engine.Source{Name: src, Backend: m, Settings: policy.Settings{IdleSuspend: 30 * time.Minute}})
	ctx := context.Background()
	register := func(id, url string) {
		k := backend.Key{Source: src, Backend: "machine", ID: id}
		if err := store.Observe(ctx, []ledger.Observation{{Key: k, SizeBytes: -1, At: t0}}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Update(ctx, k, func(r *ledger.RuntimeRecord) error {
			r.RegisteredAt, r.AgentServerURL = t0, url
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	register("idle", idleAgent.URL)
	register("active", activeAgent.URL)
	register("asleep", sleeping.URL)
	register("unreadable", gone.URL)

	p, res := fakes.Pass(t, eng)
	got := map[string]backend.Step{}
	for _, a := range p.Actions {
		got[a.Runtime] = a.Step
	}
	if got["idle"] != backend.StepSuspend || got["plain"] != backend.StepSuspend {
		t.Errorf("idle past idle_suspend by their clocks, not suspended: %v", got)
	}
	for _, id := range []string{"known", "active", "unreadable", "asleep"} {
		if _, ok := got[id]; ok {
			t.Errorf("%s: planned %s", id, got[id])
		}
	}
	if r := fakes.Outcome(res, "idle"); r.Outcome != plan.Done {
		t.Errorf("idle: %+v", r)
	}
	// The unreadable clock fails closed: busy, with the reason.
	w, err := eng.Observe(ctx, engine.ObserveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range w.Runtimes {
		switch s.Runtime.ID {
		case "unreadable":
			if s.Runtime.Busy == "" {
				t.Error("an unreadable idle clock did not make the runtime busy")
			}
		case "known":
			if !s.LastActive().Equal(t0.Add(-5 * time.Minute)) {
				t.Errorf("known: last active %v, want the clock's", s.LastActive())
			}
		case "active":
			if !s.LastActive().Equal(t0.Add(-time.Minute)) {
				t.Errorf("active: last active %v, want the clock's", s.LastActive())
			}
		}
	}
	// Reading the clock is not activity: nothing was reported.
	for _, id := range []string{"known", "active"} {
		at, err := store.LastActivity(ctx, backend.Key{Source: src, Backend: "machine", ID: id})
		if err != nil && !errors.Is(err, ledger.ErrNotFound) || !at.IsZero() {
			t.Errorf("%s: reading the clock recorded activity %v (%v)", id, at, err)
		}
	}
	if busyAgent.Calls("GET /server_info") == 0 || busyAgent.Unauthorized() != 0 {
		t.Errorf("the backend's agent-server: %d reads, %d refused", busyAgent.Calls("GET /server_info"), busyAgent.Unauthorized())
	}
	if sleeping.Total() != 0 {
		t.Errorf("a suspended runtime's agent-server was contacted %d times", sleeping.Total())
	}
	// Suspended by the pass, idle is never contacted again.
	before := idleAgent.Total()
	fakes.Pass(t, eng)
	if idleAgent.Total() != before {
		t.Errorf("the suspended runtime's agent-server was read again")
	}
	if busyAgent.LastExecution() != t0.Add(-5*time.Minute) {
		t.Error("reading the clock moved the server's own idle time")
	}
}
