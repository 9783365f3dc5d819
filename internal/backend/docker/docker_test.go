package docker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/docker"
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

var _ = fmt.Sprint
var _ = strings.Cut
var _ = context.Background
var _ = archive.ReadManifest
var _ = backend.StepCaches
var _ = docker.Name
var _ = time.Second
