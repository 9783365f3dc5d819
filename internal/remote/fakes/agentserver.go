package fakes

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// AgentServer is a contract fake of an OpenHands agent-server's
// GET /server_info, checked against the published document. Any other
// call fails the test: reclaimer reads the idle clock and nothing else.
type AgentServer struct {
	*contract
	URL string
	// Key is the session key it wants in X-Session-API-Key ("" none).
	Key string
	Now func() time.Time

	mu        sync.Mutex
	started   time.Time
	lastExec  time.Time
	running   bool
	unauthed  int
	idleValue *float64 // overrides the computed idle_time when set
}

// NewAgentServer starts an agent-server fake, running, that last executed
// something at lastExec.
func NewAgentServer(t testing.TB, key string, now func() time.Time, lastExec time.Time) *AgentServer {
	t.Helper()
	spec, err := AgentServerSpec()
	if err != nil {
		t.Fatal(err)
	}
	f := &AgentServer{Key: key, Now: now, started: lastExec.Add(-time.Hour), lastExec: lastExec, running: true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serve(w, r, f.handle)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	// The document declares no security scheme; the key is checked below.
	f.contract = newContract(t, "agent-server", spec, srv.URL, func(string, *http.Request) error { return nil })
	return f
}

// Execute records that the server ran something now (the agent worked).
func (f *AgentServer) Execute() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastExec = f.Now()
}

// SetRunning says whether the runtime around the server runs; a read while
// it does not fails the test (it would wake a paused sandbox).
func (f *AgentServer) SetRunning(running bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = running
}

// SetIdle makes the server answer this idle_time whatever its clock says
// (a misbehaving server).
func (f *AgentServer) SetIdle(v float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idleValue = &v
}

// LastExecution is when the server last executed something.
func (f *AgentServer) LastExecution() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastExec
}

// Unauthorized counts the requests refused for a missing or wrong key.
func (f *AgentServer) Unauthorized() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unauthed
}

func (f *AgentServer) handle(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method != http.MethodGet || r.URL.Path != "/server_info" {
		f.t.Errorf("agent-server fake: %s %s is in the spec but reclaimer only reads the idle clock", r.Method, r.URL.Path)
		writeJSON(w, http.StatusNotImplemented, map[string]any{"detail": "not implemented by the fake"})
		return
	}
	if !f.running {
		f.t.Errorf("agent-server fake: /server_info read while its runtime is not running (a request may wake a paused sandbox)")
	}
	if f.Key != "" && r.Header.Get("X-Session-API-Key") != f.Key {
		f.unauthed++
		writeJSON(w, http.StatusUnauthorized, map[string]any{"detail": "Unauthorized"})
		return
	}
	now := f.Now()
	idle := now.Sub(f.lastExec).Seconds()
	if f.idleValue != nil {
		idle = *f.idleValue
	}
	// Reading is not activity: lastExec is left as it is.
	writeJSON(w, http.StatusOK, map[string]any{"uptime": now.Sub(f.started).Seconds(), "idle_time": idle,
		"title": "OpenHands Agent Server", "version": "1.11.4", "docs": "/docs", "redoc": "/redoc"})
}
