package discover

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/backend/openhands"
	"github.com/reclaimer/reclaimer/internal/backend/worktree"
	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/dockerclient"
)

// Kinds of Source.
const (
	KindOpenHands           = "openhands"            // an agent-server's persistence layout
	KindOpenHandsContainers = "openhands-containers" // its labelled containers, layout unknown
	KindOpenHandsWorktrees  = "openhands-worktrees"  // conversation_worktree_root
	KindClaudeCode          = "claude-code"
	KindCodex               = "codex"
	KindCursor              = "cursor"
	// KindRepository: the other linked worktrees of a repository whose
	// agent worktrees were found.
	KindRepository = "repository"
)

// DefaultConversationWorktreeRoot is the OpenHands agent-server's default
// conversation_worktree_root.
const DefaultConversationWorktreeRoot = "/tmp/conversation-worktrees"

// Source is one set of runtimes found, described as the configuration that
// would manage it.
type Source struct {
	Kind  string `json:"kind"`
	Agent string `json:"agent"` // "OpenHands", "Claude Code", "Codex", "Cursor"
	// Config is the source table that corresponds to what was found; its
	// Table is "" when no configuration can select it.
	Config Table `json:"config"`
	// Looked are the places this source was found in.
	Looked []string `json:"looked"`
	Found  []Found  `json:"found"`
	// Notes say what the operator should know (a worktree on an
	// unexpected branch, a container no selector can match).
	Notes []string `json:"notes,omitempty"`
}

// Table is a configuration table: its name and its keys in order.
type Table struct {
	Name string `json:"table"`
	Keys []Key  `json:"keys,omitempty"`
}

// Key is one key of a Table; Value is a string, []string or
// map[string]string.
type Key struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// Found is one runtime (or would-be runtime) of a Source.
type Found struct {
	What      string   `json:"what"` // "worktree", "conversation", "container"
	Path      string   `json:"path,omitempty"`
	Repo      string   `json:"repo,omitempty"` // a worktree's main repository
	Branch    string   `json:"branch,omitempty"`
	Container string   `json:"container,omitempty"`
	State     string   `json:"state,omitempty"` // a container's Engine state
	Mounts    []string `json:"mounts,omitempty"`
}

// String is f in one line, as plan and init show it: "worktree
// /home/me/.codex/worktrees/x/repo on codex/x", "container openhands-1
// (exited)".
func (f Found) String() string {
	line := f.What + " " + f.Path + f.Container
	if f.Branch != "" {
		line += " on " + f.Branch
	}
	if f.State != "" {
		line += " (" + f.State + ")"
	}
	return line
}

// Place is one place discovery looked at, and what it found there.
type Place struct {
	Path string `json:"path"` // a folder, a file, or "docker" for the Engine
	For  string `json:"for"`  // what was looked for: "Codex worktrees"
	// Result: "found 3", "absent", "a symbolic link: not followed", an error.
	Result string `json:"result"`
}

// Report is what one discovery found and where it looked.
type Report struct {
	Sources []Source `json:"sources"`
	Places  []Place  `json:"places"`
}

// Home is one user's home folder.
type Home struct {
	User string `json:"user"`
	Dir  string `json:"dir"`
	UID  int    `json:"uid"`
}

// Options say where to look. Every path is injectable so tests lay out
// fake homes in temporary folders.
type Options struct {
	// Homes are the homes looked into; nil means the current user's, or
	// as root every home of Passwd with a login shell (see HomesOf).
	Homes []Home
	// Passwd is the user database read for Homes; default /etc/passwd.
	Passwd string
	// WorktreeRoots are OpenHands conversation_worktree_root folders; nil
	// means DefaultConversationWorktreeRoot.
	WorktreeRoots []string
	// PersistenceDirs are OpenHands persistence folders to look at besides
	// those found from containers and homes (<home>/.openhands,
	// <home>/workspace/.openhands).
	PersistenceDirs []string
	// Docker, when set, is asked for the OpenHands containers; nil: none
	// are looked for.
	Docker *dockerclient.Client
	// ContainerLabels, when set, narrow the containers looked at to those
	// carrying all of them (a test looks only at its own).
	ContainerLabels map[string]string
	// Prove checks that path is a linked worktree git made for the
	// repository whose common git folder is common, from both sides, and
	// returns its admin folder; default worktree.ProveLinked, the proof
	// the worktree backend acts on.
	Prove func(common, path string) (admin string, err error)
	// EUID is the user discovery runs as; default os.Geteuid(). A user
	// other than root is shown only what it owns.
	EUID *int
}

