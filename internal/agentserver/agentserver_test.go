package agentserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/agentserver"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

const key = "session-key-0123456789"

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func runtime(id string, state backend.State, url, k string) backend.Runtime {
	return backend.Runtime{Key: backend.Key{Backend: "openhands-cloud", ID: id}, State: state,
		LastActivity: t0.Add(-3 * time.Hour), AgentServer: &backend.AgentServer{URL: url, SessionKey: k}}
}

func TestIdleClockGivesLastActivity(t *testing.T) {
	clock := fakes.NewClock(t0)
	f := fakes.NewAgentServer(t, key, clock.Now, t0.Add(-25*time.Minute))
	c := &agentserver.Clock{Now: clock.Now}
	rts := []backend.Runtime{runtime("a", backend.StateRunning, f.URL, key)}
	if err := c.Refine(context.Background(), rts); err != nil {
		t.Fatal(err)
	}
	if got := rts[0].LastActivity; !got.Equal(t0.Add(-25 * time.Minute)) {
		t.Fatalf("last activity %v, want 25 minutes ago", got)
	}
	// Reading is not activity: the server's own clock did not move, and a
	// second reading later gives the same moment.
	clock.Advance(10 * time.Minute)
	if err := c.Refine(context.Background(), rts); err != nil {
		t.Fatal(err)
	}
	if !f.LastExecution().Equal(t0.Add(-25*time.Minute)) || !rts[0].LastActivity.Equal(t0.Add(-25*time.Minute)) {
		t.Fatalf("reading moved the clock: server %v, observed %v", f.LastExecution(), rts[0].LastActivity)
	}
	// The agent works: the next reading sees it.
	f.Execute()
	if err := c.Refine(context.Background(), rts); err != nil {
		t.Fatal(err)
	}
	if !rts[0].LastActivity.Equal(clock.Now()) {
		t.Fatalf("after an execution: %v, want %v", rts[0].LastActivity, clock.Now())
	}
	if n := f.Calls("GET /server_info"); n != 3 {
		t.Errorf("%d reads, want 3", n)
	}
}

func TestNeverReadsARuntimeThatIsNotRunning(t *testing.T) {
	clock := fakes.NewClock(t0)
	f := fakes.NewAgentServer(t, key, clock.Now, t0.Add(-time.Minute))
	f.SetRunning(false) // the fake fails the test on any read now
	c := &agentserver.Clock{Now: clock.Now}
	var rts []backend.Runtime
	for _, st := range []backend.State{backend.StateSuspended, backend.StateStopped, backend.StateStarting, backend.StateUnknown, backend.StateMissing} {
		rts = append(rts, runtime(string(st), st, f.URL, key))
	}
	if err := c.Refine(context.Background(), rts); err != nil {
		t.Fatal(err)
	}
	for _, rt := range rts {
		if !rt.LastActivity.Equal(t0.Add(-3*time.Hour)) || rt.Busy != "" {
			t.Errorf("%s changed: %+v", rt.ID, rt)
		}
	}
	if _, err := c.LastActivity(context.Background(), rts[0]); !errors.Is(err, agentserver.ErrNotRunning) {
		t.Errorf("a paused runtime's clock: %v", err)
	}
	if n := f.Total(); n != 0 {
		t.Fatalf("%d requests to a runtime that is not running", n)
	}
}

func TestOlderClockNeverMovesActivityBack(t *testing.T) {
	clock := fakes.NewClock(t0)
	f := fakes.NewAgentServer(t, "", clock.Now, t0.Add(-5*time.Hour))
	c := &agentserver.Clock{Now: clock.Now}
	rts := []backend.Runtime{runtime("a", backend.StateRunning, f.URL, "")}
	if err := c.Refine(context.Background(), rts); err != nil {
		t.Fatal(err)
	}
	if !rts[0].LastActivity.Equal(t0.Add(-3 * time.Hour)) {
		t.Fatalf("an older clock moved activity back: %v", rts[0].LastActivity)
	}
}

func TestUnreadableClockFailsClosedWithoutTheKey(t *testing.T) {
	clock := fakes.NewClock(t0)
	f := fakes.NewAgentServer(t, key, clock.Now, t0.Add(-time.Hour))
	c := &agentserver.Clock{Now: clock.Now}
	wrong := "wrong-key-9876543210"
	rts := []backend.Runtime{runtime("a", backend.StateRunning, f.URL, wrong)}
	err := c.Refine(context.Background(), rts)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong key: %v", err)
	}
	if rts[0].Busy == "" || !rts[0].LastActivity.Equal(t0.Add(-3*time.Hour)) {
		t.Fatalf("an unreadable clock must count as busy: %+v", rts[0])
	}
	for _, s := range []string{err.Error(), rts[0].Busy, fmt.Sprintf("%v %+v %#v", rts[0], rts[0], *rts[0].AgentServer)} {
		if strings.Contains(s, wrong) || strings.Contains(s, key) {
			t.Fatalf("a key leaked: %s", s)
		}
	}
	if f.Unauthorized() != 1 {
		t.Errorf("the fake saw %d refused requests", f.Unauthorized())
	}
}

func TestMisbehavingServers(t *testing.T) {
	clock := fakes.NewClock(t0)
	c := &agentserver.Clock{Now: clock.Now}
	ctx := context.Background()

	// A negative idle time reads as "just now", never as a future moment.
	f := fakes.NewAgentServer(t, "", clock.Now, t0)
	f.SetIdle(-3600)
	at, err := c.LastActivity(ctx, runtime("neg", backend.StateRunning, f.URL, ""))
	if err != nil || at.After(t0) {
		t.Fatalf("negative idle: %v %v", at, err)
	}

	// A redirect is refused: the session key would follow it.
	var hit bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit = true }))
	defer elsewhere.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/server_info", http.StatusFound)
	}))
	defer redirect.Close()
	if _, err := c.Idle(ctx, backend.AgentServer{URL: redirect.URL, SessionKey: key}); err == nil || hit {
		t.Fatalf("redirect followed: %v (reached: %v)", err, hit)
	}

	// Rule "no redirect carries a credential" holds for an injected client
	// too, for a 307 from the contract fake (its request checked against
	// the spec) to another host name: the error says so, the target is
	// never called.
	hit = false
	f2 := fakes.NewAgentServer(t, key, clock.Now, t0)
	f2.Bend(func(op string, a *fakes.Answer) bool {
		a.Status = http.StatusTemporaryRedirect
		a.Header.Set("Location", strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)+"/server_info")
		return true
	})
	injected := &agentserver.Clock{Now: clock.Now, HTTP: &http.Client{}}
	if _, err := injected.Idle(ctx, backend.AgentServer{URL: f2.URL, SessionKey: key}); !errors.Is(err, remote.ErrRedirect) && (err == nil || !strings.Contains(err.Error(), "redirect refused")) || hit {
		t.Fatalf("redirect with an injected client: %v (reached: %v)", err, hit)
	}

	// A URL with credentials, a non-http URL and garbage are errors.
	for _, u := range []string{"http://user:pw@127.0.0.1:1", "file:///etc/passwd", "::"} {
		if _, err := c.Idle(ctx, backend.AgentServer{URL: u}); err == nil || strings.Contains(err.Error(), "pw@") {
			t.Errorf("%s: %v", u, err)
		}
	}

	// A server that never answers is bounded by the timeout.
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer slow.Close()
	defer close(block)
	quick := &agentserver.Clock{Now: clock.Now, Timeout: 50 * time.Millisecond}
	if _, err := quick.Idle(ctx, backend.AgentServer{URL: slow.URL}); err == nil {
		t.Fatal("a silent server answered")
	}
}
