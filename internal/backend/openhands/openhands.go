package openhands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/docker"
	"github.com/reclaimer/reclaimer/internal/backend/local"
	"github.com/reclaimer/reclaimer/internal/backend/rundir"
	"github.com/reclaimer/reclaimer/internal/dockerclient"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// Name is the backend's name in runtime keys.
// (OpenHands Cloud's sandboxes are the "openhands-cloud" backend, package
// openhandscloud.)
const Name = "openhands"

// ID prefixes of the runtimes that are no conversation's folder.
const (
	ContainerPrefix = "container:" // an owner-labelled container no manifest claims
	ExecutionPrefix = "execution:" // an execution-only container
	// TrashID is the agent-server's own trash (runtime-data/.trash).
	TrashID = "trash"
)

// Options configure a Backend.
type Options struct {
	Layout Layout
	// Client is the Docker Engine the agent-server starts its containers
	// on; nil when it runs none (local mode): no container is looked at.
	Client *dockerclient.Client
	Git    gitcmd.Runner
	// CacheDirs are the home's cache folders (the source's cache_dirs):
	// shed by the caches step, never archived.
	CacheDirs []string
	// ProbeDir is the run folders' probe cache (see package rundir).
	ProbeDir string
	// Now is the clock of the archive markers; default time.Now.
	Now func() time.Time
	// StopTimeout is how long a suspend waits for a container; default 10 s.
	StopTimeout time.Duration
}

// Backend is one agent-server's runtimes (see the package documentation).
type Backend struct {
	opts Options
	dirs *rundir.Backend // the runtime folders of runtime-data

	mu    sync.Mutex
	names map[string]string // container name -> runtime ID, from the last listing
}

// New returns the backend of one agent-server's layout.
func New(opts Options) *Backend {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := opts.Layout
	return &Backend{opts: opts, dirs: &rundir.Backend{Root: l.DataRoot(), Home: homeDir, Workspaces: []string{workDir},
		Git: opts.Git, CacheDirs: opts.CacheDirs, ProbeDir: opts.ProbeDir}}
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// Layout is the layout the backend reads.
func (b *Backend) Layout() Layout { return b.opts.Layout }

// ManagedRoots are the folders under which this backend touches files.
func (b *Backend) ManagedRoots() []string { return []string{b.opts.Layout.DataRoot()} }

// control is what runtime-control holds, by conversation id.
type control struct {
	manifests map[string]Manifest
	bad       map[string]string // manifests the agent-server would refuse too: why
	markers   map[string]string // retired_at ("" when unreadable)
}

// readControl lists runtime-control: manifests and markers. The folder
// itself must be a real folder (the agent-server refuses a link too).
func (b *Backend) readControlDir() (control, error) {
	l := b.opts.Layout
	c := control{manifests: map[string]Manifest{}, bad: map[string]string{}, markers: map[string]string{}}
	if err := realFolder(l.ControlDir()); err != nil {
		return c, err
	}
	entries, err := os.ReadDir(l.ControlDir())
	if err != nil {
		return c, fmt.Errorf("list %s: %w", l.ControlDir(), err)
	}
	for _, e := range entries {
		name := e.Name()
		if id, ok := strings.CutSuffix(name, markerExt); ok && IsConversationID(id) {
			c.markers[id] = ""
			if data, err := readControl(filepath.Join(l.ControlDir(), name)); err == nil {
				var m Marker
				if json.Unmarshal(data, &m) == nil {
					c.markers[id] = m.RetiredAt
				}
			}
			continue
		}
		if id, ok := strings.CutSuffix(name, manifestExt); ok && IsConversationID(id) {
			m, err := l.ReadManifest(id)
			if err != nil {
				c.bad[id] = err.Error()
				continue
			}
			c.manifests[id] = m
		}
	}
	return c, nil
}

// realFolder fails unless path is a folder reached without a link at its
// last component.
func realFolder(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s does not exist: is this the persistence folder of an agent-server in Docker mode?", path)
	case err != nil:
		return err
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: the agent-server refuses one, and so does reclaimer", path)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a folder", path)
	}
	return nil
}