// Discover finds what agents left on this machine. It never acts: it
// reads folders (never following a link out of a place it looks in), one
// Engine listing, and a few small files (.git files, admin files, Claude
// Code's project list). What it could not read is a Place with the error.
func Discover(ctx context.Context, opts Options) (Report, error) {
	d := &discovery{opts: opts, seen: map[string]bool{}, repos: map[string]bool{}}
	if d.opts.Prove == nil {
		d.opts.Prove = worktree.ProveLinked
	}
	d.euid = os.Geteuid()
	if opts.EUID != nil {
		d.euid = *opts.EUID
	}
	homes := opts.Homes
	if homes == nil {
		var err error
		if homes, err = d.defaultHomes(); err != nil {
			return Report{}, err
		}
	}
	roots := opts.WorktreeRoots
	if roots == nil {
		roots = []string{DefaultConversationWorktreeRoot}
	}
	for _, r := range roots {
		d.worktreeRoot(r, 2, KindOpenHandsWorktrees, "OpenHands", "OpenHands conversation worktrees")
	}
	for _, h := range homes {
		d.worktreeRoot(filepath.Join(h.Dir, ".codex", "worktrees"), 2, KindCodex, "Codex", "Codex worktrees")
		d.worktreeRoot(filepath.Join(h.Dir, ".cursor", "worktrees"), 2, KindCursor, "Cursor", "Cursor worktrees")
		d.worktreeRoot(filepath.Join(h.Dir, ".claude-worktrees"), 2, KindClaudeCode, "Claude Code", "Claude Code worktrees (older layout)")
		for _, p := range d.claudeProjects(h) {
			d.repos[p] = true
		}
	}
	// Claude Code's per-repository worktrees, in every repository known so
	// far: its own projects and those whose agent worktrees were found.
	for _, repo := range sortedKeys(d.repos) {
		d.worktreeRoot(filepath.Join(repo, ".claude", "worktrees"), 1, KindClaudeCode, "Claude Code", "Claude Code worktrees")
	}
	d.otherWorktrees()
	if err := d.containers(ctx); err != nil {
		return Report{}, err
	}
	d.layouts(homes)
	d.claimContainers()
	return d.report, nil
}

// claimContainers folds into each agent-server layout found the container
// sources its backend lists itself: those selected by its owner label
// (containers whose mounts did not show the layout) and by its execution
// scope. Reported apart, they would be a second source managing the same
// containers.
func (d *discovery) claimContainers() {
	claims := map[string]int{} // "key=value" selector -> index of the layout's source
	for i, s := range d.report.Sources {
		if s.Kind != KindOpenHands || len(s.Config.Keys) < 2 {
			continue
		}
		p, _ := s.Config.Keys[0].Value.(string)
		c, _ := s.Config.Keys[1].Value.(string)
		l, err := openhands.NewLayout(p, c)
		if err != nil {
			continue
		}
		claims["openhands_runtime_owner="+l.Owner()] = i
		claims["openhands_execution_scope="+l.ExecutionScope()] = i
	}
	if len(claims) == 0 {
		return
	}
	srcs := slices.Clone(d.report.Sources)
	keep := make([]bool, len(srcs))
	for i, s := range srcs {
		keep[i] = true
		if s.Kind != KindOpenHandsContainers || len(s.Config.Keys) == 0 {
			continue
		}
		sel := s.Config.Keys[0]
		v, _ := sel.Value.(string)
		into, ok := claims[sel.Name+"="+v]
		if !ok {
			continue
		}
		keep[i] = false
		t := &srcs[into]
		t.Found = append(t.Found, s.Found...)
		t.Looked = appendOnce(t.Looked, s.Looked...)
		t.Notes = append(t.Notes, fmt.Sprintf("%d container(s) selected by %s = %q are this agent-server's: managed with it", len(s.Found), sel.Name, v))
	}
	var out []Source
	for i, s := range srcs {
		if keep[i] {
			out = append(out, s)
		}
	}
	d.report.Sources = out
}

func appendOnce(list []string, more ...string) []string {
	for _, m := range more {
		if !slices.Contains(list, m) {
			list = append(list, m)
		}
	}
	return list
}

