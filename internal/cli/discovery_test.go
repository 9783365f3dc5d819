package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/cli"
	rconfig "github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/discover"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// fakeMachine is a machine laid out in a temporary folder: one user's home
// with the places agents leave worktrees in, and a /tmp of its own.
type fakeMachine struct {
	t             *testing.T
	base, home    string
	worktreeRoot  string // OpenHands' conversation_worktree_root
	repo          string // the user's repository the agents work on
	persistenceIn []string
	docker        bool
	env           *ops.DiscoverOptions // overrides options()
}

func newFakeMachine(t *testing.T) *fakeMachine {
	t.Helper()
	base := testtree.Real(t, t.TempDir())
	m := &fakeMachine{t: t, base: base, home: filepath.Join(base, "home", "ana"),
		worktreeRoot: filepath.Join(base, "tmp", "conversation-worktrees")}
	m.repo = testtree.NewRepo(t, filepath.Join(m.home, "src", "app"))
	// The state folder of a configuration without [ledger] (init's):
	// under the test's folder, not the machine's.
	t.Cleanup(rconfig.SetEUIDForTest(1000))
	t.Setenv("XDG_STATE_HOME", filepath.Join(base, "state"))
	return m
}

func (m *fakeMachine) worktree(path, branch string) string {
	m.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		m.t.Fatal(err)
	}
	testtree.Git(m.t, m.repo, "worktree", "add", "-q", "-b", branch, path)
	return path
}

func (m *fakeMachine) options() *ops.DiscoverOptions {
	if m.env != nil {
		return m.env
	}
	return &ops.DiscoverOptions{NoDocker: !m.docker, Discover: discover.Options{
		Homes:           []discover.Home{{User: "ana", Dir: m.home}},
		WorktreeRoots:   []string{m.worktreeRoot},
		PersistenceDirs: m.persistenceIn,
	}}
}

// run runs the CLI on the fake machine.
func (m *fakeMachine) run(args ...string) (string, string, int) {
	m.t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errb, Version: "test", Discover: m.options()})
	return out.String(), errb.String(), code
}

func (m *fakeMachine) runOK(args ...string) (string, string) {
	m.t.Helper()
	out, errOut, code := m.run(args...)
	if code != 0 {
		m.t.Fatalf("reclaimer %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out, errOut
}

type lsEntry struct {
	ID      string `json:"id"`
	Backend string `json:"backend"`
	Source  string `json:"source"`
	Path    string `json:"path"`
}

func (m *fakeMachine) ls(args ...string) []string {
	m.t.Helper()
	out, _ := m.runOK(append([]string{"ls", "--json"}, args...)...)
	var list []lsEntry
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		m.t.Fatalf("ls --json: %v\n%s", err, out)
	}
	var keys []string
	for _, r := range list {
		keys = append(keys, r.Source+" "+r.Backend+"/"+r.ID+" "+r.Path)
	}
	slices.Sort(keys)
	return keys
}

// TestDiscoveryNothingFound: with nothing found, plan, ls and status say
// what they looked for and exit 0; nothing is written (no state folder).
func TestDiscoveryNothingFound(t *testing.T) {
	m := newFakeMachine(t)
	for _, cmd := range []string{"plan", "ls", "status"} {
		out, errOut := m.runOK(cmd)
		for _, want := range []string{"no runtime an agent left was found", "Looked for:", m.worktreeRoot, filepath.Join(m.home, ".codex", "worktrees"),
			filepath.Join(m.home, ".cursor", "worktrees"), filepath.Join(m.home, ".openhands", "runtime-control"), "absent"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: no %q in\n%s%s", cmd, want, out, errOut)
			}
		}
	}
	var v struct {
		Sources []any `json:"sources"`
		Looked  []struct {
			Path, For, Result string
		} `json:"looked"`
	}
	out, _ := m.runOK("plan", "--json")
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Sources) != 0 || len(v.Looked) == 0 {
		t.Errorf("plan --json with nothing found: %v\n%s", err, out)
	}
	if exists(filepath.Join(m.base, "state")) {
		t.Error("discovery made a state folder")
	}
	// The README's quick start begins with exactly this dry run.
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "go run ./cmd/reclaimer") {
			if line != "go run ./cmd/reclaimer plan" {
				t.Errorf("the README's first command is %q, not the discovery's dry run", line)
			}
			break
		}
	}
	// apply never runs over a discovery: it says how to configure.
	_, errOut, code := m.run("apply")
	if code != 2 || !strings.Contains(errOut, "reclaimer init --write") {
		t.Errorf("apply without configuration: exit %d\n%s", code, errOut)
	}
}

