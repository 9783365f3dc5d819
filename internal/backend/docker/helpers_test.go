package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/docker"
	"github.com/reclaimer/reclaimer/internal/dockerclient"
	"github.com/reclaimer/reclaimer/internal/dockerclient/dockertest"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// harness is one test's Engine, scope, managed root and reclaim engine,
// with a clock the test moves.
type harness struct {
	t      testing.TB
	client *dockerclient.Client
	run    *dockertest.Run
	// scope is the selector's label value; other is a scope nobody manages.
	scope, other string
	root         string // the managed root
	backend      *docker.Backend
	store        ledger.Store
	eng          *engine.Engine
	archives     string
	state        string

	mu  sync.Mutex
	now time.Time
}

const scopeLabel = "reclaimer.scope"

// newHarness makes a managed root (on a tmpfs of that size, when set), a
// ledger and a docker backend for a fresh scope; use starts the engine.
func newHarness(t testing.TB, tmpfs string) *harness {
	t.Helper()
	c := dockertest.Client(t)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	h := &harness{t: t, client: c, run: dockertest.NewRun(t, c), now: time.Now().UTC()}
	h.scope = "s-" + hex.EncodeToString(rnd[:])
	h.other = h.scope + "-other"
	dir := t.TempDir()
	h.root = filepath.Join(dir, "runtime-data")
	if tmpfs != "" {
		testtree.MountTmpfs(t, h.root, tmpfs)
	} else if err := os.MkdirAll(h.root, 0o755); err != nil {
		t.Fatal(err)
	}
	h.backend = &docker.Backend{Client: c, Labels: map[string]string{scopeLabel: h.scope}, Home: "/home",
		Workspaces: []string{"/workspace"}, Roots: []string{h.root}, Git: gitcmd.Runner{Timeout: time.Minute},
		StopTimeout: time.Second}
	h.state = filepath.Join(dir, "state")
	store, err := sqlite.Open(context.Background(), filepath.Join(h.state, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	h.store = store
	h.archives = filepath.Join(h.state, "archives")
	// Registered after the run's cleanup, so it runs before it: the engine
	// and ledger close before the containers go, the tmpfs goes last.
	t.Cleanup(func() {
		if h.eng != nil {
			h.eng.Close()
		}
		store.Close()
	})
	return h
}

// use (re)starts the engine with one docker source under set.
func (h *harness) use(set policy.Settings) {
	h.t.Helper()
	if h.eng != nil {
		h.eng.Close()
	}
	var err error
	h.eng, err = engine.New(engine.Options{Ledger: h.store, StateDir: h.state, ArchiveDir: h.archives,
		Sources: []engine.Source{{Name: "docker[0]", Backend: h.backend, Settings: set}},
		Now:     func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }})
	if err != nil {
		h.t.Fatal(err)
	}
}

// advance moves the engine's clock.
func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	h.now = h.now.Add(d)
	h.mu.Unlock()
}

// name makes a container name unique to this test run.
func (h *harness) name(short string) string { return h.scope + "-" + short }

// sandbox makes the host folders of a container (home, and a workspace
// that is a git repository ignoring the usual rebuildable folders) under
// the managed root, and returns them.
func (h *harness) sandbox(name string) (home, ws string) {
	h.t.Helper()
	home = filepath.Join(h.root, name, "home")
	ws = filepath.Join(h.root, name, "workspace")
	if err := os.MkdirAll(home, 0o755); err != nil {
		h.t.Fatal(err)
	}
	newRepo(h.t, ws)
	return home, ws
}

// newRepo makes a repository with a commit and a .gitignore for the usual
// dependency folders and secrets.
func newRepo(t testing.TB, dir string) {
	t.Helper()
	testtree.Write(t, filepath.Join(dir, ".gitignore"), "node_modules/\n.venv/\nbuild/\n.env\n")
	testtree.Write(t, filepath.Join(dir, "src", "main.go"), "package main\n")
	testtree.Git(t, dir, "init", "-q")
	testtree.Git(t, dir, "add", "-A")
	testtree.Git(t, dir, "commit", "-q", "-m", "initial")
}