type discovery struct {
	opts   Options
	euid   int
	report Report
	seen   map[string]bool // worktree paths already in a source
	repos  map[string]bool // main repositories (folders) known
	// commons maps a common git folder to its main repository folder.
	commons map[string]string
	// fromContainers are agent-server layouts told by containers' mounts.
	fromContainers []openhands.Layout
}

func (d *discovery) place(path, what, result string) {
	d.report.Places = append(d.report.Places, Place{Path: path, For: what, Result: result})
}

// defaultHomes: the current user's home; as root, every home of the user
// database with a login shell.
func (d *discovery) defaultHomes() ([]Home, error) {
	if d.euid == 0 {
		passwd := d.opts.Passwd
		if passwd == "" {
			passwd = "/etc/passwd"
		}
		homes, err := HomesOf(passwd)
		if err != nil {
			return nil, fmt.Errorf("discover: %w", err)
		}
		return homes, nil
	}
	dir, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("discover: no home folder: %v", err)
	}
	return []Home{{User: fmt.Sprint(d.euid), Dir: filepath.Clean(dir), UID: d.euid}}, nil
}

// noLogin are shells that mean "no one logs in as this user": system
// accounts, whose homes are not where agents run.
var noLogin = []string{"/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false", "/bin/sync", ""}

// HomesOf reads a passwd(5) file: the homes of users with a login shell,
// absolute and not "/", each once.
func HomesOf(passwd string) ([]Home, error) {
	f, err := os.Open(passwd)
	if err != nil {
		return nil, fmt.Errorf("read users: %w", err)
	}
	defer f.Close()
	var homes []Home
	seen := map[string]bool{}
	sc := bufio.NewScanner(io.LimitReader(f, 16<<20))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) != 7 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		uid := 0
		if _, err := fmt.Sscan(fields[2], &uid); err != nil {
			continue
		}
		dir, shell := filepath.Clean(fields[5]), fields[6]
		if slices.Contains(noLogin, shell) || !filepath.IsAbs(fields[5]) || dir == "/" || seen[dir] {
			continue
		}
		seen[dir] = true
		homes = append(homes, Home{User: fields[0], Dir: dir, UID: uid})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read users: %w", err)
	}
	return homes, nil
}

// realDir tells whether path is a folder whose every component from the
// filesystem root is no symbolic link: discovery never follows one out of
// a place it looks in. The reason is "" when it is.
func realDir(path string) (bool, string) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, "absent"
	case err != nil:
		return false, err.Error()
	case fi.Mode()&os.ModeSymlink != 0:
		return false, "a symbolic link: not followed"
	case !fi.IsDir():
		return false, "not a folder"
	}
	if real, err := filepath.EvalSymlinks(path); err != nil || real != path {
		return false, "reached through a symbolic link: not followed"
	}
	return true, ""
}

// owned tells whether discovery may show path to its user: root sees
// everything, another user only what it owns.
func (d *discovery) owned(path string) bool {
	if d.euid == 0 {
		return true
	}
	var st unix.Stat_t
	return unix.Lstat(path, &st) == nil && int(st.Uid) == d.euid
}

// worktreeRoot looks for linked worktrees up to depth levels below root
// (never into links, hidden folders or other mounts) and adds them, proven,
// as a source of kind.
func (d *discovery) worktreeRoot(root string, depth int, kind, agent, what string) {
	root = filepath.Clean(root)
	if ok, why := realDir(root); !ok {
		d.place(root, what, why)
		return
	}
	if !d.owned(root) {
		// Another user's place (a shared /tmp): its table would manage
		// that user's worktrees too.
		d.place(root, what, "not yours")
		return
	}
	src := Source{Kind: kind, Agent: agent, Config: Table{Name: "worktrees", Keys: []Key{{"root", root}}}, Looked: []string{root}}
	var errs []string
	walk(root, depth, func(dir string) bool {
		fi, err := os.Lstat(filepath.Join(dir, ".git"))
		if err != nil {
			return true // not a checkout: look below
		}
		if !fi.Mode().IsRegular() {
			return false // a full clone (or a link): never a runtime, not looked into
		}
		f, err := d.worktree(dir, "")
		if err != nil {
			errs = append(errs, err.Error())
			return false
		}
		if f.Path != "" {
			src.Found = append(src.Found, f)
		}
		return false
	})
	if kind == KindOpenHandsWorktrees {
		for _, f := range src.Found {
			conv := filepath.Base(filepath.Dir(f.Path))
			if f.Branch != "openhands/"+conv {
				src.Notes = append(src.Notes, fmt.Sprintf("%s is on %q, not openhands/%s", f.Path, f.Branch, conv))
			}
		}
	}
	src.Notes = append(src.Notes, errs...)
	d.place(root, what, fmt.Sprintf("found %d", len(src.Found)))
	if len(src.Found) > 0 {
		d.report.Sources = append(d.report.Sources, src)
	}
}

