package sources

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend/openhands"
)

// TestOpenHandsSource: [[openhands]] takes the agent-server's two folders
// (the conversations folder defaulting beside a .openhands persistence
// folder, as the agent-server pairs them), is named by its persistence
// folder, and builds the openhands backend on that layout.
func TestOpenHandsSource(t *testing.T) {
	testEnv(t)
	c := mustLoad(t, `
[[openhands]]
persistence_dir = "~/workspace/.openhands"
retention = "30d"

[[openhands]]
persistence_dir = "/srv/oh/state"
conversations_dir = "/srv/oh/history"
docker = false
`)
	ohs := tables[*OpenHandsTable](c)
	if len(ohs) != 2 {
		t.Fatalf("%d openhands sources", len(ohs))
	}
	l, err := ohs[0].Layout()
	if err != nil || l.PersistenceDir != "/home/tester/workspace/.openhands" || l.ConversationsDir != "/home/tester/workspace/conversations" {
		t.Errorf("first layout %+v, %v", l, err)
	}
	if !ohs[0].UsesDocker() || ohs[1].UsesDocker() {
		t.Errorf("docker: %v %v", ohs[0].UsesDocker(), ohs[1].UsesDocker())
	}
	if got := c.Sources[1].Name(); got != "openhands:/srv/oh/state" {
		t.Errorf("name %q", got)
	}
	if got := c.Sources[1].Label(); got != `[[openhands]] persistence_dir = "/srv/oh/state"` {
		t.Errorf("label %q", got)
	}
	srcs, err := Build(c)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := srcs[1].Backend.(*openhands.Backend)
	if !ok || b.Layout() != (openhands.Layout{PersistenceDir: "/srv/oh/state", ConversationsDir: "/srv/oh/history"}) {
		t.Errorf("built %T %+v", srcs[1].Backend, srcs[1].Backend)
	}
}

func TestOpenHandsSourceProblems(t *testing.T) {
	testEnv(t)
	_, path, err := loadDoc(t, "[[openhands]]\nretention = \"1d\"\n")
	checkProblems(t, err, path, problem{1, "openhands[0]", "persistence_dir is required: the agent-server's persistence folder (OH_PERSISTENCE_DIR)"})
	_, path, err = loadDoc(t, "[[openhands]]\npersistence_dir = \"/srv/oh\"\ndocker = false\nhost = \"unix:///x.sock\"\n")
	checkProblems(t, err, path,
		problem{1, "openhands[0].conversations_dir", `required: persistence_dir "/srv/oh" is not named .openhands, so the agent-server's default conversations folder beside it does not apply`},
		problem{4, "openhands[0].host", "set with docker = false: no Engine is asked"})
	_, path, err = loadDoc(t, "[[openhands]]\npersistence_dir = \"/srv/.openhands\"\n[[dirs]]\nroot = \"/srv/.openhands/runtime-data\"\n")
	checkProblems(t, err, path, problem{2, "openhands[0].persistence_dir", "/srv/.openhands contains dirs[0].root (/srv/.openhands/runtime-data): a folder must belong to one source"})
}

// TestOpenHandsSourceResolvesLinks: both folders are resolved at load, as
// the agent-server resolves them before hashing them into its labels, so
// a persistence folder reached through a link still finds its containers.
func TestOpenHandsSourceResolvesLinks(t *testing.T) {
	testEnv(t)
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.MkdirAll(filepath.Join(real, ".openhands"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(real, "conversations"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	c := mustLoad(t, "[[openhands]]\npersistence_dir = \""+filepath.Join(dir, "link", ".openhands")+"\"\nconversations_dir = \""+filepath.Join(dir, "link", "conversations")+"\"\n")
	l, err := tables[*OpenHandsTable](c)[0].Layout()
	realDir, _ := filepath.EvalSymlinks(real)
	if err != nil || l.PersistenceDir != filepath.Join(realDir, ".openhands") || l.ConversationsDir != filepath.Join(realDir, "conversations") {
		t.Errorf("layout %+v, %v (want under %s)", l, err, realDir)
	}
}
