package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/server"
)

// serve starts the daemon for cfg on loopback and returns its URL and
// token file; the test's cleanup stops it.
func serve(t *testing.T, cfg string) (url, token string) {
	t.Helper()
	ready := make(chan string, 1)
	started := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	d, err := server.Open(ctx, server.Options{ConfigPath: cfg, Logs: io.Discard, Ready: func(a string) { ready <- a },
		Events: func(e server.Event) {
			if e.Kind == "pass" && e.Pass.Request.Trigger == "start" {
				once.Do(func() { close(started) })
			}
		}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	url = "http://" + <-ready
	// The start pass runs on its own: the tests start once it is done (it
	// frees caches, which would race with what they look at).
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon's start pass did not end")
	}
	return url, d.TokenFile()
}

// TestCommandsAgainstDaemon: with --server the commands ask the daemon,
// and their JSON has the shape of the local commands'.
func TestCommandsAgainstDaemon(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	write(t, filepath.Join(runs, "run1", "persistence", ".cache", "x"), strings.Repeat("c", 8192))
	write(t, filepath.Join(runs, "run2", "persistence", "notes"), "keep")
	cfg := config(t, dir, "[server]\nlisten = \"127.0.0.1:0\"\ninterval = \"1h\"\n[[dirs]]\nroot = \""+runs+"\"\nhome = \"persistence\"\n")
	url, token := serve(t, cfg)
	remote := func(args ...string) []string {
		return append([]string{"--server", url, "--token-file", token}, args...)
	}

	// ls: the same rows as without the daemon (sizes aside: the daemon
	// reports what the ledger knows).
	var local, viaServer []map[string]any
	runJSON(t, &viaServer, remote("ls")...)
	runJSON(t, &local, "--config", cfg, "ls")
	if len(local) != len(viaServer) {
		t.Fatalf("ls: %d rows locally, %d through the daemon", len(local), len(viaServer))
	}
	for i := range local {
		for _, k := range []string{"id", "backend", "state", "path", "retention"} {
			if !reflect.DeepEqual(local[i][k], viaServer[i][k]) {
				t.Errorf("ls row %d %s: local %v, daemon %v", i, k, local[i][k], viaServer[i][k])
			}
		}
	}

	out := runOK(t, remote("pin", "run2", "--reason", "demo")...)
	if !strings.Contains(out, "run2: pinned") {
		t.Fatalf("pin: %s", out)
	}
	runOK(t, remote("touch", "dir/run1")...)
	runOK(t, remote("retention", "run1", "--days", "3")...)
	runOK(t, remote("lease", "run1", "--for", "2h")...)

	var p planJSON
	runJSON(t, &p, remote("plan")...)
	if p.PlanID == "" || p.skipReason("run2") != "pinned: demo" {
		t.Fatalf("plan: %+v", p)
	}
	var res applyJSON
	runJSON(t, &res, remote("apply", "--step", "caches")...)
	if res.PlanID == "" {
		t.Fatalf("apply: %+v", res)
	}
	var st map[string]any
	runJSON(t, &st, remote("status")...)
	for _, k := range []string{"filesystems", "runtimes_by_state", "runtimes_by_backend", "reclaimable_bytes_by_step"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status lacks %s: %v", k, st)
		}
	}
	var entries []map[string]any
	runJSON(t, &entries, remote("log")...)
	var localEntries []map[string]any
	runJSON(t, &localEntries, "--config", cfg, "log")
	if len(entries) != len(localEntries) {
		t.Fatalf("log: %d entries through the daemon, %d locally", len(entries), len(localEntries))
	}
	for i := range entries {
		a, _ := json.Marshal(entries[i])
		b, _ := json.Marshal(localEntries[i])
		if string(a) != string(b) {
			t.Errorf("log entry %d differs:\n daemon %s\n local  %s", i, a, b)
		}
	}

	// Errors: an unknown runtime is a usage error; a wrong token fails.
	if _, errOut, code := run(t, remote("pin", "nope")...); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("unknown runtime: exit %d %s", code, errOut)
	}
	write(t, filepath.Join(dir, "wrong"), "not-the-token-at-all")
	if _, errOut, code := run(t, "--server", url, "--token-file", filepath.Join(dir, "wrong"), "ls"); code != 2 || !strings.Contains(errOut, "401") {
		t.Fatalf("wrong token: exit %d %s", code, errOut)
	}
	// delete removes through the daemon (archived first: a run folder holds work).
	runOK(t, remote("unpin", "run2")...)
	var del applyJSON
	runJSON(t, &del, remote("delete", "run2")...)
	if len(del.Results) != 1 || del.Results[0].Outcome != "done" {
		t.Fatalf("delete: %+v", del)
	}
	if exists(filepath.Join(runs, "run2")) {
		t.Fatal("run2 still there")
	}
	// restore through the daemon: it runs on the daemon's host.
	if out := runOK(t, remote("restore", "run2")...); !strings.Contains(out, "restored dir/run2") || !exists(filepath.Join(runs, "run2", "persistence", "notes")) {
		t.Fatalf("restore with --server: %s", out)
	}
}

// TestServerOnUnixSocket: the daemon on a Unix socket, the CLI through it.
func TestServerOnUnixSocket(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	write(t, filepath.Join(runs, "run1", "notes"), "keep")
	sock := filepath.Join(dir, "r.sock")
	cfg := config(t, dir, "[server]\nlisten = \"unix:"+sock+"\"\ninterval = \"1h\"\n[[dirs]]\nroot = \""+runs+"\"\n")
	_, token := serve(t, cfg)
	var st map[string]any
	runJSON(t, &st, "--server", "unix:"+sock, "--config", cfg, "status")
	if _, ok := st["runtimes_by_backend"]; !ok {
		t.Fatalf("status over the socket: %v", st)
	}
	out := runOK(t, "--server", "unix:"+sock, "--token-file", token, "touch", "dir/run1")
	if !strings.Contains(out, "dir/run1: activity recorded") {
		t.Fatalf("touch: %s", out)
	}
}