// worktree proves dir a linked worktree of the repository whose common git
// folder is common (or, when common is "", of the one its .git file names)
// and describes it; Found is empty (and no error) when dir is not the
// user's to see.
func (d *discovery) worktree(dir, common string) (Found, error) {
	if !d.owned(dir) {
		return Found{}, nil
	}
	if common == "" {
		target, err := worktree.ReadLinkFile(filepath.Join(dir, ".git"), "gitdir: ")
		if err != nil {
			return Found{}, fmt.Errorf("%s: %w", dir, err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		common = filepath.Dir(filepath.Dir(filepath.Clean(target)))
	}
	admin, err := d.opts.Prove(common, dir)
	if err != nil {
		return Found{}, err
	}
	f := Found{What: "worktree", Path: dir, Repo: d.repoOf(common)}
	if head, err := worktree.ReadLinkFile(filepath.Join(admin, "HEAD"), ""); err == nil {
		if ref, ok := strings.CutPrefix(head, "ref: "); ok {
			f.Branch = strings.TrimPrefix(ref, "refs/heads/")
		} // else detached: no branch
	}
	d.seen[dir] = true
	return f, nil
}

// repoOf records and returns the main repository of a common git folder:
// the folder holding .git, or the bare repository itself.
func (d *discovery) repoOf(common string) string {
	repo := common
	if filepath.Base(common) == ".git" {
		repo = filepath.Dir(common)
	}
	if d.commons == nil {
		d.commons = map[string]string{}
	}
	d.commons[common] = repo
	d.repos[repo] = true
	return repo
}

// walk calls visit for each folder below dir, depth levels deep, in name
// order; visit returns whether to look below. Links, hidden folders and
// other mounts are never entered.
func walk(dir string, depth int, visit func(dir string) bool) {
	if depth <= 0 {
		return
	}
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st) != nil {
		return
	}
	mnt := st.Mnt_id
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue // a file, a link (ReadDir does not follow), hidden
		}
		sub := filepath.Join(dir, e.Name())
		var sst unix.Statx_t
		if unix.Statx(unix.AT_FDCWD, sub, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &sst) != nil ||
			(sst.Mask&unix.STATX_MNT_ID != 0 && sst.Mnt_id != mnt) {
			continue
		}
		if visit(sub) {
			walk(sub, depth-1, visit)
		}
	}
}

