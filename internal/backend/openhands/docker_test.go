package openhands_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/openhands"
	"github.com/reclaimer/reclaimer/internal/backend/openhands/openhandstest"
	"github.com/reclaimer/reclaimer/internal/dockerclient/dockertest"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// conversationBinds are the mounts the agent-server gives a conversation's
// container.
func conversationBinds(l openhands.Layout, id string) []string {
	return []string{
		l.ConversationDir(id) + ":/var/openhands/conversations/" + id,
		l.Home(id) + ":/var/openhands/.openhands",
		l.Workspace(id) + ":/workspace",
	}
}

func unique(t *testing.T, what string) string {
	return strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name())) + "-" + what + "-" + openhandstest.NewID()[:6]
}

// TestContainersOnTheRealEngine: a conversation whose container runs is
// running and nothing of it is touched (a delete is refused and leaves no
// marker); once stopped it is removed with its container. An
// owner-labelled container that mounts no conversation, or one whose
// folder has no manifest, and a stopped execution container are orphans;
// containers of another agent-server are not listed; a folder a foreign
// running container mounts is busy.
func TestContainersOnTheRealEngine(t *testing.T) {
	c := dockertest.Client(t)
	run := dockertest.NewRun(t, c)
	a := newAgentServer(t)
	old := time.Now().Add(-72 * time.Hour)
	owner := map[string]string{openhands.OwnerLabel: a.L.Owner()}

	live := a.Create("")
	a.Run(live, old)
	liveName := unique(t, "live")
	liveC := run.Create(dockertest.Spec{Name: liveName, Labels: owner, Binds: conversationBinds(a.L, live), Args: []string{"sleep"}, Start: true})

	noManifest := openhandstest.NewID()
	a.Run(noManifest, old)
	strayName := unique(t, "stray")
	run.Create(dockertest.Spec{Name: strayName, Labels: owner, Binds: conversationBinds(a.L, noManifest)})
	unclaimedName := unique(t, "unclaimed")
	run.Create(dockertest.Spec{Name: unclaimedName, Labels: owner})
	execName := unique(t, "exec")
	run.Create(dockertest.Spec{Name: execName, Labels: map[string]string{openhands.ExecutionScopeLabel: a.L.ExecutionScope()}})
	otherName := unique(t, "other")
	run.Create(dockertest.Spec{Name: otherName, Labels: map[string]string{openhands.OwnerLabel: "0123456789abcdef01234567"}})

	shared := a.Create("")
	a.Run(shared, old)
	run.Create(dockertest.Spec{Name: unique(t, "foreign"), Binds: []string{a.L.Workspace(shared) + ":/data"}, Args: []string{"sleep"}, Start: true})

	b := openhands.New(openhands.Options{Layout: a.L, Client: c, Git: gitcmd.Runner{Timeout: time.Minute}, CacheDirs: cacheDirs,
		StopTimeout: time.Second})
	ctx := testtree.Context(t)
	rts := list(t, b)
	if rt := rts[live]; rt.State != backend.StateRunning || rt.Labels["containers"] != liveName {
		t.Errorf("live: %+v", rt)
	}
	if rt := rts[noManifest]; rt.State != backend.StateStopped || !strings.Contains(rt.Orphan, "no runtime-control manifest") ||
		rt.Labels["containers"] != strayName {
		t.Errorf("a folder without a manifest, with a container: %+v", rt)
	}
	if rt := rts[openhands.ContainerPrefix+unclaimedName]; !strings.Contains(rt.Orphan, "mounts no conversation") {
		t.Errorf("unclaimed container: %+v", rt)
	}
	if rt := rts[openhands.ExecutionPrefix+execName]; rt.State != backend.StateStopped || !strings.Contains(rt.Orphan, "stopped execution container") {
		t.Errorf("stopped execution container: %+v", rt)
	}
	for id := range rts {
		if strings.Contains(id, otherName) {
			t.Errorf("another agent-server's container listed: %s", id)
		}
	}
	if rt := rts[shared]; rt.State != backend.StateStopped || !strings.Contains(rt.Busy, "mounted by running container") {
		t.Errorf("shared with a foreign container: %+v", rt)
	}

	// Running: nothing is freed, nothing removed, no marker left behind.
	if _, err := b.ReclaimFiles(ctx, rts[live], backend.FileOptions{Step: backend.StepCaches, CacheDirs: cacheDirs}); !errors.Is(err, backend.ErrBusy) {
		t.Errorf("ReclaimFiles of a running conversation = %v, want ErrBusy", err)
	}
	stale := rts[live]
	stale.State = backend.StateStopped // a plan made before it started
	err := b.Delete(ctx, stale, backend.DeleteOptions{Discard: func(string) error { t.Fatal("discarded"); return nil }})
	if !errors.Is(err, backend.ErrBusy) {
		t.Errorf("Delete of a running conversation = %v, want ErrBusy", err)
	}
	if _, err := os.Lstat(a.L.MarkerPath(live)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the marker written before the refusal stayed: %v", err)
	}

	// Suspended: stopped, then removed with its container.
	if err := b.Suspend(ctx, rts[live], backend.SuspendOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := run.State(liveC); st != "exited" {
		t.Fatalf("after suspend the container is %s", st)
	}
	rt := list(t, b)[live]
	if rt.State != backend.StateStopped {
		t.Fatalf("after suspend: %+v", rt)
	}
	var moved []string
	if err := b.Delete(ctx, rt, backend.DeleteOptions{Discard: func(p string) error {
		moved = append(moved, p)
		return os.Rename(p, filepath.Join(t.TempDir(), "gone"))
	}}); err != nil {
		t.Fatal(err)
	}
	if run.State(liveC) != "gone" || !slices.Equal(moved, []string{a.L.RunDir(live)}) {
		t.Errorf("after delete: container %s, moved %v", run.State(liveC), moved)
	}
	if _, err := os.Stat(a.L.MarkerPath(live)); err != nil {
		t.Errorf("no marker after delete: %v", err)
	}

	// Orphan containers go when deleted.
	for _, id := range []string{openhands.ContainerPrefix + unclaimedName, openhands.ExecutionPrefix + execName} {
		if err := b.Delete(ctx, rts[id], backend.DeleteOptions{}); err != nil {
			t.Errorf("delete %s: %v", id, err)
		}
		if _, ok := list(t, b)[id]; ok {
			t.Errorf("%s still listed after delete", id)
		}
	}
}

// TestMarkerRoundTripOnTheRealEngine: an idle conversation is archived by
// retention (marker, folder gone), its container would be refused by the
// agent-server; restore brings the folder back and removes the marker; a
// container started the way the agent-server starts one finds the
// conversation's files and works in them.
func TestMarkerRoundTripOnTheRealEngine(t *testing.T) {
	c := dockertest.Client(t)
	run := dockertest.NewRun(t, c)
	a := newAgentServer(t)
	id := a.Create("")
	a.Run(id, time.Now().Add(-72*time.Hour))
	b := openhands.New(openhands.Options{Layout: a.L, Client: c, Git: gitcmd.Runner{Timeout: time.Minute}, CacheDirs: cacheDirs})
	w := newWorld(t, a, b, policy.Settings{Retention: 24 * time.Hour})
	var archiveID string
	for i := 0; i < 3 && archiveID == ""; i++ {
		for _, r := range w.pass(t) {
			if r.Step == backend.StepArchive && r.Runtime == id {
				archiveID = r.ArchiveID
			}
		}
	}
	if archiveID == "" {
		t.Fatal("not archived after three passes")
	}
	if _, err := os.Stat(a.L.MarkerPath(id)); err != nil {
		t.Fatalf("no marker: %v", err)
	}
	recs, err := w.ledger.ListArchives(testtree.Context(t), toLedgerKey(backend.Key{Backend: openhands.Name, ID: id}))
	if err != nil || len(recs) != 1 {
		t.Fatalf("archives %+v %v", recs, err)
	}
	if _, err := b.Restore(testtree.Context(t), backend.Key{Backend: openhands.Name, ID: id},
		backend.RestoreOptions{Manifest: recs[0].Manifest, Sink: w.sink, Staging: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(a.L.MarkerPath(id)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker still there after restore: %v", err)
	}
	// Resume: the agent-server's container on the restored folders.
	name := unique(t, "resumed")
	cid := run.Create(dockertest.Spec{Name: name, Labels: map[string]string{openhands.OwnerLabel: a.L.Owner()},
		Binds: conversationBinds(a.L, id), Args: []string{"/workspace/resumed.txt=resumed", "/var/openhands/.openhands/.bash_history=ls\n"},
		Start: true})
	run.Wait(cid)
	if got, err := os.ReadFile(filepath.Join(a.L.Workspace(id), "resumed.txt")); err != nil || string(got) != "resumed" {
		t.Fatalf("the resumed container did not work in the restored workspace: %q %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(a.L.Workspace(id), "app.py")); err != nil || string(got) != "print('hello')\n" {
		t.Fatalf("the restored workspace lost the agent's work: %q %v", got, err)
	}
	if rt := list(t, b)[id]; rt.State != backend.StateStopped || rt.Orphan != "" || rt.Labels["containers"] != name {
		t.Errorf("after resume: %+v", rt)
	}
}
