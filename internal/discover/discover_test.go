package discover_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/discover"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

var git = testtree.Git

// machine is a fake machine in a temporary folder: homes, a /tmp, and what
// each agent leaves where it leaves it.
type machine struct {
	t        *testing.T
	base     string
	ana, bob string // homes
	tmpRoot  string // conversation_worktree_root
	app      string // ana's repository the agents work on
	want     map[string]string
}

func newMachine(t *testing.T) *machine {
	t.Helper()
	base := testtree.Real(t, t.TempDir())
	m := &machine{t: t, base: base, ana: filepath.Join(base, "home", "ana"), bob: filepath.Join(base, "home", "bob"),
		tmpRoot: filepath.Join(base, "tmp", "conversation-worktrees"), want: map[string]string{}}
	m.app = testtree.NewRepo(t, filepath.Join(m.ana, "src", "app"))
	return m
}

// worktree adds a linked worktree of repo at path on branch, and records
// the source kind discovery should report it under.
func (m *machine) worktree(repo, path, branch, kind string) {
	m.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		m.t.Fatal(err)
	}
	git(m.t, repo, "worktree", "add", "-q", "-b", branch, path)
	if kind != "" {
		m.want[path] = kind
	}
}

func (m *machine) discover(opts discover.Options) discover.Report {
	m.t.Helper()
	if opts.Homes == nil {
		opts.Homes = []discover.Home{{User: "ana", Dir: m.ana}, {User: "bob", Dir: m.bob}}
	}
	if opts.WorktreeRoots == nil {
		opts.WorktreeRoots = []string{m.tmpRoot}
	}
	r, err := discover.Discover(context.Background(), opts)
	if err != nil {
		m.t.Fatal(err)
	}
	return r
}

// found maps every found path to its source's kind.
func found(r discover.Report) map[string]string {
	out := map[string]string{}
	for _, s := range r.Sources {
		for _, f := range s.Found {
			key := f.Path
			if key == "" {
				key = "container:" + f.Container
			}
			out[key] = s.Kind
		}
	}
	return out
}

func source(r discover.Report, kind string, key string, value any) *discover.Source {
	for i, s := range r.Sources {
		if s.Kind != kind {
			continue
		}
		for _, k := range s.Config.Keys {
			if k.Name == key && equalValue(k.Value, value) {
				return &r.Sources[i]
			}
		}
	}
	return nil
}

func equalValue(a, b any) bool {
	switch av := a.(type) {
	case string:
		bv, ok := b.(string)
		return ok && av == bv
	case []string:
		bv, ok := b.([]string)
		return ok && slices.Equal(av, bv)
	}
	return false
}