// claudeProjects reads the project folders Claude Code records in
// <home>/.claude.json ("projects": {"/path": {...}}): repositories whose
// .claude/worktrees may hold its worktrees. Only real folders count.
func (d *discovery) claudeProjects(h Home) []string {
	p := filepath.Join(h.Dir, ".claude.json")
	data, err := beneath.ReadFileAt(p, 64<<20)
	if errors.Is(err, os.ErrNotExist) {
		d.place(p, "Claude Code projects", "absent")
		return nil
	}
	if err != nil {
		d.place(p, "Claude Code projects", err.Error())
		return nil
	}
	var doc struct {
		Projects map[string]json.RawMessage `json:"projects"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		d.place(p, "Claude Code projects", "unreadable: "+err.Error())
		return nil
	}
	var out []string
	for dir := range doc.Projects {
		if filepath.IsAbs(dir) && filepath.Clean(dir) == dir {
			if ok, _ := realDir(dir); ok && d.owned(dir) {
				out = append(out, dir)
			}
		}
	}
	sort.Strings(out)
	d.place(p, "Claude Code projects", fmt.Sprintf("found %d", len(out)))
	return out
}

// otherWorktrees adds, per repository whose agent worktrees were found,
// its other linked worktrees: read from its admin folders (git's own list)
// and each proven from both sides, so a forged admin entry never makes a
// folder someone else's show up.
func (d *discovery) otherWorktrees() {
	for _, common := range sortedKeys(d.commons) {
		repo := d.commons[common]
		admins := filepath.Join(common, "worktrees")
		entries, err := os.ReadDir(admins)
		if err != nil {
			continue
		}
		src := Source{Kind: KindRepository, Agent: "", Config: Table{Name: "worktrees", Keys: []Key{{"repo", repo}}},
			Looked: []string{admins}}
		unproven := 0
		for _, e := range entries {
			back, err := worktree.ReadLinkFile(filepath.Join(admins, e.Name(), "gitdir"), "")
			if err != nil || !filepath.IsAbs(back) || filepath.Base(back) != ".git" {
				continue
			}
			dir := filepath.Dir(filepath.Clean(back))
			if d.seen[dir] {
				continue
			}
			if ok, _ := realDir(dir); !ok {
				continue // gone (prunable), or behind a link
			}
			// Proven against this repository: its admin entry is only
			// what the repository says, and the repository may lie.
			f, err := d.worktree(dir, common)
			if err != nil {
				src.Notes = append(src.Notes, err.Error())
				unproven++
				continue
			}
			if f.Path != "" {
				src.Found = append(src.Found, f)
			}
		}
		result := fmt.Sprintf("found %d", len(src.Found))
		if unproven > 0 {
			result += fmt.Sprintf("; %d entries name folders not proven to be its worktrees (ignored)", unproven)
		}
		d.place(admins, "other worktrees of "+repo, result)
		if len(src.Found) > 0 {
			src.Notes = append(src.Notes, "this repository's source also covers its worktrees listed above under other sources")
			d.report.Sources = append(d.report.Sources, src)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// layouts adds the OpenHands persistence layouts found in the homes, in
// Options.PersistenceDirs and from containers' mounts (added by
// containers), each once.
func (d *discovery) layouts(homes []Home) {
	done := map[string]bool{}
	for _, l := range d.fromContainers {
		if !done[l.PersistenceDir] {
			done[l.PersistenceDir] = true
			d.layout(l.PersistenceDir, l.ConversationsDir)
		}
	}
	cands := append([]string(nil), d.opts.PersistenceDirs...)
	for _, h := range homes {
		cands = append(cands, filepath.Join(h.Dir, ".openhands"), filepath.Join(h.Dir, "workspace", ".openhands"))
	}
	for _, p := range cands {
		p = filepath.Clean(p)
		if done[p] {
			continue
		}
		done[p] = true
		d.layout(p, "")
	}
}

// layout reports one persistence folder when it holds an agent-server's
// runtime-control (its conversations folder: conversations beside it, or
// the one given).
func (d *discovery) layout(persistence, conversations string) {
	const what = "OpenHands agent-server storage (runtime-control)"
	if conversations == "" {
		conversations = filepath.Join(filepath.Dir(persistence), "conversations")
	}
	l, err := openhands.NewLayout(persistence, conversations)
	if err != nil {
		d.place(persistence, what, err.Error())
		return
	}
	if ok, why := realDir(l.ControlDir()); !ok {
		d.place(l.ControlDir(), what, why)
		return
	}
	if !d.owned(l.ControlDir()) {
		d.place(l.ControlDir(), what, "not yours")
		return
	}
	src := Source{Kind: KindOpenHands, Agent: "OpenHands",
		Config: Table{Name: "openhands", Keys: []Key{{"persistence_dir", l.PersistenceDir}, {"conversations_dir", l.ConversationsDir}}},
		Looked: []string{l.ControlDir(), l.DataRoot()}}
	entries, _ := os.ReadDir(l.DataRoot())
	for _, e := range entries {
		if e.IsDir() && openhands.IsConversationID(e.Name()) {
			src.Found = append(src.Found, Found{What: "conversation", Path: l.RunDir(e.Name())})
		}
	}
	if n := countDirs(l.ConversationsDir); n > 0 {
		src.Looked = append(src.Looked, l.ConversationsDir)
		src.Notes = append(src.Notes, fmt.Sprintf("%d conversation histories in %s (bash_events are kept forever by default; reclaimer never removes history)", n, l.ConversationsDir))
	}
	d.place(l.ControlDir(), what, fmt.Sprintf("found %d", len(src.Found)))
	d.report.Sources = append(d.report.Sources, src)
}

func countDirs(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() && openhands.IsConversationID(e.Name()) {
			n++
		}
	}
	return n
}

// containers adds the OpenHands containers of the Engine: by owner label
// (an agent-server's conversation containers; its layout derived from
// their mounts when they show it), by execution-scope label, and by the
// openhands-execution- name alone.
func (d *discovery) containers(ctx context.Context) error {
	if d.opts.Docker == nil {
		return nil
	}
	all, err := d.opts.Docker.List(ctx, d.opts.ContainerLabels)
	if err != nil {
		d.place("docker", "OpenHands containers", err.Error())
		return nil
	}
	owners := map[string][]dockerclient.Container{}
	scopes := map[string][]dockerclient.Container{}
	var named []dockerclient.Container
	for _, c := range all {
		switch {
		case c.Labels[openhands.OwnerLabel] != "":
			owners[c.Labels[openhands.OwnerLabel]] = append(owners[c.Labels[openhands.OwnerLabel]], c)
		case c.Labels[openhands.ExecutionScopeLabel] != "":
			scopes[c.Labels[openhands.ExecutionScopeLabel]] = append(scopes[c.Labels[openhands.ExecutionScopeLabel]], c)
		case strings.HasPrefix(c.Name, openhands.ExecutionNamePrefix):
			named = append(named, c)
		}
	}
	d.place("docker", "OpenHands containers", fmt.Sprintf("found %d", countAll(owners)+countAll(scopes)+len(named)))
	for _, owner := range sortedKeys(owners) {
		cs := owners[owner]
		if l, ok := layoutOf(owner, cs); ok {
			// Reported by layouts, which lists its runtime folders.
			d.fromContainers = append(d.fromContainers, l)
			continue
		}
		d.report.Sources = append(d.report.Sources, Source{Kind: KindOpenHandsContainers, Agent: "OpenHands",
			Config: Table{Name: "docker", Keys: []Key{{"openhands_runtime_owner", owner},
				{"home", "/var/openhands/.openhands"}, {"workspaces", []string{"/workspace"}}}},
			Looked: []string{"docker"}, Found: foundContainers(cs),
			Notes: []string{"its agent-server's persistence folder could not be told from the mounts: add roots = [\"<persistence_dir>/runtime-data\"] so their folders are managed"}})
	}
	for _, scope := range sortedKeys(scopes) {
		d.report.Sources = append(d.report.Sources, Source{Kind: KindOpenHandsContainers, Agent: "OpenHands",
			Config: Table{Name: "docker", Keys: []Key{{"openhands_execution_scope", scope}}},
			Looked: []string{"docker"}, Found: foundContainers(scopes[scope]),
			Notes: []string{"execution-only containers: no host folders; the agent-server removes them when it starts"}})
	}
	if len(named) > 0 {
		d.report.Sources = append(d.report.Sources, Source{Kind: KindOpenHandsContainers, Agent: "OpenHands",
			Looked: []string{"docker"}, Found: foundContainers(named),
			Notes: []string{"named like OpenHands execution containers but without its execution-scope label: no selector matches them; remove them by hand when stopped"}})
	}
	return nil
}

func countAll(m map[string][]dockerclient.Container) int {
	n := 0
	for _, cs := range m {
		n += len(cs)
	}
	return n
}

func foundContainers(cs []dockerclient.Container) []Found {
	var out []Found
	for _, c := range cs {
		f := Found{What: "container", Container: c.Name, State: c.State}
		for _, m := range c.Mounts {
			if m.Bind() {
				f.Mounts = append(f.Mounts, m.Source+":"+m.Destination)
			}
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Container < out[j].Container })
	return out
}

// layoutOf derives an agent-server's layout from its containers' mounts
// (<P>/runtime-data/<id>/persistence and <C>/<id>) and accepts it only
// when it hashes to their owner label, as the agent-server computes it.
func layoutOf(owner string, cs []dockerclient.Container) (openhands.Layout, bool) {
	for _, c := range cs {
		var persistence, conversations string
		for _, m := range c.Mounts {
			src := filepath.Clean(m.Source)
			switch {
			case !m.Bind():
			case m.Destination == "/var/openhands/.openhands" && filepath.Base(src) == "persistence":
				run := filepath.Dir(src)
				if filepath.Base(filepath.Dir(run)) == "runtime-data" && openhands.IsConversationID(filepath.Base(run)) {
					persistence = filepath.Dir(filepath.Dir(run))
				}
			case strings.HasPrefix(m.Destination, "/var/openhands/conversations/") && openhands.IsConversationID(filepath.Base(src)):
				conversations = filepath.Dir(src)
			}
		}
		if persistence == "" || conversations == "" {
			continue
		}
		l, err := openhands.NewLayout(persistence, conversations)
		if err == nil && l.Owner() == owner {
			return l, true
		}
	}
	return openhands.Layout{}, false
}