// engineView is what one Engine listing tells about the layout.
type engineView struct {
	all []dockerclient.Container
	// ours maps conversation id -> its owner-labelled containers.
	ours map[string][]dockerclient.Container
	// unclaimed are owner-labelled containers that mount no conversation's
	// folder; execution are this agent-server's execution-only ones.
	unclaimed, execution []dockerclient.Container
}

// mountedID returns the conversation whose runtime or history folder src
// is (or lies in), or "".
func (l Layout) mountedID(src string) string {
	for _, root := range []string{l.DataRoot(), l.ConversationsDir} {
		rel, err := filepath.Rel(root, filepath.Clean(src))
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if IsConversationID(first) {
			return first
		}
	}
	return ""
}

func (b *Backend) readEngine(ctx context.Context) (engineView, error) {
	v := engineView{ours: map[string][]dockerclient.Container{}}
	if b.opts.Client == nil {
		return v, nil
	}
	all, err := b.opts.Client.List(ctx, nil)
	if err != nil {
		return v, fmt.Errorf("list containers: %w", err)
	}
	v.all = all
	l := b.opts.Layout
	owner, scope := l.Owner(), l.ExecutionScope()
	for _, c := range all {
		switch {
		case c.Labels[OwnerLabel] == owner:
			ids := map[string]bool{}
			for _, m := range c.Mounts {
				if id := l.mountedID(m.Source); m.Bind() && id != "" && !ids[id] {
					ids[id] = true
					v.ours[id] = append(v.ours[id], c)
				}
			}
			if len(ids) == 0 {
				v.unclaimed = append(v.unclaimed, c)
			}
		case c.Labels[ExecutionScopeLabel] == scope:
			v.execution = append(v.execution, c)
		}
	}
	return v, nil
}

// List implements backend.Lister: one listing of runtime-control and of
// runtime-data, and one Engine request.
func (b *Backend) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	l := b.opts.Layout
	ctl, err := b.readControlDir()
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", Name, err)
	}
	if err := realFolder(l.DataRoot()); err != nil {
		return nil, fmt.Errorf("list %s: %w", Name, err)
	}
	eng, err := b.readEngine(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", Name, err)
	}
	want := map[string]bool{}
	var dirIDs []string
	for _, id := range opts.IDs {
		want[id] = true
		if IsConversationID(id) {
			dirIDs = append(dirIDs, id)
		}
	}
	var dirs []backend.Runtime
	if len(want) == 0 || len(dirIDs) > 0 {
		dirs, err = b.dirs.List(ctx, backend.ListOptions{IDs: dirIDs, Light: opts.Light})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", Name, err)
		}
	}
	byID := map[string]backend.Runtime{}
	for _, d := range dirs {
		if IsConversationID(d.ID) {
			byID[d.ID] = d
		}
	}
	ids := map[string]bool{}
	for id := range byID {
		ids[id] = true
	}
	for id := range ctl.manifests {
		ids[id] = true
	}
	for id := range ctl.bad {
		ids[id] = true
	}
	for id := range eng.ours {
		ids[id] = true
	}
	names := map[string]string{}
	var rts []backend.Runtime
	var warnings backend.Warnings
	for id := range ids {
		if len(want) > 0 && !want[id] {
			continue
		}
		rt, ok, warn := b.conversation(id, byID, ctl, eng, opts.Light)
		if warn != "" {
			warnings = append(warnings, warn)
		}
		if !ok {
			continue
		}
		for _, c := range eng.ours[id] {
			names[c.Name] = id
		}
		rts = append(rts, rt)
	}
	for _, c := range eng.unclaimed {
		id := ContainerPrefix + c.Name
		names[c.Name] = id
		if len(want) == 0 || want[id] {
			rts = append(rts, containerRuntime(id, c, "a container with this agent-server's owner label that mounts no conversation's folder"))
		}
	}
	for _, c := range eng.execution {
		id := ExecutionPrefix + c.Name
		names[c.Name] = id
		if len(want) > 0 && !want[id] {
			continue
		}
		why := ""
		if !docker.Active(c.State) {
			why = "a stopped execution container (the agent-server removes them when it starts; a crash left this one)"
		}
		rts = append(rts, containerRuntime(id, c, why))
	}
	if len(want) == 0 || want[TrashID] {
		if rt, ok := b.trash(ctx, opts.Light); ok {
			rts = append(rts, rt)
		}
	}
	b.mu.Lock()
	b.names = names
	b.mu.Unlock()
	sort.Slice(rts, func(i, j int) bool { return rts[i].ID < rts[j].ID })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(warnings) > 0 {
		sort.Strings(warnings)
		return rts, warnings
	}
	return rts, nil
}

