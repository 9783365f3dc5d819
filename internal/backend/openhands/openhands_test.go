package openhands_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

var cacheDirs = []string{".cache", ".npm"}

func newBackend(a *agentServer) *openhands.Backend {
	return openhands.New(openhands.Options{Layout: a.L, Git: gitcmd.Runner{Timeout: time.Minute}, CacheDirs: cacheDirs})
}

func list(t *testing.T, b *openhands.Backend) map[string]backend.Runtime {
	t.Helper()
	rts, _ := listWarned(t, b)
	return rts
}

// listWarned lists, and returns the listing's warnings too.
func listWarned(t *testing.T, b *openhands.Backend) (map[string]backend.Runtime, backend.Warnings) {
	t.Helper()
	rts, err := b.List(testtree.Context(t), backend.ListOptions{})
	var warnings backend.Warnings
	if err != nil && !errors.As(err, &warnings) {
		t.Fatal(err)
	}
	out := map[string]backend.Runtime{}
	for _, rt := range rts {
		out[rt.ID] = rt
	}
	return out, warnings
}

// TestLayoutDerivesWhatTheAgentServerDoes: the paths of its storage module
// and the label values its registries compute.
func TestLayoutDerivesWhatTheAgentServerDoes(t *testing.T) {
	l, err := openhands.NewLayout("/srv/oh/workspace/.openhands", "")
	if err != nil {
		t.Fatal(err)
	}
	if l.ConversationsDir != "/srv/oh/workspace/conversations" {
		t.Errorf("default conversations dir %q", l.ConversationsDir)
	}
	id := "0123456789abcdef0123456789abcdef"
	for got, want := range map[string]string{
		l.ManifestPath(id): "/srv/oh/workspace/.openhands/runtime-control/" + id + ".json",
		l.MarkerPath(id):   "/srv/oh/workspace/.openhands/runtime-control/" + id + ".archived.json",
		l.Home(id):         "/srv/oh/workspace/.openhands/runtime-data/" + id + "/persistence",
		l.Workspace(id):    "/srv/oh/workspace/.openhands/runtime-data/" + id + "/workspace",
		l.StatePath(id):    "/srv/oh/workspace/conversations/" + id + "/base_state.json",
		l.TrashDir():       "/srv/oh/workspace/.openhands/runtime-data/.trash",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	owner := sha256.Sum256([]byte("/srv/oh/workspace/conversations\x00/srv/oh/workspace/.openhands"))
	if want := hex.EncodeToString(owner[:])[:24]; l.Owner() != want {
		t.Errorf("Owner = %s, want %s", l.Owner(), want)
	}
	scope := sha256.Sum256([]byte("/srv/oh/workspace/conversations"))
	if want := hex.EncodeToString(scope[:])[:24]; l.ExecutionScope() != want {
		t.Errorf("ExecutionScope = %s, want %s", l.ExecutionScope(), want)
	}
	if openhands.UUID(id) != "01234567-89ab-cdef-0123-456789abcdef" {
		t.Errorf("UUID = %s", openhands.UUID(id))
	}
	if _, err := openhands.NewLayout("/srv/oh/persist", ""); err == nil {
		t.Error("a persistence dir not named .openhands needs conversations_dir")
	}
	if _, err := openhands.NewLayout("relative/.openhands", ""); err == nil {
		t.Error("a relative persistence dir was accepted")
	}
}

// TestMarkerContentIsPythons: the marker's bytes are what json.dumps of
// {"retired_at": datetime.now(UTC).isoformat()} gives.
func TestMarkerContentIsPythons(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 891234000, time.FixedZone("x", 3600))
	if got, want := string(openhands.MarkerContent(at)), `{"retired_at": "2026-03-04T04:06:07.891234+00:00"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got, want := string(openhands.MarkerContent(at.Truncate(time.Second))), `{"retired_at": "2026-03-04T04:06:07+00:00"}`; got != want {
		t.Errorf("whole second: got %s, want %s", got, want)
	}
}

// TestListConversations: each conversation's runtime folder with its home
// and workspace, its last activity from base_state.json, its id as the
// API writes it; a caller's workspace is named but not managed; nothing
// else of the layout is a runtime.
func TestListConversations(t *testing.T) {
	a := newAgentServer(t)
	old := time.Now().Add(-72 * time.Hour).Truncate(time.Second)
	one := a.Create("")
	a.Run(one, old)
	checkout := filepath.Join(filepath.Dir(a.L.PersistenceDir), "user-checkout")
	testtree.Write(t, filepath.Join(checkout, "main.go"), "package main\n")
	two := a.Create(checkout)
	a.Run(two, old)
	// base_state.json written later than every file: the activity.
	recent := time.Now().Add(-time.Hour).Truncate(time.Second)
	testtree.Age(t, recent, a.L.StatePath(one))

	rts := list(t, newBackend(a))
	if len(rts) != 2 {
		t.Fatalf("runtimes: %v", slices.Collect(mapsKeys(rts)))
	}
	rt := rts[one]
	if rt.State != backend.StateStopped || rt.Path != a.L.RunDir(one) || rt.Root != a.L.DataRoot() ||
		rt.Home != a.L.Home(one) || !slices.Equal(rt.Workspaces, []string{a.L.Workspace(one)}) {
		t.Errorf("conversation: %+v", rt)
	}
	if !rt.LastActivity.Equal(recent) {
		t.Errorf("last activity %v, want base_state.json's %v", rt.LastActivity, recent)
	}
	if rt.Labels["conversation_id"] != openhands.UUID(one) || rt.Labels["history"] != a.L.ConversationDir(one) {
		t.Errorf("labels %v", rt.Labels)
	}
	if rt.Unsaved == "" || rt.Orphan != "" || rt.Pinned != "" {
		t.Errorf("unsaved %q orphan %q pinned %q", rt.Unsaved, rt.Orphan, rt.Pinned)
	}
	rt = rts[two]
	if len(rt.Workspaces) != 0 || rt.Labels["caller_workspace"] != checkout {
		t.Errorf("a caller's workspace: workspaces %v, labels %v", rt.Workspaces, rt.Labels)
	}
	if !rt.LastActivity.Equal(old) {
		t.Errorf("last activity %v, want %v", rt.LastActivity, old)
	}
}

func mapsKeys(m map[string]backend.Runtime) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestOrphansAndDamageAreReported: a runtime folder without a manifest, a
// conversation the agent-server archived whose folder is still there, and
// the agent-server's trash are orphans; a conversation whose folder is gone
// although it ran (its history is there) is a warning of the listing, and
// one not started yet (a manifest only) or archived (manifest and marker)
// is not listed; a manifest that names another conversation, or is a
// link, is reported and pinned.
func TestOrphansAndDamageAreReported(t *testing.T) {
	a := newAgentServer(t)
	old := time.Now().Add(-72 * time.Hour)
	noManifest := openhandstest.NewID()
	a.Run(noManifest, old)
	half := a.Create("")
	a.Run(half, old)
	testtree.Write(t, a.L.MarkerPath(half), `{"retired_at": "2026-01-01T00:00:00+00:00"}`)
	fresh := a.Create("")
	lost := a.Create("")
	a.Run(lost, old)
	if err := os.RemoveAll(a.L.RunDir(lost)); err != nil {
		t.Fatal(err)
	}
	archived := a.Create("")
	a.Run(archived, old)
	a.Retire(archived)
	mismatch := a.Create("")
	a.Run(mismatch, old)
	other := openhandstest.NewID()
	data := strings.Replace(a.ManifestBytes(mismatch), openhands.UUID(mismatch), openhands.UUID(other), 1)
	testtree.Write(t, a.L.ManifestPath(mismatch), data)
	linked := openhandstest.NewID()
	a.Run(linked, old)
	if err := os.Symlink(a.L.ManifestPath(mismatch), a.L.ManifestPath(linked)); err != nil {
		t.Fatal(err)
	}

	rts, warnings := listWarned(t, newBackend(a))
	check := func(id string, state backend.State, orphan, pinned string) {
		t.Helper()
		rt, ok := rts[id]
		if !ok {
			t.Fatalf("%s not listed", id)
		}
		if rt.State != state || !strings.Contains(rt.Orphan, orphan) || (orphan == "" && rt.Orphan != "") ||
			!strings.Contains(rt.Pinned, pinned) || (pinned == "" && rt.Pinned != "") {
			t.Errorf("%s: state %s, orphan %q, pinned %q; want %s, %q, %q", id, rt.State, rt.Orphan, rt.Pinned, state, orphan, pinned)
		}
	}
	check(noManifest, backend.StateStopped, "no runtime-control manifest", "")
	check(half, backend.StateStopped, "archived by the agent-server", "")
	for _, id := range []string{fresh, archived} {
		if _, ok := rts[id]; ok {
			t.Errorf("%s listed: nothing of it is there to manage", id)
		}
	}
	// A conversation that ran and lost its folder: an orphan, with no path.
	check(lost, backend.StateStopped, "folder and containers are gone, not archived", "")
	if rt := rts[lost]; rt.Path != "" || rt.LastActivity.IsZero() {
		t.Errorf("lost: path %q, last activity %v", rt.Path, rt.LastActivity)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q", warnings)
	}
	check(mismatch, backend.StateStopped, "", "names conversation")
	check(linked, backend.StateStopped, "", "is a symbolic link")
	check(openhands.TrashID, backend.StateUnowned, "set aside for deletion", "")
	if rts[half].Labels["archived_at"] == "" {
		t.Errorf("half archived: labels %v", rts[half].Labels)
	}
}

// TestListRefusesWhatIsNotAnAgentServer: a persistence folder without
// runtime-control, or whose runtime-data is a link, is an error, not an
// empty listing.
func TestListRefusesWhatIsNotAnAgentServer(t *testing.T) {
	a := newAgentServer(t)
	if err := os.Remove(a.L.ControlDir()); err != nil {
		t.Fatal(err)
	}
	if _, err := newBackend(a).List(testtree.Context(t), backend.ListOptions{}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("without runtime-control: %v", err)
	}
	b := newAgentServer(t)
	elsewhere := t.TempDir()
	if err := os.Remove(b.L.DataRoot()); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, b.L.DataRoot()); err != nil {
		t.Fatal(err)
	}
	if _, err := newBackend(b).List(testtree.Context(t), backend.ListOptions{}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("runtime-data a link: %v", err)
	}
}

// world is an engine over one agent-server's layout with a local sink.
type world struct {
	a       *agentServer
	b       *openhands.Backend
	eng     *engine.Engine
	sink    *sink.Local
	ledger  *sqlite.Store
	archive string
}

func newWorld(t *testing.T, a *agentServer, b *openhands.Backend, settings policy.Settings) *world {
	t.Helper()
	base := t.TempDir()
	ctx := testtree.Context(t)
	store, err := sqlite.Open(ctx, filepath.Join(base, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	archives := filepath.Join(base, "archives")
	local, err := sink.NewLocal(archives)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{Ledger: store, StateDir: filepath.Join(base, "state"), ArchiveDir: archives, Sink: local,
		Sources: []engine.Source{{Name: sourceName, Backend: b, Settings: settings}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &world{a: a, b: b, eng: eng, sink: local, ledger: store, archive: archives}
}

// pass plans and applies once, and returns what was done.
func (w *world) pass(t *testing.T, reqs ...policy.Request) []plan.Result {
	t.Helper()
	ctx := testtree.Context(t)
	p, _, err := w.eng.Plan(ctx, engine.PlanOptions{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.eng.Apply(ctx, p, engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Results
}

// TestRetentionWritesTheMarkerAndRestoreResumes: retention archives an idle
// conversation's runtime folder (workspace and home, less caches),
// verified, then writes the agent-server's archive marker byte for byte as
// it does and moves the folder away; the manifest and history stay, and
// the conversation lists as archived. Restore brings the folder back and
// removes the marker: the agent-server would start it again.
func TestRetentionWritesTheMarkerAndRestoreResumes(t *testing.T) {
	a := newAgentServer(t)
	id := a.Create("")
	a.Run(id, time.Now().Add(-72*time.Hour))
	keep := a.Create("")
	a.Run(keep, time.Now().Add(-time.Minute))
	manifest := a.ManifestBytes(id)
	ws := testtree.Fingerprint(t, a.L.Workspace(id))
	bashrc, err := os.ReadFile(filepath.Join(a.L.Home(id), ".bashrc"))
	if err != nil {
		t.Fatal(err)
	}
	retired := time.Date(2026, 5, 6, 7, 8, 9, 123456000, time.UTC)
	b := openhands.New(openhands.Options{Layout: a.L, Git: gitcmd.Runner{Timeout: time.Minute}, CacheDirs: cacheDirs,
		Now: func() time.Time { return retired }})
	// No caches step: the caches are still there when the archive is made.
	w := newWorld(t, a, b, policy.Settings{Retention: 24 * time.Hour})

	var results []plan.Result
	for i := 0; i < 3 && !slices.ContainsFunc(results, func(r plan.Result) bool { return r.Step == backend.StepArchive }); i++ {
		results = w.pass(t) // the first pass announces, a later one acts
	}
	var archiveID string
	for _, r := range results {
		if r.Step == backend.StepArchive {
			if r.Runtime != id || r.Outcome != plan.Done {
				t.Fatalf("archive result %+v", r)
			}
			archiveID = r.ArchiveID
		}
	}
	if archiveID == "" {
		t.Fatalf("no archive after three passes: %+v", results)
	}
	marker, err := os.ReadFile(a.L.MarkerPath(id))
	if err != nil {
		t.Fatalf("no archive marker: %v", err)
	}
	if want := `{"retired_at": "2026-05-06T07:08:09.123456+00:00"}`; string(marker) != want {
		t.Errorf("marker %s, want %s", marker, want)
	}
	if _, err := os.Lstat(a.L.RunDir(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the runtime folder is still there: %v", err)
	}
	if a.ManifestBytes(id) != manifest {
		t.Error("the manifest changed")
	}
	if _, err := os.Stat(filepath.Join(a.L.ConversationDir(id), "events", "event-00000-0.json")); err != nil {
		t.Errorf("the history is gone: %v", err)
	}
	if _, err := os.Stat(a.L.RunDir(keep)); err != nil {
		t.Errorf("the recent conversation was touched: %v", err)
	}
	if rt, ok := list(t, b)[id]; ok {
		t.Errorf("after retention it is still listed: %+v", rt)
	}

	// The archive holds the workspace and the home, not the caches.
	recs, err := w.ledger.ListArchives(testtree.Context(t), toLedgerKey(backend.Key{Backend: openhands.Name, ID: id}))
	if err != nil || len(recs) != 1 {
		t.Fatalf("archives %+v %v", recs, err)
	}
	var m struct {
		Excluded []string `json:"excluded"`
		Survives []string `json:"survives"`
	}
	if err := json.Unmarshal(recs[0].Manifest, &m); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(m.Excluded, func(s string) bool { return strings.Contains(s, "persistence/.cache") }) ||
		!slices.ContainsFunc(m.Excluded, func(s string) bool { return strings.Contains(s, "persistence/.npm") }) {
		t.Errorf("caches not left out: %v", m.Excluded)
	}

	dest, err := b.Restore(testtree.Context(t), backend.Key{Backend: openhands.Name, ID: id},
		backend.RestoreOptions{Manifest: recs[0].Manifest, Sink: w.sink, Staging: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if dest != a.L.RunDir(id) {
		t.Errorf("restored to %s", dest)
	}
	if _, err := os.Lstat(a.L.MarkerPath(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the marker is still there: %v", err)
	}
	if got := testtree.Fingerprint(t, a.L.Workspace(id)); got != ws {
		t.Error("the workspace came back different")
	}
	if got, err := os.ReadFile(filepath.Join(a.L.Home(id), ".bashrc")); err != nil || string(got) != string(bashrc) {
		t.Errorf("the home came back without its files: %v", err)
	}
	if _, err := os.Stat(filepath.Join(a.L.Home(id), ".cache")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("caches came back from an archive that should not hold them: %v", err)
	}
	if rt := list(t, b)[id]; rt.State != backend.StateStopped || rt.Orphan != "" {
		t.Errorf("after restore: %+v", rt)
	}
}

// TestDeleteLeavesAnExistingMarkerAndTheManifest: a delete of a
// conversation the agent-server had already marked keeps its marker, and
// neither touches the manifest.
func TestDeleteLeavesAnExistingMarkerAndTheManifest(t *testing.T) {
	a := newAgentServer(t)
	id := a.Create("")
	a.Run(id, time.Now().Add(-72*time.Hour))
	ours := `{"retired_at": "2025-12-31T23:59:59+00:00"}`
	testtree.Write(t, a.L.MarkerPath(id), ours)
	manifest := a.ManifestBytes(id)
	b := newBackend(a)
	rt := list(t, b)[id]
	var moved []string
	err := b.Delete(testtree.Context(t), rt, backend.DeleteOptions{Discard: func(p string) error {
		moved = append(moved, p)
		return os.Rename(p, p+".gone")
	}})
	if err != nil || !slices.Equal(moved, []string{a.L.RunDir(id)}) {
		t.Fatalf("Delete = %v, moved %v", err, moved)
	}
	if got, _ := os.ReadFile(a.L.MarkerPath(id)); string(got) != ours {
		t.Errorf("marker rewritten: %s", got)
	}
	if a.ManifestBytes(id) != manifest {
		t.Error("manifest changed")
	}
	// A runtime that claims another folder is refused.
	rt.Path = filepath.Join(a.L.DataRoot(), "elsewhere")
	if err := b.Delete(testtree.Context(t), rt, backend.DeleteOptions{Discard: os.RemoveAll}); !errors.Is(err, backend.ErrProtected) {
		t.Errorf("Delete of a wrong path = %v, want ErrProtected", err)
	}
}

// TestCapabilities pins the backend's roles.
func TestCapabilities(t *testing.T) {
	got := backend.Capabilities(newBackend(newAgentServer(t)))
	want := []string{"Lister", "Suspender", "Deleter", "FileReclaimer", "Exporter", "Locker", "Restorer", "Watcher"}
	if !slices.Equal(got, want) {
		t.Errorf("capabilities %v, want %v", got, want)
	}
}

// toLedgerKey is the key the engine records a runtime of the test's one
// source under.
func toLedgerKey(k backend.Key) ledger.Key {
	return ledger.Key{Source: sourceName, Backend: k.Backend, ID: k.ID}
}

const sourceName = "openhands[0]"

// TestOrphansAreSwept: with no policy but the orphan sweep (grace zero), a
// runtime folder without a manifest is archived and removed, the
// agent-server's trash emptied; a conversation with its manifest is left
// alone, and so is a manifest whose folder is gone (nothing to free).
func TestOrphansAreSwept(t *testing.T) {
	a := newAgentServer(t)
	old := time.Now().Add(-72 * time.Hour)
	stray := openhandstest.NewID()
	a.Run(stray, old)
	kept := a.Create("")
	a.Run(kept, old)
	gone := a.Create("")
	retired := a.Create("")
	a.Run(retired, old)
	a.Retire(retired)    // leaves an entry in its trash
	lost := a.Create("") // ran, then lost its folder (not archived)
	a.Run(lost, old)
	if err := os.RemoveAll(a.L.RunDir(lost)); err != nil {
		t.Fatal(err)
	}
	lostManifest := a.ManifestBytes(lost)
	w := newWorld(t, a, newBackend(a), policy.Settings{})
	for i := 0; i < 3; i++ {
		w.pass(t)
	}
	if _, err := os.Lstat(a.L.RunDir(stray)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the folder without a manifest is still there: %v", err)
	}
	recs, err := w.ledger.ListArchives(testtree.Context(t), toLedgerKey(backend.Key{Backend: openhands.Name, ID: stray}))
	if err != nil || len(recs) != 1 {
		t.Errorf("the stray folder was not archived first: %+v %v", recs, err)
	}
	if names := testtree.Names(t, a.L.TrashDir()); len(names) != 0 {
		t.Errorf("the agent-server's trash still holds %v", names)
	}
	if _, err := os.Stat(a.L.RunDir(kept)); err != nil {
		t.Errorf("a conversation with its manifest was touched: %v", err)
	}
	if a.ManifestBytes(gone) == "" {
		t.Error("the manifest without a folder is empty")
	}
	if _, err := os.Lstat(a.L.MarkerPath(gone)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a marker was written for the manifest without a folder: %v", err)
	}
	// The lost conversation is marked archived, as the agent-server's own
	// retention would leave it; its manifest and history stay.
	if data, err := os.ReadFile(a.L.MarkerPath(lost)); err != nil || !strings.HasPrefix(string(data), `{"retired_at": "`) {
		t.Errorf("the lost conversation's marker: %q %v", data, err)
	}
	if a.ManifestBytes(lost) != lostManifest {
		t.Error("the lost conversation's manifest changed")
	}
	if _, err := os.Stat(a.L.StatePath(lost)); err != nil {
		t.Errorf("the lost conversation's history: %v", err)
	}
	if _, ok := list(t, newBackend(a))[lost]; ok {
		t.Error("the lost conversation is still listed once marked archived")
	}
}

// TestVanishedConversation: a conversation whose manifest and folder went
// behind reclaimer's back is not listed; deleting it is a no-op that writes
// no marker, and suspending it is not found.
func TestVanishedConversation(t *testing.T) {
	a := newAgentServer(t)
	id := a.Create("")
	a.Run(id, time.Now().Add(-time.Hour))
	b := newBackend(a)
	rt := list(t, b)[id]
	for _, p := range []string{a.L.ManifestPath(id), a.L.RunDir(id)} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := list(t, b)[id]; ok {
		t.Error("a vanished conversation is listed")
	}
	ctx := testtree.Context(t)
	for i := 0; i < 2; i++ {
		if err := b.Delete(ctx, rt, backend.DeleteOptions{Discard: func(string) error { t.Fatal("discarded"); return nil }}); err != nil {
			t.Fatalf("delete of a vanished conversation: %v", err)
		}
	}
	if _, err := os.Lstat(a.L.MarkerPath(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a marker was written for a conversation that is gone: %v", err)
	}
	if err := b.Suspend(ctx, rt, backend.SuspendOptions{}); !errors.Is(err, backend.ErrNotFound) && !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("suspend of a vanished conversation = %v", err)
	}
}