// agentWrites are the helper arguments of a sandbox's typical work: caches
// in the home, history and settings to keep, dependencies, sources, notes
// and a secret in the workspace.
var agentWrites = []string{
	"/home/.cache/pip/wheel.bin=" + strings.Repeat("w", 4096),
	"/home/.npm/_cacache/index=" + strings.Repeat("n", 4096),
	"/home/.bash_history=ls\nmake\n",
	"/home/.config/app/settings.json={}",
	"/workspace/node_modules/left-pad/index.js=module.exports=1",
	"/workspace/.venv/lib/site.py=venv",
	"/workspace/build/out.o=" + strings.Repeat("o", 4096),
	"/workspace/src/app.go=package app",
	"/workspace/NOTES.md=untracked notes",
	"/workspace/.env=SECRET=1",
}

// container makes a container of scope with the sandbox's folders bound,
// running args; started and waited for unless it sleeps (then left
// running once its files are written).
func (h *harness) container(name, scope string, binds []string, args ...string) string {
	h.t.Helper()
	id := h.run.Create(dockertest.Spec{Name: name, Labels: map[string]string{scopeLabel: scope}, Binds: binds, Args: args, Start: true})
	if len(args) > 0 && args[len(args)-1] == "sleep" {
		h.waitFile(binds, args)
		return id
	}
	h.run.Wait(id)
	return id
}

// waitFile waits until every file the helper writes into a bind mount
// shows on the host (a real Engine: polling is the only way to know).
func (h *harness) waitFile(binds []string, args []string) {
	h.t.Helper()
	var hosts []string
	for _, a := range args {
		path, _, ok := strings.Cut(a, "=")
		if !ok {
			continue
		}
		for _, b := range binds {
			src, dst, _ := strings.Cut(b, ":")
			if rel, err := filepath.Rel(dst, path); err == nil && !strings.HasPrefix(rel, "..") {
				hosts = append(hosts, filepath.Join(src, rel))
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := ""
		for _, p := range hosts {
			if !exists(p) {
				missing = p
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s did not appear", missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pass plans and applies once, then waits for the trash to empty.
func (h *harness) pass() (*plan.Plan, *plan.Applied) {
	h.t.Helper()
	ctx := context.Background()
	p, w, err := h.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		h.t.Fatalf("plan: %v", err)
	}
	res, err := h.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
	if err != nil {
		h.t.Fatalf("apply: %v", err)
	}
	if err := h.eng.Drain(ctx); err != nil {
		h.t.Fatalf("drain: %v", err)
	}
	return p, res
}

// outcome finds the result of step on the runtime id ("" when none).
func outcome(res *plan.Applied, id string, step backend.Step) plan.Result {
	for _, r := range res.Results {
		if r.Runtime == id && r.Step == step {
			return r
		}
	}
	return plan.Result{}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func (h *harness) mustExist(paths ...string) {
	h.t.Helper()
	for _, p := range paths {
		if !exists(p) {
			h.t.Errorf("%s is gone; it had to stay", p)
		}
	}
}

func (h *harness) mustBeGone(paths ...string) {
	h.t.Helper()
	for _, p := range paths {
		if exists(p) {
			h.t.Errorf("%s is still there; it had to go", p)
		}
	}
}

func (h *harness) record(id string) ledger.RuntimeRecord {
	h.t.Helper()
	r, err := h.store.Runtime(context.Background(), ledger.Key{Source: "docker[0]", Backend: docker.Name, ID: id})
	if err != nil {
		h.t.Fatalf("ledger record of %s: %v", id, err)
	}
	return r
}

func engineOptions() engine.PlanOptions { return engine.PlanOptions{} }
func applyOptions() engine.ApplyOptions { return engine.ApplyOptions{} }

// restoreOptions are what `reclaimer restore` passes for archive a: its
// manifest and the sink it was written to (the engine's local folder).
func (h *harness) restoreOptions(a ledger.Archive, to string) backend.RestoreOptions {
	h.t.Helper()
	store, err := sink.NewLocal(h.archives)
	if err != nil {
		h.t.Fatal(err)
	}
	return backend.RestoreOptions{Location: a.Location, Formats: a.Formats, Manifest: a.Manifest, To: to,
		Sink: store, Staging: h.t.TempDir()}
}