// conversation builds the runtime of one conversation id from its folder,
// manifest, marker and containers; ok is false when nothing of it is there
// to manage (only its manifest, or its manifest and marker: archived).
// warn says when its manifest is unreadable. A manifest and a history
// whose runtime folder and containers are not there any more is an orphan
// (the agent-server would resume it into an empty runtime); deleting it
// writes the archive marker, nothing else. A manifest alone is a
// conversation not started yet (the agent-server writes it first) and says
// nothing.
func (b *Backend) conversation(id string, dirs map[string]backend.Runtime, ctl control, eng engineView, light bool) (rt backend.Runtime, ok bool, warn string) {
	l := b.opts.Layout
	rt, hasDir := dirs[id]
	m, hasManifest := ctl.manifests[id]
	bad, badManifest := ctl.bad[id]
	retiredAt, marked := ctl.markers[id]
	containers := eng.ours[id]
	// lost: a conversation that ran (its history is there) whose runtime
	// folder and containers are gone, not archived.
	lost := false
	if !hasDir && len(containers) == 0 {
		switch {
		case marked:
		case badManifest:
			warn = fmt.Sprintf("conversation %s: its runtime-control manifest is unreadable (%s)", UUID(id), bad)
		case hasManifest && !stateTime(l.StatePath(id)).IsZero():
			lost = true
		}
		if !lost {
			return backend.Runtime{}, false, warn
		}
	}
	if !hasDir {
		rt = backend.Runtime{State: backend.StateStopped}
	}
	rt.Key = backend.Key{Backend: Name, ID: id}
	rt.Labels = map[string]string{"conversation_id": UUID(id)}
	if fi, err := os.Lstat(l.ConversationDir(id)); err == nil && fi.IsDir() {
		rt.Labels["history"] = l.ConversationDir(id)
	}
	if marked {
		rt.Labels["archived_at"] = retiredAt
		if retiredAt == "" {
			rt.Labels["archived_at"] = "unknown"
		}
	}
	if hasDir {
		ws, foreign := l.ownedWorkspace(id, m)
		rt.Workspaces = nil
		if ws != "" {
			rt.Workspaces = []string{ws}
		}
		if foreign != "" {
			// A caller's checkout: listed, never touched (the managed
			// folders are the runtime folder's only).
			rt.Labels["caller_workspace"] = foreign
		}
	}
	var names []string
	for _, c := range containers {
		names = append(names, c.Name)
		if s := docker.StateOf(c.State); s.Active() || s == backend.StateUnknown || rt.State == backend.StateStopped {
			rt.State = s
		}
	}
	if len(names) > 0 {
		rt.Labels["containers"] = strings.Join(names, ",")
	}
	if hasDir && !rt.State.Active() {
		rt.Busy = sharedWithOthers(rt.Path, containers, eng.all)
	}
	switch {
	case badManifest:
		// Whatever it is, the agent-server would not resume it: reported,
		// never acted on.
		rt.Pinned = "its runtime-control manifest is unreadable: " + bad
	case !hasManifest && hasDir:
		rt.Orphan = "a runtime folder with no runtime-control manifest (the agent-server cannot resume it)"
	case !hasManifest:
		rt.Orphan = "containers with this agent-server's owner label and no runtime-control manifest"
		rt.State = containersState(containers)
	case marked && hasDir:
		rt.Orphan = "archived by the agent-server (its marker is in runtime-control), its runtime folder still here"
	case marked:
		rt.Orphan = "archived by the agent-server, its containers still here"
	case lost:
		// Swept, it gets the archive marker: the agent-server then shows
		// it archived and read-only instead of resuming it into an empty
		// runtime. Its manifest (the keys to the history) and the history
		// stay; nothing else of it is there.
		rt.Orphan = "its runtime folder and containers are gone, not archived: the agent-server would resume it into an empty runtime (its history is in " +
			l.ConversationDir(id) + ")"
	}
	if !light && (hasDir || lost) {
		if at := stateTime(l.StatePath(id)); at.After(rt.LastActivity) {
			rt.LastActivity = at
		}
	}
	if !light {
		rt.Fingerprint = fingerprint(rt, containers, marked, hasManifest)
	}
	return rt, true, ""
}

