package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend/openhands"
	"github.com/reclaimer/reclaimer/internal/backend/openhands/openhandstest"
	"github.com/reclaimer/reclaimer/internal/dockerclient/dockertest"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// agentServer is an OpenHands agent-server's storage laid out as its
// Docker mode does (openhandstest).
type agentServer = openhandstest.AgentServer

func newAgentServerIn(t *testing.T, base string) *agentServer { return openhandstest.New(t, base) }

var markerFormat = regexp.MustCompile(`^\{"retired_at": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?\+00:00"\}$`)

// TestOpenHandsEndToEnd drives an agent-server's layout through the CLI
// on the real Engine: discovery finds its storage and its containers (and
// nothing else), init's file, with retention turned on by editing it,
// archives the idle conversation (workspace and home less caches,
// verified), writes the archive marker as the agent-server does, removes
// its stopped container and folder, keeps the manifest and the history;
// the orphans (a folder and container without a manifest, an
// owner-labelled container mounting nothing) are swept after grace;
// restore removes the marker and brings the folder back, and a container
// started as the agent-server starts one resumes in it.
func TestOpenHandsEndToEnd(t *testing.T) {
	c := dockertest.Client(t)
	run := dockertest.NewRun(t, c)
	m := newFakeMachine(t)
	m.docker = true
	a := newAgentServerIn(t, m.home)
	owner := map[string]string{openhands.OwnerLabel: a.L.Owner()}
	old := time.Now().Add(-72 * time.Hour)
	suffix := "-" + openhandstest.NewID()[:8]

	idle := a.Create("")
	a.Run(idle, old)
	manifest, err := os.ReadFile(a.L.ManifestPath(idle))
	if err != nil {
		t.Fatal(err)
	}
	idleC := run.Create(dockertest.Spec{Name: "oh-idle" + suffix, Labels: owner, Binds: a.Binds(idle)})
	stray := openhandstest.NewID() // a runtime folder and container without a manifest
	a.Run(stray, old)
	strayC := run.Create(dockertest.Spec{Name: "oh-stray" + suffix, Labels: owner, Binds: a.Binds(stray)})
	unclaimedC := run.Create(dockertest.Spec{Name: "oh-unclaimed" + suffix, Labels: owner})
	// A stopped execution-only container (a crash left it).
	execC := run.Create(dockertest.Spec{Name: openhands.ExecutionNamePrefix + openhandstest.NewID()[:12],
		Labels: map[string]string{openhands.ExecutionScopeLabel: a.L.ExecutionScope()}})

	opts := m.options()
	opts.Discover.ContainerLabels = map[string]string{dockertest.LabelKey: run.Label}
	m.env = opts

	// Discovery: the agent-server's storage, from the home and from its
	// containers' mounts, as one [[openhands]] source (its execution-only
	// container with it, not a second source); nothing else.
	out, errOut := m.runOK("plan")
	if !strings.Contains(out, "OpenHands (openhands): 3 found") || !strings.Contains(out, "managed with it") || !strings.Contains(out, `persistence_dir = "`+a.L.PersistenceDir+`"`) ||
		strings.Count(out, "[[") != 1 {
		t.Errorf("discovery of the agent-server:\n%s\n%s", out, errOut)
	}
	got := strings.Join(m.ls(), "\n")
	for _, id := range []string{idle, stray, openhands.ContainerPrefix + "oh-unclaimed" + suffix} {
		if !strings.Contains(got, "openhands/"+id+" ") {
			t.Errorf("ls over the discovery lacks %s:\n%s", id, got)
		}
	}

	// The operator's second step is editing: retention on, no notice.
	file := filepath.Join(m.base, "reclaimer.toml")
	m.runOK("init", "--write", file)
	data, _ := os.ReadFile(file)
	edited := strings.Replace(strings.Replace(string(data), `retention = "off"`, `retention = "1d"`, 1), `grace = "24h"`, `grace = "0s"`, 1)
	if edited == string(data) {
		t.Fatalf("init's file has no retention or grace to edit:\n%s", data)
	}
	write(t, file, edited)
	for i := 0; i < 4 && (exists(a.L.RunDir(idle)) || exists(a.L.RunDir(stray)) || run.State(unclaimedC) != "gone" || run.State(execC) != "gone"); i++ {
		m.runOK("--config", file, "apply")
	}
	marker, err := os.ReadFile(a.L.MarkerPath(idle))
	if err != nil || !markerFormat.Match(marker) {
		t.Fatalf("archive marker %q, %v", marker, err)
	}
	if exists(a.L.RunDir(idle)) || run.State(idleC) != "gone" {
		t.Errorf("after retention: folder there %v, container %s", exists(a.L.RunDir(idle)), run.State(idleC))
	}
	if now, _ := os.ReadFile(a.L.ManifestPath(idle)); string(now) != string(manifest) {
		t.Error("the manifest changed")
	}
	if !exists(filepath.Join(a.L.ConversationDir(idle), "bash_events", "event-0.json")) || !exists(a.L.StatePath(idle)) {
		t.Error("the history was touched")
	}
	if exists(a.L.RunDir(stray)) || run.State(strayC) != "gone" || run.State(unclaimedC) != "gone" || run.State(execC) != "gone" {
		t.Errorf("orphans not swept: folder %v, containers %s %s %s", exists(a.L.RunDir(stray)), run.State(strayC), run.State(unclaimedC), run.State(execC))
	}
	out, _ = m.runOK("--config", file, "archives", idle)
	if !strings.Contains(out, idle) {
		t.Errorf("archives of %s:\n%s", idle, out)
	}

	// Restore: the folder back (less caches), the marker gone.
	m.runOK("--config", file, "restore", idle)
	if exists(a.L.MarkerPath(idle)) {
		t.Error("the marker is still there after restore")
	}
	if b, err := os.ReadFile(filepath.Join(a.L.Workspace(idle), "app.py")); err != nil || string(b) != "print('hello')\n" {
		t.Errorf("restored workspace: %q %v", b, err)
	}
	if !exists(filepath.Join(a.L.Home(idle), ".bashrc")) || exists(filepath.Join(a.L.Home(idle), ".cache")) {
		t.Errorf("restored home: .bashrc %v, .cache %v (want the home less caches)",
			exists(filepath.Join(a.L.Home(idle), ".bashrc")), exists(filepath.Join(a.L.Home(idle), ".cache")))
	}
	// Resume: the agent-server's container on the restored folders works.
	resumed := run.Create(dockertest.Spec{Name: "oh-resumed" + suffix, Labels: owner, Binds: a.Binds(idle),
		Args: []string{"/workspace/resumed.txt=resumed"}, Start: true})
	run.Wait(resumed)
	if b, err := os.ReadFile(filepath.Join(a.L.Workspace(idle), "resumed.txt")); err != nil || string(b) != "resumed" {
		t.Errorf("the resumed container did not work in the restored workspace: %q %v", b, err)
	}
	var rows []struct {
		ID, State, Orphan string
	}
	out, _ = m.runOK("--config", file, "ls", "--json")
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, r := range rows {
		states[r.ID] = r.State
		if r.ID == idle && r.Orphan != "" {
			t.Errorf("the resumed conversation is an orphan: %s", r.Orphan)
		}
	}
	// The swept orphans stay in the ledger's record as deleted.
	if len(states) != 4 || states[idle] != "stopped" || states[stray] != "deleted" || states[openhands.ContainerPrefix+"oh-unclaimed"+suffix] != "deleted" {
		t.Errorf("after resume: %v", states)
	}

	// A conversation that ran but lost its folder and containers (not
	// archived): an orphan; swept, it is marked archived as the
	// agent-server's own retention leaves it, its manifest (the keys to the
	// history) and history kept.
	lost := a.Create("")
	testtree.Write(t, a.L.StatePath(lost), `{"execution_status": "idle"}`)
	lostManifest, _ := os.ReadFile(a.L.ManifestPath(lost))
	if out, _ := m.runOK("--config", file, "ls", "-o", "wide"); !strings.Contains(out, lost) {
		t.Errorf("the lost conversation is not listed:\n%s", out)
	}
	for i := 0; i < 3 && !exists(a.L.MarkerPath(lost)); i++ {
		m.runOK("--config", file, "apply")
	}
	if marker, err := os.ReadFile(a.L.MarkerPath(lost)); err != nil || !markerFormat.Match(marker) {
		t.Errorf("the lost conversation's marker: %q %v", marker, err)
	}
	if now, _ := os.ReadFile(a.L.ManifestPath(lost)); string(now) != string(lostManifest) || !exists(a.L.StatePath(lost)) {
		t.Error("the lost conversation's manifest or history changed")
	}
}
