package docker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/docker"
	"github.com/reclaimer/reclaimer/internal/dockerclient"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

var cacheDirs = []string{".cache", ".npm"}

// binds mounts a sandbox's home and workspace where the backend expects.
func binds(home, ws string) []string { return []string{home + ":/home", ws + ":/workspace"} }

// overBudget returns watermarks that put the root's filesystem over its
// high mark now, with a low mark no shedding can reach (so every stopped
// container sheds).
func overBudget(t *testing.T, root string) (high, low float64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(root, &st); err != nil {
		t.Fatal(err)
	}
	used := float64(st.Blocks-st.Bfree) / float64(st.Blocks-st.Bfree+st.Bavail)
	return used - 0.005, 0.001
}

// TestOnlyRebuildableFilesGo runs agent sandboxes on a small filesystem
// over its disk budget: a stopped container loses the caches of its home
// and the ignored dependencies of its workspace and keeps everything else;
// a running one, a workspace mounted from outside the roots, and links
// planted in a sandbox (removed, never followed) lose nothing else; the
// reclaimed container then starts again and writes its caches and
// dependencies anew.
func TestOnlyRebuildableFilesGo(t *testing.T) {
	h := newHarness(t, "size=48m")

	// A stopped sandbox with the usual files.
	stopped := h.name("stopped")
	home, ws := h.sandbox(stopped)
	h.container(stopped, h.scope, binds(home, ws), agentWrites...)

	// A running one with the same files: untouched byte for byte.
	running := h.name("running")
	rHome, rWS := h.sandbox(running)
	h.container(running, h.scope, binds(rHome, rWS), append(agentWrites, "sleep")...)
	runningBefore := testtree.Fingerprint(t, filepath.Join(h.root, running))

	// A stopped one whose workspace is a caller's checkout outside roots.
	outside := h.name("outside")
	oHome := filepath.Join(h.root, outside, "home")
	checkout := filepath.Join(t.TempDir(), "checkout")
	newRepo(t, checkout)
	h.container(outside, h.scope, binds(mkdir(t, oHome), checkout), agentWrites...)
	checkoutBefore := testtree.Fingerprint(t, checkout)

	// A stopped one with planted links: .npm to a host folder outside,
	// .cache into its own workspace, and a link in the ignored build/ to a
	// folder outside.
	planted := h.name("planted")
	pHome, pWS := h.sandbox(planted)
	target := filepath.Join(t.TempDir(), "host-folder")
	testtree.Write(t, filepath.Join(target, "precious.txt"), "do not follow me")
	h.container(planted, h.scope, binds(pHome, pWS), "/workspace/build/out.o=obj", "/workspace/NOTES.md=notes")
	symlink(t, target, filepath.Join(pHome, ".npm"))
	symlink(t, "../workspace", filepath.Join(pHome, ".cache"))
	symlink(t, target, filepath.Join(pWS, "build", "escape"))
	targetBefore := testtree.Fingerprint(t, target)

	high, low := overBudget(t, h.root)
	h.use(policy.Settings{CacheDirs: cacheDirs, DiskHigh: high, DiskLow: low})
	_, res := h.pass()
	for _, r := range res.Results {
		if r.Outcome != plan.Done {
			t.Errorf("%s %s: %s %s", r.Runtime, r.Step, r.Outcome, r.Reason)
		}
	}

	h.mustBeGone(filepath.Join(home, ".cache"), filepath.Join(home, ".npm"),
		filepath.Join(ws, "node_modules"), filepath.Join(ws, ".venv"), filepath.Join(ws, "build"))
	h.mustExist(filepath.Join(home, ".bash_history"), filepath.Join(home, ".config", "app", "settings.json"),
		filepath.Join(ws, "src", "main.go"), filepath.Join(ws, "src", "app.go"), filepath.Join(ws, "NOTES.md"),
		filepath.Join(ws, ".env"), filepath.Join(ws, ".gitignore"), filepath.Join(ws, ".git", "HEAD"))

	if got := testtree.Fingerprint(t, filepath.Join(h.root, running)); got != runningBefore {
		t.Errorf("the running container's files changed:\nbefore:\n%s\nafter:\n%s", runningBefore, got)
	}
	if st := h.run.State(running); st != "running" {
		t.Errorf("the running container is %s", st)
	}
	if got := testtree.Fingerprint(t, checkout); got != checkoutBefore {
		t.Errorf("the checkout outside the roots changed:\nbefore:\n%s\nafter:\n%s", checkoutBefore, got)
	}
	h.mustBeGone(filepath.Join(oHome, ".cache"), filepath.Join(oHome, ".npm")) // its home is inside

	h.mustBeGone(filepath.Join(pHome, ".npm"), filepath.Join(pHome, ".cache"), filepath.Join(pWS, "build"))
	h.mustExist(filepath.Join(pWS, "NOTES.md"), filepath.Join(pWS, ".gitignore"))
	if got := testtree.Fingerprint(t, target); got != targetBefore {
		t.Errorf("a link's target changed:\nbefore:\n%s\nafter:\n%s", targetBefore, got)
	}

	// The reclaimed sandbox starts again and rebuilds what went.
	id := h.run.State(stopped)
	if id != "exited" {
		t.Fatalf("the reclaimed container is %s", id)
	}
	h.run.Start(stopped)
	h.run.Wait(stopped)
	h.mustExist(filepath.Join(home, ".cache", "pip", "wheel.bin"), filepath.Join(ws, "node_modules", "left-pad", "index.js"))
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestArchive lets retention archive a stopped sandbox, an execution-only
// one with no host folder, and a folder no container owns: each is gone
// from the Engine and the root, its record says archived, and its export
// verifies and restores. A container of another scope, as old, is kept.
func TestArchive(t *testing.T) {
	h := newHarness(t, "")
	h.use(policy.Settings{CacheDirs: cacheDirs, Retention: time.Hour})
	ctx := context.Background()

	sandbox := h.name("sandbox")
	home, ws := h.sandbox(sandbox)
	h.container(sandbox, h.scope, binds(home, ws), agentWrites...)
	execOnly := h.name("exec")
	h.container(execOnly, h.scope, nil, "/tmp/x=1")
	otherName := h.name("other")
	oHome, oWS := h.sandbox(otherName)
	h.container(otherName, h.other, binds(oHome, oWS), agentWrites...)
	otherBefore := testtree.Fingerprint(t, filepath.Join(h.root, otherName))
	leftover := filepath.Join(h.root, "leftover")
	testtree.Write(t, filepath.Join(leftover, "persistence", "notes.txt"), "left behind by a crash")
	unownedID := docker.UnownedPrefix + leftover

	rts, err := h.backend.List(ctx, backend.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]backend.State{}
	for _, rt := range rts {
		states[rt.ID] = rt.State
	}
	if states[sandbox] != backend.StateStopped || states[execOnly] != backend.StateStopped ||
		states[unownedID] != backend.StateUnowned || len(states) != 3 {
		t.Fatalf("listed %v; want the two containers stopped and the leftover folder unowned, nothing of the other scope", states)
	}

	// What it wrote outside its mounts (its writable layer) is its size.
	if rts, err := h.backend.List(ctx, backend.ListOptions{IDs: []string{execOnly}}); err != nil || len(rts) != 1 || rts[0].StorageBytes <= 0 || rts[0].Storage == "" {
		t.Errorf("writable layer of %s: %+v, %v; want its size under the data root", execOnly, rts, err)
	}

	// A container with no managed folder lives on the data root's
	// filesystem, which the budget measures.
	w, err := h.eng.Observe(ctx, engine.ObserveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := w.Find(backend.Key{Source: "docker[0]", Backend: docker.Name, ID: execOnly}); s == nil || s.Filesystem == "" || s.Runtime.Storage == "" {
		t.Errorf("%s has no managed filesystem: %+v", execOnly, s)
	}

	h.advance(3 * time.Hour)
	p, _ := h.pass() // announces (grace 0: due at once)
	if len(p.Scheduled) != 3 {
		t.Fatalf("scheduled %+v, want the three runtimes", p.Scheduled)
	}
	h.advance(time.Minute)
	_, res := h.pass()
	for _, id := range []string{sandbox, execOnly, unownedID} {
		r := outcome(res, id, backend.StepArchive)
		if r.Outcome != plan.Done {
			t.Errorf("archive %s: %q %s", id, r.Outcome, r.Reason)
			continue
		}
		if rec := h.record(id); rec.State != string(backend.StateArchived) || rec.ArchiveID != r.ArchiveID {
			t.Errorf("%s: record %s (archive %q), want archived with %q", id, rec.State, rec.ArchiveID, r.ArchiveID)
		}
		a, err := h.store.Archive(ctx, r.ArchiveID)
		if err != nil {
			t.Fatal(err)
		}
		restored := filepath.Join(t.TempDir(), "restored")
		if _, err := h.backend.Restore(ctx, backend.Key{Source: "docker[0]", Backend: docker.Name, ID: id}, h.restoreOptions(a, restored)); err != nil {
			t.Errorf("restore %s: %v", id, err)
		}
		switch id {
		case sandbox:
			got, err := os.ReadFile(filepath.Join(restored, "workspace", "NOTES.md"))
			if err != nil || string(got) != "untracked notes" {
				t.Errorf("restored notes: %q, %v", got, err)
			}
			if exists(filepath.Join(restored, "workspace", "node_modules")) {
				t.Error("the archive kept node_modules")
			}
			if !exists(filepath.Join(restored, "workspace", ".env")) {
				t.Error("the archive lost the ignored .env")
			}
		case unownedID:
			if got, err := os.ReadFile(filepath.Join(restored, "leftover", "persistence", "notes.txt")); err != nil || string(got) != "left behind by a crash" {
				t.Errorf("restored leftover: %q, %v", got, err)
			}
		}
	}
	for _, name := range []string{sandbox, execOnly} {
		if st := h.run.State(name); st != "gone" {
			t.Errorf("%s is %s after its archive", name, st)
		}
	}
	h.mustBeGone(filepath.Join(h.root, sandbox), leftover)

	// Restored in place, the workspace is back where it was, and until a
	// container mounts it again its folder is unowned; restoring twice is
	// refused, never overwriting.
	a, err := h.store.Archive(ctx, outcome(res, sandbox, backend.StepArchive).ArchiveID)
	if err != nil {
		t.Fatal(err)
	}
	key := backend.Key{Source: "docker[0]", Backend: docker.Name, ID: sandbox}
	if _, err := h.backend.Restore(ctx, key, h.restoreOptions(a, "")); err != nil {
		t.Fatalf("restore in place: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "NOTES.md")); err != nil || string(got) != "untracked notes" {
		t.Errorf("restored in place: %q, %v", got, err)
	}
	if _, err := h.backend.Restore(ctx, key, h.restoreOptions(a, "")); !errors.Is(err, backend.ErrConflict) {
		t.Errorf("second restore: %v, want a conflict", err)
	}
	rts, err = h.backend.List(ctx, backend.ListOptions{IDs: []string{docker.UnownedPrefix + filepath.Join(h.root, sandbox)}})
	if err != nil || len(rts) != 1 || rts[0].State != backend.StateUnowned {
		t.Errorf("the restored folder: %+v, %v; want it unowned", rts, err)
	}

	if st := h.run.State(otherName); st != "exited" {
		t.Errorf("the other scope's container is %s", st)
	}
	if got := testtree.Fingerprint(t, filepath.Join(h.root, otherName)); got != otherBefore {
		t.Error("the other scope's folders changed")
	}
}

// TestStartedBetweenPlanAndApply: a container started after the plan is
// skipped with "changed since plan", its caches untouched.
func TestStartedBetweenPlanAndApply(t *testing.T) {
	h := newHarness(t, "")
	h.use(policy.Settings{CacheDirs: cacheDirs})
	ctx := context.Background()
	name := h.name("restarted")
	home, ws := h.sandbox(name)
	h.container(name, h.scope, binds(home, ws), append(agentWrites, "sleep")...)
	h.run.Stop(name)

	p, _, err := h.eng.Plan(ctx, engineOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 1 || p.Actions[0].Step != backend.StepCaches {
		t.Fatalf("plan %+v, want the caches of the stopped container", p.Actions)
	}
	h.run.Start(name)
	res, err := h.eng.Apply(ctx, p, applyOptions())
	if err != nil {
		t.Fatal(err)
	}
	r := outcome(res, name, backend.StepCaches)
	if r.Outcome != plan.Skip || !strings.HasPrefix(r.Reason, "changed since plan") {
		t.Errorf("caches of a started container: %q %q, want skipped as changed since plan", r.Outcome, r.Reason)
	}
	h.mustExist(filepath.Join(home, ".cache", "pip", "wheel.bin"), filepath.Join(home, ".npm", "_cacache", "index"))
}

// TestLeakedContainerIsStoppedThenReclaimed: a labelled container left
// running (its host crashed) is stopped once idle longer than
// idle_suspend, then loses its caches like any stopped one; a container
// of another scope, as idle, keeps running with its caches.
func TestLeakedContainerIsStoppedThenReclaimed(t *testing.T) {
	h := newHarness(t, "")
	h.use(policy.Settings{CacheDirs: cacheDirs, IdleSuspend: 30 * time.Minute})
	leaked := h.name("leaked")
	home, ws := h.sandbox(leaked)
	h.container(leaked, h.scope, binds(home, ws), append(agentWrites, "sleep")...)
	other := h.name("other")
	oHome, oWS := h.sandbox(other)
	h.container(other, h.other, binds(oHome, oWS), append(agentWrites, "sleep")...)

	_, res := h.pass()
	if len(res.Results) != 0 {
		t.Fatalf("a fresh running container was acted on: %+v", res.Results)
	}
	h.advance(time.Hour)
	_, res = h.pass()
	if r := outcome(res, leaked, backend.StepSuspend); r.Outcome != plan.Done {
		t.Fatalf("suspend: %q %s", r.Outcome, r.Reason)
	}
	if st := h.run.State(leaked); st != "exited" {
		t.Fatalf("the leaked container is %s after its suspend", st)
	}
	h.mustExist(filepath.Join(home, ".cache"))
	_, res = h.pass()
	if r := outcome(res, leaked, backend.StepCaches); r.Outcome != plan.Done {
		t.Fatalf("caches after the stop: %q %s", r.Outcome, r.Reason)
	}
	h.mustBeGone(filepath.Join(home, ".cache"), filepath.Join(home, ".npm"))
	h.mustExist(filepath.Join(home, ".bash_history"))
	if st := h.run.State(other); st != "running" {
		t.Errorf("the other scope's container is %s", st)
	}
	h.mustExist(filepath.Join(oHome, ".cache", "pip", "wheel.bin"))
}

// TestLifetimeCap stops a container running longer than max_lifetime even
// though it is active.
func TestLifetimeCap(t *testing.T) {
	h := newHarness(t, "")
	h.use(policy.Settings{CacheDirs: cacheDirs, MaxLifetime: time.Hour})
	name := h.name("long")
	h.container(name, h.scope, nil, "/tmp/x=1", "sleep")
	touch := func() {
		if err := h.store.RecordActivity(context.Background(), []ledger.Activity{{Key: ledger.Key{Source: "docker[0]", Backend: docker.Name, ID: name}, At: h.now}}); err != nil {
			t.Fatal(err)
		}
	}
	touch()
	if _, res := h.pass(); len(res.Results) != 0 {
		t.Fatalf("acted within the cap: %+v", res.Results)
	}
	h.advance(2 * time.Hour)
	touch()
	p, res := h.pass()
	if len(p.Actions) != 1 || !strings.Contains(p.Actions[0].Reason, "lifetime cap") {
		t.Fatalf("plan %+v, want a suspend for the lifetime cap", p.Actions)
	}
	if r := outcome(res, name, backend.StepSuspend); r.Outcome != plan.Done {
		t.Fatalf("suspend: %q %q", r.Outcome, r.Reason)
	}
	if st := h.run.State(name); st != "exited" {
		t.Errorf("the container is %s", st)
	}
}

// TestEngineUnreachableLosesNothing: when the Engine does not answer, the
// pass reports it and acts on nothing, and the ledger does not call the
// containers it knew missing; a paused container counts as running.
func TestEngineUnreachableLosesNothing(t *testing.T) {
	h := newHarness(t, "")
	h.use(policy.Settings{CacheDirs: cacheDirs})
	ctx := context.Background()
	paused := h.name("paused")
	home, ws := h.sandbox(paused)
	h.container(paused, h.scope, binds(home, ws), append(agentWrites, "sleep")...)
	if _, err := h.client.API().ContainerPause(ctx, paused, client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = h.client.API().ContainerUnpause(ctx, paused, client.ContainerUnpauseOptions{}) })
	p, _ := h.pass()
	if len(p.Actions) != 0 {
		t.Fatalf("acted on a paused container: %+v", p.Actions)
	}
	if rec := h.record(paused); rec.State != string(backend.StateRunning) {
		t.Fatalf("a paused container recorded as %s", rec.State)
	}

	gone, err := dockerclient.New("unix://" + filepath.Join(t.TempDir(), "no-engine.sock"))
	if err != nil {
		t.Fatal(err)
	}
	h.backend.Client = gone
	p, res := h.pass()
	if len(p.Actions) != 0 || len(res.Results) != 0 {
		t.Fatalf("acted without an Engine: %+v", p.Actions)
	}
	if len(p.Problems) != 1 || p.Problems[0].Code != plan.SourceUnreadable || p.Problems[0].Source != "docker[0]" {
		t.Errorf("the plan does not say the listing failed: %+v", p.Problems)
	}
	if rec := h.record(paused); rec.State != string(backend.StateRunning) {
		t.Errorf("without an Engine the container was recorded %s", rec.State)
	}
	h.mustExist(filepath.Join(home, ".cache"), filepath.Join(ws, "node_modules"))
}

// TestSharedFolderWaitsForEveryContainer: a cache folder two containers
// mount as their home is touched only once both are stopped, and removing
// one container keeps the folder the other still mounts.
func TestSharedFolderWaitsForEveryContainer(t *testing.T) {
	h := newHarness(t, "")
	h.use(policy.Settings{CacheDirs: cacheDirs})
	shared := mkdir(t, filepath.Join(h.root, "shared-home"))
	a, b := h.name("a"), h.name("b")
	_, aWS := h.sandbox(a)
	_, bWS := h.sandbox(b)
	h.container(a, h.scope, binds(shared, aWS), "/home/.cache/a=1")
	h.container(b, h.scope, binds(shared, bWS), "/home/.cache/b=1", "sleep")

	p, _ := h.pass()
	for _, act := range p.Actions {
		t.Errorf("acted on %s (%s) while its home is in use", act.Runtime, act.Step)
	}
	h.mustExist(filepath.Join(shared, ".cache", "a"))

	h.run.Stop(b)
	_, res := h.pass()
	if r := outcome(res, a, backend.StepCaches); r.Outcome != plan.Done {
		t.Errorf("caches of a once b stopped: %q %s", r.Outcome, r.Reason)
	}
	h.mustBeGone(filepath.Join(shared, ".cache"))

	// Deleting a removes it and its own workspace, never the shared home.
	rts, err := h.backend.List(context.Background(), backend.ListOptions{IDs: []string{a}})
	if err != nil || len(rts) != 1 {
		t.Fatalf("list %s: %v %v", a, rts, err)
	}
	var discarded []string
	err = h.backend.Delete(context.Background(), rts[0], backend.DeleteOptions{Discard: func(p string) error {
		discarded = append(discarded, p)
		return os.Rename(p, p+".discarded")
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(discarded) != 1 || discarded[0] != aWS {
		t.Errorf("discarded %v, want only %s", discarded, aWS)
	}
	h.mustExist(shared)
	if st := h.run.State(a); st != "gone" {
		t.Errorf("a is %s after its delete", st)
	}
}

// TestWatchReportsStoppedContainers: the event stream reports a matching
// container that stops, and never one of another scope.
func TestWatchReportsStoppedContainers(t *testing.T) {
	h := newHarness(t, "")
	mine, other := h.name("mine"), h.name("other")
	h.container(mine, h.scope, nil, "/tmp/x=1", "sleep")
	h.container(other, h.other, nil, "/tmp/x=1", "sleep")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 16)
	done := make(chan error, 1)
	go func() { done <- h.backend.Watch(ctx, func(id string) { got <- id }) }()
	// Stop the other scope's container first: its events must never come
	// through. Whether the subscription was already made is not known
	// from outside, so mine is started and stopped again until its event
	// arrives.
	h.run.Stop(other)
	deadline := time.After(30 * time.Second)
	for reported := false; !reported; {
		h.run.Stop(mine)
		select {
		case id := <-got:
			if id != mine {
				t.Errorf("reported %q, want %q", id, mine)
			}
			reported = true
		case <-time.After(2 * time.Second):
			h.run.Start(mine)
		case <-deadline:
			t.Fatal("no event for the stopped container")
		}
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Watch returned %v, want context.Canceled", err)
	}
}