// containersState is the most active state of containers.
func containersState(cs []dockerclient.Container) backend.State {
	st := backend.StateStopped
	for _, c := range cs {
		if s := docker.StateOf(c.State); s.Active() || s == backend.StateUnknown {
			st = s
		}
	}
	return st
}

// sharedWithOthers says which running container that is not the
// conversation's own uses its runtime folder (or a folder in or around
// it); "" when none does.
func sharedWithOthers(path string, own []dockerclient.Container, all []dockerclient.Container) string {
	for _, c := range all {
		if !docker.Active(c.State) || slices.ContainsFunc(own, func(o dockerclient.Container) bool { return o.ID == c.ID }) {
			continue
		}
		for _, m := range c.Mounts {
			src := filepath.Clean(m.Source)
			if m.Bind() && docker.Overlaps(src, path) {
				return fmt.Sprintf("%s is mounted by running container %s", src, c.Name)
			}
		}
	}
	return ""
}

// stateTime is the modification time of the conversation's
// base_state.json, its last activity; zero when absent or not a file.
func stateTime(path string) time.Time {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return time.Time{}
	}
	return time.Unix(st.Mtim.Sec, st.Mtim.Nsec)
}

func fingerprint(rt backend.Runtime, cs []dockerclient.Container, marked, manifest bool) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00%v\x00%v", rt.Fingerprint, rt.State, rt.Path, rt.LastActivity.UnixNano(), marked, manifest)
	for _, c := range cs {
		fmt.Fprintf(h, "\x00%s\x00%s", c.ID, c.State)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// containerRuntime is a runtime that is one container and no folder.
func containerRuntime(id string, c dockerclient.Container, orphan string) backend.Runtime {
	rt := backend.Runtime{Key: backend.Key{Backend: Name, ID: id}, State: docker.StateOf(c.State), CreatedAt: c.Created,
		LastActivity: c.Created, Labels: map[string]string{"container": c.Name}, Orphan: orphan}
	rt.Fingerprint = fingerprint(rt, []dockerclient.Container{c}, false, false)
	return rt
}

// trash is the agent-server's own trash as one runtime, when it holds
// anything: entries its reclaimer set aside and has not deleted yet (a
// crash, or a delete that failed).
func (b *Backend) trash(ctx context.Context, light bool) (backend.Runtime, bool) {
	l := b.opts.Layout
	path := l.TrashDir()
	if realFolder(path) != nil {
		return backend.Runtime{}, false
	}
	entries, err := os.ReadDir(path)
	if err != nil || len(entries) == 0 {
		return backend.Runtime{}, false
	}
	rt := backend.Runtime{Key: backend.Key{Backend: Name, ID: TrashID}, State: backend.StateUnowned, Path: path,
		Root: l.DataRoot(), Orphan: "entries the agent-server's own reclaimer set aside for deletion"}
	if !light {
		act := local.Activity(ctx, b.opts.Git, rt)
		rt.LastActivity = act.Newest
		sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", path, act.Newest.UnixNano(), act.Files))
		rt.Fingerprint = hex.EncodeToString(sum[:12])
	}
	return rt, true
}
