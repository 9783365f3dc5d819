package ops_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend/openhands"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/discover"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/sources"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

func worktree(t *testing.T, repo, path, branch string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	testtree.Git(t, repo, "worktree", "add", "-q", "-b", branch, path)
}

func discoverIn(t *testing.T, home string, roots ...string) *ops.Discovered {
	t.Helper()
	if roots == nil {
		roots = []string{filepath.Join(filepath.Dir(home), "no-such-tmp")}
	}
	d, err := ops.Discover(context.Background(), ops.DiscoverOptions{NoDocker: true, Discover: discover.Options{
		Homes: []discover.Home{{User: "ana", Dir: home}}, WorktreeRoots: roots}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func stateIn(t *testing.T, dir string) {
	t.Cleanup(config.SetEUIDForTest(1000))
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
}

// TestDiscoveredConfigurationIsAFile: the configuration of what was found
// parses as a file, with the policy defaults spelled out; a set that would
// claim a folder a second time is written commented out, with why.
func TestDiscoveredConfigurationIsAFile(t *testing.T) {
	base := testtree.Real(t, t.TempDir())
	stateIn(t, base)
	home := filepath.Join(base, "home", "ana")
	repo := testtree.NewRepo(t, filepath.Join(home, "src", "app"))
	codex := filepath.Join(home, ".codex", "worktrees")
	worktree(t, repo, filepath.Join(codex, "1a2b", "app"), "codex/one")
	// OpenHands' worktree root configured onto Codex's: one folder, two sets.
	d := discoverIn(t, home, codex)
	cfg, err := sources.Parse([]byte(d.View.Config), "init")
	if err != nil {
		t.Fatalf("the discovered configuration does not parse: %v\n%s", err, d.View.Config)
	}
	p := cfg.PolicyFor(cfg.Sources[0].Table)
	if len(cfg.Sources) != 1 || p.Grace != config.DefaultGrace || p.Retention != 0 || len(p.CacheDirs) != 2 {
		t.Errorf("sources %v, policy %+v", cfg.Sources, p)
	}
	var unmanaged []string
	for _, s := range d.View.Sources {
		if s.Unmanaged != "" {
			unmanaged = append(unmanaged, s.Kind+": "+s.Unmanaged)
		}
	}
	if len(unmanaged) != 1 || !strings.Contains(strings.Join(unmanaged, "\n"), "a folder must belong to one source") {
		t.Errorf("unmanaged: %v", unmanaged)
	}
	if !strings.Contains(d.View.Config, "# root = \""+codex+"\"") {
		t.Errorf("the second table is not commented out:\n%s", d.View.Config)
	}
}

// TestDiscoveryWritesNamesExactly: a folder whose name holds quotes and
// backslashes is written so that the file names exactly that folder; one
// whose name holds a control character (an escape sequence, what could
// end a comment) is never written into the file: its set is shown, not
// managed.
func TestDiscoveryWritesNamesExactly(t *testing.T) {
	base := testtree.Real(t, t.TempDir())
	stateIn(t, base)
	repo := testtree.NewRepo(t, filepath.Join(base, "src", "app"))
	odd := filepath.Join(base, "home", `we"ird\ = "x"`)
	worktree(t, repo, filepath.Join(odd, ".codex", "worktrees", "1a2b", "app"), "codex/one")
	d := discoverIn(t, odd)
	if !d.Found() || len(d.Config.Sources) != 1 {
		t.Fatalf("not managed:\n%s", d.View.Config)
	}
	if wt, ok := d.Config.Sources[0].Table.(*sources.WorktreesTable); !ok || wt.Root != filepath.Join(odd, ".codex", "worktrees") {
		t.Errorf("table %+v, want root %q", d.Config.Sources[0].Table, filepath.Join(odd, ".codex", "worktrees"))
	}

	evil := filepath.Join(base, "home", "evil\x1b[2J")
	repo = testtree.NewRepo(t, filepath.Join(base, "src", "other"))
	worktree(t, repo, filepath.Join(evil, ".codex", "worktrees", "3c4d", "app"), "codex/two")
	d = discoverIn(t, evil)
	if len(d.View.Sources) != 1 || d.View.Sources[0].Unmanaged == "" || d.Found() {
		t.Fatalf("a set under a name with an escape sequence: %+v\n%s", d.View.Sources, d.View.Config)
	}
	if strings.ContainsRune(d.View.Config, 0x1b) {
		t.Errorf("the escape sequence is in the file:\n%q", d.View.Config)
	}
	if cfg, err := sources.Parse([]byte(d.View.Config), "init"); err != nil || len(cfg.Sources) != 0 {
		t.Errorf("the configuration: %v %v", cfg, err)
	}
}

// TestDiscoveredLayoutWithoutDocker: an agent-server's storage found while
// no Engine is asked is written as local mode, and says so.
func TestDiscoveredLayoutWithoutDocker(t *testing.T) {
	base := testtree.Real(t, t.TempDir())
	stateIn(t, base)
	home := filepath.Join(base, "home", "ana")
	l, err := openhands.NewLayout(filepath.Join(home, ".openhands"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{l.ControlDir(), l.Home("6a1f0c2e9b7d4e8f8a3b2c1d0e9f8a7b")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	d := discoverIn(t, home)
	if !d.Found() || len(d.Config.Sources) != 1 {
		t.Fatalf("not found:\n%s", d.View.Config)
	}
	oh, ok := d.Config.Sources[0].Table.(*sources.OpenHandsTable)
	if !ok || oh.UsesDocker() || oh.PersistenceDir != l.PersistenceDir || !strings.Contains(d.View.Config, "local mode") {
		t.Errorf("table %+v:\n%s", d.Config.Sources[0].Table, d.View.Config)
	}
	// The dry run over it writes nothing outside its temporary folder.
	a, err := ops.OpenDiscovered(context.Background(), d, ops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ledger := a.Config().Ledger.Path
	if _, err := a.Plan(context.Background(), ops.PlanRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(ledger)); !os.IsNotExist(err) {
		t.Errorf("the dry run's state folder %s is still there: %v", filepath.Dir(ledger), err)
	}
	if _, err := os.Stat(filepath.Join(base, "state")); !os.IsNotExist(err) {
		t.Errorf("the dry run made the state folder: %v", err)
	}
}