// TestDiscoverFindsEachLayoutAndNothingElse: the worktrees of OpenHands,
// Claude Code (its two layouts, subagents included), Codex and Cursor, and
// the other linked worktrees of their repositories, each under its source
// with the configuration that manages it; a user's own clone, a worktree
// of another repository outside the known places, and a worktree behind a
// link are not found.
func TestDiscoverFindsEachLayoutAndNothingElse(t *testing.T) {
	m := newMachine(t)
	conv := "6a1f0c2e9b7d4e8f8a3b2c1d0e9f8a7b"
	m.worktree(m.app, filepath.Join(m.tmpRoot, conv, "app"), "openhands/"+conv, discover.KindOpenHandsWorktrees)
	m.worktree(m.app, filepath.Join(m.ana, ".codex", "worktrees", "1a2b", "app"), "codex/one", discover.KindCodex)
	m.worktree(m.app, filepath.Join(m.ana, ".cursor", "worktrees", "app", "feat"), "cursor/feat", discover.KindCursor)
	m.worktree(m.app, filepath.Join(m.ana, ".claude-worktrees", "app", "old"), "claude/old", discover.KindClaudeCode)
	m.worktree(m.app, filepath.Join(m.app, ".claude", "worktrees", "fix-login"), "worktree-fix-login", discover.KindClaudeCode)
	m.worktree(m.app, filepath.Join(m.app, ".claude", "worktrees", "agent-a1b2c3"), "claude/agent-a1b2c3", discover.KindClaudeCode)
	// The repository's other worktree, made by hand.
	m.worktree(m.app, filepath.Join(m.ana, "src", "app-hotfix"), "hotfix", discover.KindRepository)
	// Bob's Claude Code knows a project of his; its worktree is found too.
	bobRepo := testtree.NewRepo(t, filepath.Join(m.bob, "work", "site"))
	m.worktree(bobRepo, filepath.Join(bobRepo, ".claude", "worktrees", "agent-ffff"), "claude/agent-ffff", discover.KindClaudeCode)
	testtree.Write(t, filepath.Join(m.bob, ".claude.json"), `{"numStartups": 3, "projects": {"`+bobRepo+`": {"allowedTools": []}, "/no/such/project": {}}}`)

	// Not to be found: ana's own clone; a worktree of another repository
	// outside the known places; one reached through a link.
	clone := filepath.Join(m.ana, "src", "clone")
	git(t, m.base, "clone", "-q", m.app, clone)
	other := testtree.NewRepo(t, filepath.Join(m.ana, "src", "other"))
	m.worktree(other, filepath.Join(m.ana, "tools", "wt"), "tool", "")
	m.worktree(other, filepath.Join(m.ana, "elsewhere", "linked"), "linked", "")
	if err := os.Symlink(filepath.Join(m.ana, "elsewhere"), filepath.Join(m.ana, ".cursor", "worktrees", "via-link")); err != nil {
		t.Fatal(err)
	}
	// A clone inside a known place is no runtime either.
	git(t, m.base, "clone", "-q", m.app, filepath.Join(m.ana, ".codex", "worktrees", "ffff", "clone"))

	r := m.discover(discover.Options{})
	got := found(r)
	if !mapsEqual(got, m.want) {
		t.Errorf("found:\n%s\nwant:\n%s", show(got), show(m.want))
	}
	for kind, root := range map[string]string{
		discover.KindOpenHandsWorktrees: m.tmpRoot,
		discover.KindCodex:              filepath.Join(m.ana, ".codex", "worktrees"),
		discover.KindCursor:             filepath.Join(m.ana, ".cursor", "worktrees"),
		discover.KindClaudeCode:         filepath.Join(m.app, ".claude", "worktrees"),
	} {
		if s := source(r, kind, "root", root); s == nil || s.Config.Name != "worktrees" {
			t.Errorf("no [[worktrees]] root = %q source of kind %s", root, kind)
		}
	}
	if s := source(r, discover.KindRepository, "repo", m.app); s == nil {
		t.Errorf("no [[worktrees]] repo = %q source for the other worktree", m.app)
	}
	oh := source(r, discover.KindOpenHandsWorktrees, "root", m.tmpRoot)
	if oh == nil || oh.Found[0].Branch != "openhands/"+conv || oh.Found[0].Repo != m.app || len(oh.Notes) != 0 {
		t.Errorf("OpenHands worktree source: %+v", oh)
	}
	// Where it looked is said, found or not.
	for _, p := range []string{filepath.Join(m.bob, ".codex", "worktrees"), filepath.Join(m.bob, ".claude.json")} {
		if !slices.ContainsFunc(r.Places, func(pl discover.Place) bool { return pl.Path == p }) {
			t.Errorf("place %s not reported", p)
		}
	}
}

// TestDiscoverIgnoresForgedWorktrees: an agent that writes its
// repository's .git can add admin entries naming any folder, or plant a
// .git file in a known place naming another worktree's admin folder:
// neither makes discovery report a folder that is not that repository's
// worktree.
func TestDiscoverIgnoresForgedWorktrees(t *testing.T) {
	m := newMachine(t)
	agentWT := filepath.Join(m.ana, ".codex", "worktrees", "1a2b", "app")
	m.worktree(m.app, agentWT, "codex/one", discover.KindCodex)
	victim := filepath.Join(m.ana, "src", "victim")
	git(t, m.base, "clone", "-q", m.app, victim)
	victimRepo := testtree.NewRepo(t, filepath.Join(m.ana, "src", "victim-repo"))
	victimWT := filepath.Join(m.ana, "src", "victim-wt")
	m.worktree(victimRepo, victimWT, "mine", "")
	for name, folder := range map[string]string{"clone": victim, "other-wt": victimWT} {
		admin := filepath.Join(m.app, ".git", "worktrees", name)
		testtree.Write(t, filepath.Join(admin, "gitdir"), filepath.Join(folder, ".git")+"\n")
		testtree.Write(t, filepath.Join(admin, "HEAD"), "ref: refs/heads/main\n")
		testtree.Write(t, filepath.Join(admin, "commondir"), "../..\n")
	}
	// A .git file planted in a known place, naming the agent worktree's
	// admin folder (which names the agent's folder, not this one).
	data, err := os.ReadFile(filepath.Join(agentWT, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, filepath.Join(m.ana, ".cursor", "worktrees", "x", "copy", ".git"), string(data))

	r := m.discover(discover.Options{})
	if got := found(r); !mapsEqual(got, m.want) {
		t.Errorf("found:\n%s\nwant:\n%s", show(got), show(m.want))
	}
}

// TestDiscoverShowsOthersWorkOnlyToRoot: a user other than root sees only
// what it owns (here: nothing, everything belongs to root).
func TestDiscoverShowsOthersWorkOnlyToRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs files owned by another user: run as root")
	}
	m := newMachine(t)
	conv := "6a1f0c2e9b7d4e8f8a3b2c1d0e9f8a7b"
	m.worktree(m.app, filepath.Join(m.tmpRoot, conv, "app"), "openhands/"+conv, discover.KindOpenHandsWorktrees)
	if got := found(m.discover(discover.Options{})); len(got) != 1 {
		t.Fatalf("as root: %v", got)
	}
	nobody := 65534
	r := m.discover(discover.Options{EUID: &nobody})
	if got := found(r); len(got) != 0 {
		t.Errorf("as another user: %v", got)
	}
	// The shared root itself is another user's: not looked into at all
	// (its table would manage that user's worktrees).
	for _, p := range r.Places {
		if p.Path == m.tmpRoot && p.Result != "not yours" {
			t.Errorf("another user's worktree root: %+v", p)
		}
	}
	// A worktree of its own in a root someone else made is not enough.
	if err := os.Chown(filepath.Join(m.tmpRoot, conv), nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(filepath.Join(m.tmpRoot, conv, "app"), func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	}); err != nil {
		t.Fatal(err)
	}
	if got := found(m.discover(discover.Options{EUID: &nobody})); len(got) != 0 {
		t.Errorf("as the worktree's owner, in a root another user owns: %v", got)
	}
	if err := os.Chown(m.tmpRoot, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if got := found(m.discover(discover.Options{EUID: &nobody})); len(got) != 1 {
		t.Errorf("as the owner of the root and the worktree: %v", got)
	}
}

