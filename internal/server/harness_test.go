package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// daemon is a real `reclaimer serve` on a loopback port, with a real
// SQLite ledger in the test's folder, driven through the generated client.
type daemon struct {
	t       *testing.T
	dir     string
	cfgPath string
	d       *server.Daemon
	url     string
	token   string
	api     *openapi.ClientWithResponses
	logs    *testtree.SyncBuffer
	stop    func() error
	// kick is signalled (coalesced) whenever the daemon tells an event:
	// waitFor looks again then, and never sleeps.
	kick chan struct{}
	// passes receives every pass the daemon reports.
	passes chan ops.PassReport
}

// writeConfig writes a configuration whose ledger, archives and token live
// in dir, listening on a free loopback port, with a long interval so that
// only the start pass runs on its own.
func writeConfig(t *testing.T, dir, server, body string) string {
	t.Helper()
	path := filepath.Join(dir, "reclaimer.toml")
	head := "[ledger]\npath = \"" + filepath.Join(dir, "state", "ledger.db") + "\"\n[archive]\ndir = \"" +
		filepath.Join(dir, "archives") + "\"\n[server]\nlisten = \"127.0.0.1:0\"\ninterval = \"1h\"\n" + server + "\n"
	testtree.Write(t, path, head+body)
	return path
}

// startDaemon opens and serves the configuration at cfgPath; the test's
// cleanup stops it gracefully.
func startDaemon(t *testing.T, dir, cfgPath string, opts server.Options) *daemon {
	t.Helper()
	h := &daemon{t: t, dir: dir, cfgPath: cfgPath, logs: &testtree.SyncBuffer{}, kick: make(chan struct{}, 1), passes: make(chan ops.PassReport, 64)}
	ready := make(chan string, 1)
	opts.ConfigPath, opts.Logs, opts.Version = cfgPath, h.logs, "test"
	events := opts.Events
	opts.Events = func(e server.Event) {
		if events != nil {
			events(e)
		}
		if e.Kind == "pass" {
			select {
			case h.passes <- *e.Pass:
			default: // nobody reads them in this test
			}
		}
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
	opts.Ready = func(addr string) { ready <- addr }
	ctx, cancel := context.WithCancel(context.Background())
	d, err := server.Open(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("open daemon: %v", err)
	}
	h.d = d
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	var once sync.Once
	var stopErr error
	h.stop = func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
		if t.Failed() {
			t.Logf("daemon logs:\n%s", h.logs.String())
		}
	})
	select {
	case addr := <-ready:
		h.url = "http://" + addr
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	tok, err := os.ReadFile(d.TokenFile())
	if err != nil {
		t.Fatal(err)
	}
	h.token = strings.TrimSpace(string(tok))
	h.api, err = openapi.NewClientWithResponses(h.url, openapi.WithRequestEditorFn(func(ctx context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+h.token)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *daemon) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

// runtime fetches one runtime, failing the test on anything but 200.
func (h *daemon) runtime(id string) openapi.Runtime {
	h.t.Helper()
	resp, err := h.api.GetRuntimeWithResponse(h.ctx(), id, nil)
	if err != nil || resp.JSON200 == nil {
		h.t.Fatalf("GET runtime %s: %v %s", id, err, body(resp))
	}
	return *resp.JSON200
}

// waitStartPass waits until the pass the daemon runs at start is done,
// for tests that read what it observed.
func (h *daemon) waitStartPass() {
	h.t.Helper()
	h.waitFor("the start pass", func() bool { return !h.lastPassFinished().IsZero() })
}

// lastPassFinished is when the last pass ended, per GET /v1/status; zero
// before the first.
func (h *daemon) lastPassFinished() time.Time {
	h.t.Helper()
	st, err := h.api.GetStatusWithResponse(h.ctx())
	if err != nil || st.JSON200 == nil || st.JSON200.LastPass == nil {
		return time.Time{}
	}
	return st.JSON200.LastPass.FinishedAt
}

// waitFor waits until cond holds, looking again each time the daemon
// reports an event (a pass, a sync, a delivery, a stream connecting): what
// it waits for is the work of one of them. It never sleeps.
func (h *daemon) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-h.kick:
		case <-deadline.C:
			h.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitPass waits for the next pass with trigger to end and returns it.
func (h *daemon) waitPass(trigger string) ops.PassReport {
	h.t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case p := <-h.passes:
			if p.Request.Trigger == trigger {
				return p
			}
		case <-deadline.C:
			h.t.Fatalf("timed out waiting for a %s pass", trigger)
		}
	}
}

// pass runs POST /v1/passes and returns the applied result.
func (h *daemon) pass(req openapi.PassRequest) openapi.Pass {
	h.t.Helper()
	resp, err := h.api.RunPassWithResponse(h.ctx(), req)
	if err != nil || resp.JSON200 == nil {
		h.t.Fatalf("POST /v1/passes: %v %s", err, body(resp))
	}
	return *resp.JSON200
}

// body describes a generated response: its status and raw body.
func body(resp any) string {
	v := reflect.ValueOf(resp)
	if !v.IsValid() || v.IsNil() {
		return "(no response)"
	}
	v = v.Elem()
	status := v.FieldByName("HTTPResponse").Interface().(*http.Response).Status
	return status + ": " + string(v.FieldByName("Body").Bytes())
}

// status is a generated response's HTTP status, 0 without one.
func status(resp any) int {
	v := reflect.ValueOf(resp)
	if !v.IsValid() || v.IsNil() {
		return 0
	}
	return v.Elem().FieldByName("HTTPResponse").Interface().(*http.Response).StatusCode
}

// gate is a backend decorator whose Delete waits until released, so a
// test can act while a pass holds a runtime's lock.
type gate struct {
	backend.Backend
	entered chan backend.Key
	release chan struct{}
}

func (g *gate) Unwrap() backend.Backend { return g.Backend }

func (g *gate) Delete(ctx context.Context, rt backend.Runtime, opts backend.DeleteOptions) error {
	g.entered <- rt.Key
	<-g.release
	d, _ := backend.As[backend.Deleter](g.Backend)
	return d.Delete(ctx, rt, opts)
}

var _ backend.Deleter = (*gate)(nil)

func gateAll(g *gate) func([]engine.Source) []engine.Source {
	return func(srcs []engine.Source) []engine.Source {
		for i := range srcs {
			inner := srcs[i].Backend
			srcs[i].Backend = &gate{Backend: inner, entered: g.entered, release: g.release}
		}
		return srcs
	}
}

func newGate() *gate {
	return &gate{entered: make(chan backend.Key, 4), release: make(chan struct{})}
}

// addWorktree adds worktree conv of repo under wts, with uncommitted work,
// last touched long ago.
func addWorktree(t *testing.T, repo, wts, conv string) string {
	t.Helper()
	wt := filepath.Join(wts, conv, "repo")
	if err := os.MkdirAll(filepath.Dir(wt), 0o755); err != nil {
		t.Fatal(err)
	}
	testtree.Git(t, repo, "worktree", "add", "-q", "-b", "agent/"+conv, wt)
	testtree.Write(t, filepath.Join(wt, "src", "main.go"), "package main // changed, not committed\n")
	gitDir := strings.TrimSpace(testtree.Git(t, wt, "rev-parse", "--absolute-git-dir"))
	testtree.Age(t, time.Now().Add(-30*24*time.Hour), wt, gitDir)
	return wt
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