// TestDiscoveryPlanAndInit: the worktrees of Codex, Cursor, Claude Code
// and OpenHands' conversation worktree root are found and shown as the
// sources that manage them; a user's own clone and a worktree of an
// unrelated tool elsewhere are not. The dry run runs over them (and
// writes nothing); apply refuses; init prints and writes that
// configuration (never over a file without --force), and plan --config
// on the written file sees exactly the runtimes the discovery saw.
func TestDiscoveryPlanAndInit(t *testing.T) {
	m := newFakeMachine(t)
	conv := "6a1f0c2e9b7d4e8f8a3b2c1d0e9f8a7b"
	want := []string{
		m.worktree(filepath.Join(m.home, ".codex", "worktrees", "1a2b", "app"), "codex/one"),
		m.worktree(filepath.Join(m.home, ".cursor", "worktrees", "app", "feat"), "cursor/feat"),
		m.worktree(filepath.Join(m.home, ".claude-worktrees", "app", "old"), "claude/old"),
		m.worktree(filepath.Join(m.worktreeRoot, conv, "app"), "openhands/"+conv),
	}
	// Not an agent's: a worktree of another tool outside the known places,
	// and the user's own clone.
	other := m.worktree(filepath.Join(m.home, "elsewhere", "wt"), "mine")
	clone := filepath.Join(m.home, ".codex", "worktrees", "9f9f", "clone")
	testtree.NewRepo(t, clone)

	out, errOut := m.runOK("plan")
	for _, w := range append(want, "Codex (codex)", "Cursor (cursor)", "Claude Code (claude-code)", "OpenHands (openhands-worktrees)",
		"[[worktrees]]", `root = "`+filepath.Join(m.home, ".codex", "worktrees")+`"`, "Looked for:", "seen: worktree 4", "A dry run is a preview") {
		if !strings.Contains(out, w) {
			t.Errorf("plan: no %q in\n%s\n%s", w, out, errOut)
		}
	}
	// The repository's other worktree is shown, its table commented out:
	// it would claim the agents' worktrees a second time.
	if !strings.Contains(out, other) || !strings.Contains(out, `# repo = "`+m.repo+`"`) {
		t.Errorf("plan: the repository's other worktree %s is not shown as unmanaged:\n%s", other, out)
	}
	if strings.Contains(out, clone) {
		t.Errorf("plan shows the user's own clone %s:\n%s", clone, out)
	}
	discovered := m.ls()
	if len(discovered) != len(want) {
		t.Fatalf("ls over the discovery: %v, want %d runtimes (%v)", discovered, len(want), want)
	}
	for i, w := range want {
		if !slices.ContainsFunc(discovered, func(k string) bool { return strings.HasSuffix(k, " "+w) }) {
			t.Errorf("ls: runtime %d (%s) missing from %v", i, w, discovered)
		}
	}
	if out, _ := m.runOK("status"); !strings.Contains(out, "worktrees:"+filepath.Join(m.home, ".codex", "worktrees")) {
		t.Errorf("status over the discovery names no source:\n%s", out)
	}
	if exists(filepath.Join(m.base, "state")) {
		t.Error("the discovery's dry run made a state folder")
	}
	if _, errOut, code := m.run("apply"); code != 2 || !strings.Contains(errOut, "never on a discovery") {
		t.Errorf("apply without configuration: exit %d\n%s", code, errOut)
	}

	printed, _ := m.runOK("init")
	for _, w := range []string{"[policy]", `cache_dirs = [".cache", ".npm"]`, `grace = "24h"`, `retention = "off"`, "registered_only = false", "[[worktrees]]"} {
		if !strings.Contains(printed, w) {
			t.Errorf("init: no %q in\n%s", w, printed)
		}
	}
	file := filepath.Join(m.base, "reclaimer.toml")
	m.runOK("init", "--write", file)
	data, err := os.ReadFile(file)
	if err != nil || string(data) != printed {
		t.Errorf("init --write wrote %q (%v), init printed %q", data, err, printed)
	}
	if _, errOut, code := m.run("init", "--write", file); code != 2 || !strings.Contains(errOut, "exists") {
		t.Errorf("init over an existing file: exit %d %s", code, errOut)
	}
	m.runOK("init", "--write", file, "--force")

	out, _ = m.runOK("--config", file, "plan")
	if !strings.Contains(out, "seen: worktree 4") || strings.Contains(out, "Looked for:") {
		t.Errorf("plan --config on init's file:\n%s", out)
	}
	if got := m.ls("--config", file); !slices.Equal(got, discovered) {
		t.Errorf("ls --config on init's file: %v\nthe discovery's: %v", got, discovered)
	}
}
