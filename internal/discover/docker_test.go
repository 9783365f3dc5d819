package discover_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend/openhands"
	"github.com/reclaimer/reclaimer/internal/discover"
	"github.com/reclaimer/reclaimer/internal/dockerclient/dockertest"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestDiscoverOpenHandsContainers, on the real Engine: an agent-server's
// conversation container tells its layout by its mounts (accepted because
// it hashes to the owner label), which becomes an [[openhands]] source; an
// owner-labelled container whose mounts do not tell becomes a [[docker]]
// source by its owner label, an execution-only container one by its
// scope (unless its scope is a layout's found: then it is that source's);
// a container only named like one is reported without a
// configuration; an unrelated container is not found.
func TestDiscoverOpenHandsContainers(t *testing.T) {
	c := dockertest.Client(t)
	run := dockertest.NewRun(t, c)
	m := newMachine(t)
	l, err := openhands.NewLayout(filepath.Join(m.base, "srv", "agent", ".openhands"), filepath.Join(m.base, "srv", "history"))
	if err != nil {
		t.Fatal(err)
	}
	id := "00112233445566778899aabbccddeeff"
	testtree.Write(t, filepath.Join(l.ControlDir(), id+".json"), `{"conversation_id": "`+openhands.UUID(id)+`"}`)
	testtree.Write(t, filepath.Join(l.Home(id), ".bashrc"), "\n")
	testtree.Write(t, filepath.Join(l.Workspace(id), "app.py"), "\n")
	testtree.Write(t, l.StatePath(id), "{}")
	prefix := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	run.Create(dockertest.Spec{Name: prefix + "-conv", Labels: map[string]string{openhands.OwnerLabel: l.Owner()},
		Binds: []string{l.ConversationDir(id) + ":/var/openhands/conversations/" + id, l.Home(id) + ":/var/openhands/.openhands",
			l.Workspace(id) + ":/workspace"}})
	stray := "f00dfeedf00dfeedf00dfeed"
	run.Create(dockertest.Spec{Name: prefix + "-stray", Labels: map[string]string{openhands.OwnerLabel: stray}})
	scope := "5c09e5c09e5c09e5c09e5c09"
	run.Create(dockertest.Spec{Name: prefix + "-exec", Labels: map[string]string{openhands.ExecutionScopeLabel: scope}})
	// The agent-server's own execution-only container: its layout's
	// backend lists it, so it is no source of its own.
	run.Create(dockertest.Spec{Name: prefix + "-own-exec", Labels: map[string]string{openhands.ExecutionScopeLabel: l.ExecutionScope()}})
	run.Create(dockertest.Spec{Name: openhands.ExecutionNamePrefix + prefix})
	run.Create(dockertest.Spec{Name: prefix + "-unrelated"})

	r := m.discover(discover.Options{Docker: c})
	if s := source(r, discover.KindOpenHands, "persistence_dir", l.PersistenceDir); s == nil ||
		!equalValue(s.Config.Keys[1].Value, l.ConversationsDir) || len(s.Found) != 2 || s.Found[0].Path != l.RunDir(id) ||
		s.Found[1].Container != prefix+"-own-exec" {
		t.Errorf("the agent-server's layout from its container, with its execution container: %+v", s)
	}
	if s := source(r, discover.KindOpenHandsContainers, "openhands_execution_scope", l.ExecutionScope()); s != nil {
		t.Errorf("the agent-server's execution container is a second source: %+v", s)
	}
	if s := source(r, discover.KindOpenHandsContainers, "openhands_runtime_owner", stray); s == nil || s.Config.Name != "docker" ||
		len(s.Found) != 1 || s.Found[0].Container != prefix+"-stray" {
		t.Errorf("owner-labelled container without a layout: %+v", s)
	}
	if s := source(r, discover.KindOpenHandsContainers, "openhands_execution_scope", scope); s == nil || s.Found[0].Container != prefix+"-exec" {
		t.Errorf("execution container: %+v", s)
	}
	named, unrelated := false, false
	for _, s := range r.Sources {
		for _, f := range s.Found {
			named = named || (f.Container == openhands.ExecutionNamePrefix+prefix && s.Config.Name == "")
			unrelated = unrelated || f.Container == prefix+"-unrelated"
		}
	}
	if !named || unrelated {
		t.Errorf("named-only container reported without a table: %v; unrelated container found: %v", named, unrelated)
	}
}
