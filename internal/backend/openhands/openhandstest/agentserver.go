package openhandstest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend/openhands"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// AgentServer lays out an agent-server's storage the way its code does
// (openhands/agent_server/docker_runtime: RuntimeProvisioningStore,
// DockerConversationRegistry, DockerStorageAdapter), in a folder:
//
//   - at start, P/runtime-control and P/runtime-data are made 0700;
//   - creating a conversation writes P/runtime-control/<hex>.json, the
//     pydantic JSON of its RuntimeIdentity (conversation_id as a dashed
//     UUID, the keys encrypted, workspace_path), through a temporary file
//     renamed into place;
//   - starting its container makes runtime-data/<hex>/persistence (the
//     sandbox $HOME), the conversation folder C/<hex> and the workspace
//     (0700), which the container then fills: $HOME dotfiles and caches,
//     the agent's work, meta.json, base_state.json, events/ and
//     bash_events/;
//   - its retention writes the marker, then renames the runtime folder
//     into runtime-data/.trash/<random>.
type AgentServer struct {
	t *testing.T
	// L is where the agent-server keeps what it keeps.
	L openhands.Layout
}

// New starts an agent-server with its default pairing (conversations
// beside .openhands) below base: base/workspace/.openhands.
func New(t *testing.T, base string) *AgentServer {
	t.Helper()
	l, err := openhands.NewLayout(filepath.Join(base, "workspace", ".openhands"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{l.ControlDir(), l.DataRoot(), l.ConversationsDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return &AgentServer{t: t, L: l}
}

// NewID is a conversation id as the agent-server writes it: a version 4
// UUID (uuid4()) in hex.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}

// Create is provisioning.create(conversation_id, workspace): the manifest
// only. workspace "" means the agent-server's own, in the runtime folder.
func (a *AgentServer) Create(workspace string) string {
	a.t.Helper()
	id := NewID()
	if workspace == "" {
		workspace = a.L.Workspace(id)
	}
	identity := map[string]any{
		"conversation_id":        openhands.UUID(id),
		"api_key":                "gAAAAABencrypted-api-key",
		"encryption_key":         "gAAAAABencrypted-encryption-key",
		"grants":                 map[string]any{"subscription": nil, "credential_names": []string{}, "mcp_server_names": []string{}},
		"launched_agent_profile": nil,
		"auxiliary_subscription": false,
		"broker_token":           "gAAAAABencrypted-broker-token",
		"workspace_path":         workspace,
	}
	data, err := json.Marshal(identity)
	if err != nil {
		a.t.Fatal(err)
	}
	tmp := filepath.Join(a.L.ControlDir(), "tmp"+id[:8])
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		a.t.Fatal(err)
	}
	if err := os.Rename(tmp, a.L.ManifestPath(id)); err != nil {
		a.t.Fatal(err)
	}
	return id
}

// Run is what starting the conversation's container and working in it
// leaves: the folders, a home with dotfiles and caches, the agent's work,
// the history; every file last written at lastActive.
func (a *AgentServer) Run(id string, lastActive time.Time) {
	a.t.Helper()
	home, ws, conv := a.L.Home(id), a.L.Workspace(id), a.L.ConversationDir(id)
	for _, d := range []string{home, ws, conv} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			a.t.Fatal(err)
		}
	}
	testtree.Write(a.t, filepath.Join(home, ".bashrc"), "export PS1='$ '\n")
	testtree.Write(a.t, filepath.Join(home, ".cache", "uv", "wheel.whl"), strings.Repeat("w", 64<<10))
	testtree.Write(a.t, filepath.Join(home, ".npm", "_cacache", "index"), strings.Repeat("n", 16<<10))
	testtree.Write(a.t, filepath.Join(home, ".gitconfig"), "[user]\n\tname = agent\n")
	testtree.Write(a.t, filepath.Join(ws, "app.py"), "print('hello')\n")
	testtree.Write(a.t, filepath.Join(ws, "notes", "plan.md"), "1. write app\n")
	testtree.Write(a.t, filepath.Join(conv, "meta.json"), `{"title": "build the app"}`)
	testtree.Write(a.t, filepath.Join(conv, "events", "event-00000-0.json"), `{"kind": "MessageEvent"}`)
	testtree.Write(a.t, filepath.Join(conv, "bash_events", "event-0.json"), `{"command": "ls"}`)
	testtree.Write(a.t, a.L.StatePath(id), `{"execution_status": "idle"}`)
	testtree.Age(a.t, lastActive, a.L.RunDir(id), conv)
}

// Retire is the agent-server's own retention: marker first, then the
// runtime folder into its trash.
func (a *AgentServer) Retire(id string) {
	a.t.Helper()
	if err := os.WriteFile(a.L.MarkerPath(id), openhands.MarkerContent(time.Now()), 0o644); err != nil {
		a.t.Fatal(err)
	}
	if err := os.MkdirAll(a.L.TrashDir(), 0o700); err != nil {
		a.t.Fatal(err)
	}
	if err := os.Rename(a.L.RunDir(id), filepath.Join(a.L.TrashDir(), NewID()[:12])); err != nil {
		a.t.Fatal(err)
	}
}

// ManifestBytes is the manifest as it is now (it must never change).
func (a *AgentServer) ManifestBytes(id string) string {
	a.t.Helper()
	data, err := os.ReadFile(a.L.ManifestPath(id))
	if err != nil {
		a.t.Fatal(err)
	}
	return string(data)
}

// Binds are the mounts the agent-server gives a conversation's container.
func (a *AgentServer) Binds(id string) []string {
	return []string{a.L.ConversationDir(id) + ":/var/openhands/conversations/" + id,
		a.L.Home(id) + ":/var/openhands/.openhands", a.L.Workspace(id) + ":/workspace"}
}