// TestHomesOf: the homes of users with a login shell, not "/", each once.
func TestHomesOf(t *testing.T) {
	p := filepath.Join(t.TempDir(), "passwd")
	testtree.Write(t, p, strings.Join([]string{
		"root:x:0:0:root:/root:/bin/bash",
		"daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin",
		"sync:x:4:65534:sync:/bin:/bin/sync",
		"ana:x:1000:1000:Ana,,,:/home/ana:/bin/zsh",
		"svc:x:998:998::/:/bin/sh",
		"bob:x:1001:1001::/home/bob:/bin/bash",
		"bob2:x:1002:1002::/home/bob:/bin/bash",
		"git:x:997:997::/home/git:/usr/bin/git-shell",
		"broken line",
		"nohome:x:1003:1003::relative:/bin/sh",
		"",
	}, "\n"))
	homes, err := discover.HomesOf(p)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, h := range homes {
		dirs = append(dirs, h.User+"="+h.Dir)
	}
	want := []string{"root=/root", "ana=/home/ana", "bob=/home/bob", "git=/home/git"}
	if !slices.Equal(dirs, want) {
		t.Errorf("homes %v, want %v", dirs, want)
	}
}

// TestDiscoverOpenHandsStorage: an agent-server's persistence folder in a
// home is a source with persistence_dir and conversations_dir, listing its
// conversations' runtime folders; a home without one says where it looked.
func TestDiscoverOpenHandsStorage(t *testing.T) {
	m := newMachine(t)
	p := filepath.Join(m.bob, "workspace", ".openhands")
	id := "0123456789abcdef0123456789abcdef"
	testtree.Write(t, filepath.Join(p, "runtime-control", id+".json"), `{"conversation_id": "01234567-89ab-cdef-0123-456789abcdef"}`)
	testtree.Write(t, filepath.Join(p, "runtime-data", id, "persistence", ".bashrc"), "\n")
	testtree.Write(t, filepath.Join(m.bob, "workspace", "conversations", id, "base_state.json"), "{}")
	r := m.discover(discover.Options{})
	s := source(r, discover.KindOpenHands, "persistence_dir", p)
	if s == nil {
		t.Fatalf("no openhands source: %+v", r.Sources)
	}
	if !equalValue(s.Config.Keys[1].Value, filepath.Join(m.bob, "workspace", "conversations")) || len(s.Found) != 1 ||
		s.Found[0].Path != filepath.Join(p, "runtime-data", id) || len(s.Notes) != 1 {
		t.Errorf("openhands source: %+v", s)
	}
	if !slices.ContainsFunc(r.Places, func(pl discover.Place) bool {
		return pl.Path == filepath.Join(m.ana, ".openhands", "runtime-control") && pl.Result == "absent"
	}) {
		t.Errorf("ana's absent storage not reported: %+v", r.Places)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func show(m map[string]string) string {
	var lines []string
	for k, v := range m {
		lines = append(lines, "  "+v+"  "+k)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
