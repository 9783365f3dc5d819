package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/local"
	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/dockerclient"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

// Name is the backend's name in runtime keys.
const Name = "docker"

// UnownedPrefix starts the ID of an unowned folder; a container name
// cannot hold a colon, so the two never collide.
const UnownedPrefix = "unowned:"

// Backend manages the containers one label selector matches.
type Backend struct {
	Client *dockerclient.Client
	// Labels select the containers: every pair must match. An empty
	// selector matches nothing (the configuration requires one).
	Labels map[string]string
	// Home is the container path of the sandbox home; Workspaces the
	// container paths of its workspaces. Both optional.
	Home       string
	Workspaces []string
	// Roots are the host folders (absolute, clean) under which bind-mount
	// sources are managed.
	Roots []string
	Git   gitcmd.Runner
	// StopTimeout is how long a stop waits before the Engine kills the
	// container; default 10s.
	StopTimeout time.Duration
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// Matches tells whether a container with these labels is one of ours.
func (b *Backend) Matches(labels map[string]string) bool {
	if len(b.Labels) == 0 {
		return false
	}
	for k, v := range b.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// bind is one bind mount of any container on the Engine.
type bind struct {
	source    string
	container string // name
	active    bool   // the container is running, paused or restarting
}

// overlaps tells whether a and b are the same folder or one holds the other.
func overlaps(a, b string) bool {
	return a == b || local.Inside(a, b) || local.Inside(b, a)
}

// List implements backend.Lister with one Engine request, plus one
// inspection per container for a full observation.
func (b *Backend) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	want := map[string]bool{}
	for _, id := range opts.IDs {
		want[id] = true
	}
	// The data root is asked once per client; without it the budget
	// simply does not see the writable layers.
	storage, _ := b.Client.DataRoot(ctx)
	if len(want) > 0 && !wantsUnowned(want) && !opts.Light {
		return b.listNamed(ctx, opts.IDs, storage)
	}
	all, err := b.Client.List(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", Name, err)
	}

	var binds []bind
	for _, c := range all {
		for _, m := range c.Mounts {
			if m.Bind() {
				binds = append(binds, bind{source: filepath.Clean(m.Source), container: c.Name, active: activeState(c.State)})
			}
		}
	}
	var rts []backend.Runtime
	var ids []string // container IDs, parallel to rts
	for _, c := range all {
		if !b.Matches(c.Labels) || (len(want) > 0 && !want[c.Name]) {
			continue
		}
		rts = append(rts, b.container(c, binds, storage))
		ids = append(ids, c.ID)
	}
	if !opts.Light {
		rts = b.inspectAll(ctx, rts, ids, storage)
	}
	unowned, err := b.unowned(ctx, binds, want, opts.Light)
	if err != nil {
		return nil, err
	}
	rts = append(rts, unowned...)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(want) > 0 {
		return rts, nil
	}
	return rts, b.diagnose(all, rts)
}

// diagnose says what a full listing could not see, in plain words: a
// selector that matched no container (not a failure: reported only when
// the ledger knows containers of the source), a home or workspace that no
// matched container mounts, a root that does not exist.
func (b *Backend) diagnose(all []dockerclient.Container, rts []backend.Runtime) error {
	var warnings backend.Warnings
	for _, r := range b.Roots {
		if fi, err := os.Stat(r); err != nil || !fi.IsDir() {
			warnings = append(warnings, fmt.Sprintf("root %s does not exist (or is not a folder): no container's folders under it are managed", r))
		}
	}
	var matched []dockerclient.Container
	for _, c := range all {
		if b.Matches(c.Labels) {
			matched = append(matched, c)
		}
	}
	mountedBy := func(dest string) int {
		n := 0
		for _, c := range matched {
			if slices.ContainsFunc(c.Mounts, func(m dockerclient.Mount) bool { return m.Bind() && filepath.Clean(m.Destination) == dest }) {
				n++
			}
		}
		return n
	}
	if len(matched) > 0 {
		for _, dest := range append([]string{b.Home}, b.Workspaces...) {
			if dest != "" && mountedBy(filepath.Clean(dest)) == 0 {
				warnings = append(warnings, fmt.Sprintf("%s is mounted by none of the %d matched containers: nothing of theirs there is managed",
					dest, len(matched)))
			}
		}
	}
	switch {
	case len(warnings) > 0:
		return warnings
	case len(rts) == 0:
		return backend.EmptyListing(fmt.Sprintf("selector %s matched 0 of %d containers", selectorText(b.Labels), len(all)))
	}
	return nil
}

func selectorText(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + labels[k]
	}
	return strings.Join(parts, ",")
}

// activeStates are the Engine states in which a container has processes.
var activeStates = []string{"running", "paused", "restarting"}

// listNamed observes a few named containers (apply re-observing the one it
// acts on): an inspection of each, then, only when one of them is stopped
// with managed folders, a listing of the active containers, which are all
// that can make a shared folder busy. On a host of many stopped containers
// this keeps each re-observation small.
func (b *Backend) listNamed(ctx context.Context, names []string, storage string) ([]backend.Runtime, error) {
	type inspected struct {
		d   dockerclient.Details
		err error
	}
	got := make([]inspected, len(names))
	parallel(ctx, len(names), func(i int) {
		got[i].d, got[i].err = b.Client.Inspect(ctx, names[i], false)
	})
	var rts []backend.Runtime
	var containers []dockerclient.Container // parallel to rts
	needBinds := false
	for i, name := range names {
		d, err := got[i].d, got[i].err
		switch {
		case dockerclient.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("list %s: %w", Name, err)
		case !b.Matches(d.Labels) || d.Name != name:
			continue // another container, or one the selector no longer matches
		}
		rt := b.container(d.Container, nil, storage)
		b.fillInspected(ctx, &rt, d, storage)
		needBinds = needBinds || (!rt.State.Active() && rt.Root != "")
		rts = append(rts, rt)
		containers = append(containers, d.Container)
	}
	if needBinds {
		active, err := b.Client.List(ctx, nil, activeStates...)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", Name, err)
		}
		var binds []bind
		for _, c := range active {
			for _, m := range c.Mounts {
				if m.Bind() {
					binds = append(binds, bind{source: filepath.Clean(m.Source), container: c.Name, active: true})
				}
			}
		}
		for i := range rts {
			if !rts[i].State.Active() {
				rts[i].Busy = sharedWithActive(containers[i], rts[i].Root, binds)
			}
		}
	}
	return rts, ctx.Err()
}

// parallel calls fn for 0..n-1 on a few workers: the Engine answers
// inspections concurrently, and a pass may inspect hundreds.
func parallel(ctx context.Context, n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, max(4, runtime.GOMAXPROCS(0))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// activeState tells whether an Engine state means processes exist.
func activeState(s string) bool {
	return s == "running" || s == "paused" || s == "restarting"
}

// state maps an Engine state. A paused container keeps its processes and
// open files: it counts as running, so only a stop can touch it.
func state(s string) backend.State {
	switch s {
	case "running", "paused":
		return backend.StateRunning
	case "restarting":
		return backend.StateStarting
	case "created", "exited", "dead":
		return backend.StateStopped
	}
	return backend.StateUnknown // removing, or something new
}

// rootOf returns the root holding path, or "".
func (b *Backend) rootOf(path string) string {
	for _, r := range b.Roots {
		if local.Inside(r, path) {
			return r
		}
	}
	return ""
}

// container builds a runtime from a listing, without the inspection.
func (b *Backend) container(c dockerclient.Container, binds []bind, storage string) backend.Runtime {
	rt := backend.Runtime{
		Key:       backend.Key{Backend: Name, ID: c.Name},
		State:     state(c.State),
		Labels:    c.Labels,
		CreatedAt: c.Created,
		Storage:   storage,
	}
	home := filepath.Clean(b.Home)
	var firstManaged string
	wsByPath := map[string]string{}
	for _, m := range c.Mounts {
		if !m.Bind() {
			continue
		}
		src, dest := filepath.Clean(m.Source), filepath.Clean(m.Destination)
		if b.Home != "" && dest == home {
			rt.Home = src
		}
		for _, w := range b.Workspaces {
			if dest == filepath.Clean(w) {
				wsByPath[w] = src
			}
		}
		if firstManaged == "" && b.rootOf(src) != "" {
			firstManaged = src
		}
	}
	for _, w := range b.Workspaces { // in configured order: stable for the ledger
		if src, ok := wsByPath[w]; ok {
			rt.Workspaces = append(rt.Workspaces, src)
		}
	}
	// One root per runtime: the home's, else the first workspace's, else
	// that of any managed mount.
	for _, p := range append(append([]string{rt.Home}, rt.Workspaces...), firstManaged) {
		if r := b.rootOf(p); p != "" && r != "" {
			rt.Root = r
			break
		}
	}
	for _, ws := range rt.Workspaces {
		if local.Inside(rt.Root, ws) {
			rt.Unsaved = "the files of its workspace folders"
			break
		}
	}
	if !rt.State.Active() {
		rt.Busy = sharedWithActive(c, rt.Root, binds)
	}
	return rt
}

// sharedWithActive says which running container uses one of c's managed
// folders (or a folder in or around it); "" when none does.
func sharedWithActive(c dockerclient.Container, root string, binds []bind) string {
	if root == "" {
		return ""
	}
	for _, m := range c.Mounts {
		src := filepath.Clean(m.Source)
		if !m.Bind() || !local.Inside(root, src) {
			continue
		}
		for _, o := range binds {
			if o.active && o.container != c.Name && overlaps(src, o.source) {
				return fmt.Sprintf("%s is also mounted by running container %s", src, o.container)
			}
		}
	}
	return ""
}

// inspectAll adds what only an inspection tells: last start and finish,
// the container's ID in the fingerprint, and the writable layer's size. A
// container that vanished since the listing is dropped.
func (b *Backend) inspectAll(ctx context.Context, rts []backend.Runtime, ids []string, storage string) []backend.Runtime {
	keep := make([]bool, len(rts))
	parallel(ctx, len(rts), func(i int) {
		d, err := b.Client.Inspect(ctx, ids[i], false)
		switch {
		case dockerclient.IsNotFound(err):
			return
		case err != nil:
			// Without the inspection it may have started: protect it.
			rts[i].State = backend.StateUnknown
			rts[i].Busy = "inspection failed: " + err.Error()
		default:
			b.fillInspected(ctx, &rts[i], d, storage)
		}
		keep[i] = true
	})
	out := rts[:0]
	for i, rt := range rts {
		if keep[i] {
			out = append(out, rt)
		}
	}
	return out
}

// fillInspected adds an inspection's facts to a runtime built from a
// listing.
func (b *Backend) fillInspected(ctx context.Context, rt *backend.Runtime, d dockerclient.Details, storage string) {
	rt.State = state(d.State)
	rt.LastActivity = lastActivity(d)
	if rt.State.Active() && !d.StartedAt.IsZero() {
		// The lifetime cap bounds one run ("running longer than
		// max_lifetime"): an old conversation resumed today is not
		// stopped at once for its age.
		rt.CreatedAt = d.StartedAt
	}
	rt.StorageBytes = layerBytes(ctx, storage, d.UpperDir)
	rt.Fingerprint = fingerprint(d.ID, *rt, d)
	if rt.State == backend.StateRunning {
		rt.AgentServer = b.agentServer(d)
	}
}

// Labels a container carries to name its OpenHands agent-server: the
// container port it listens on (published on the host), and optionally
// the variable of the container's environment holding its session key.
const (
	AgentServerPortLabel   = "reclaimer.io/agent-server-port"
	AgentServerKeyEnvLabel = "reclaimer.io/agent-server-key-env"
)

// agentServer is where a running container's agent-server answers on this
// host, from its labelled port's published address; nil when it has no
// such label or the port is not published. An address published on every
// interface is reached on the Engine's host (loopback for a local Engine).
func (b *Backend) agentServer(d dockerclient.Details) *backend.AgentServer {
	port := d.Labels[AgentServerPortLabel]
	addr, ok := d.Published[port]
	if port == "" || !ok {
		return nil
	}
	host, hport, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	if host == "" {
		host = "127.0.0.1"
		if u, err := url.Parse(b.Client.Host()); err == nil && u.Scheme == "tcp" && u.Hostname() != "" {
			host = u.Hostname()
		}
	}
	a := &backend.AgentServer{URL: "http://" + net.JoinHostPort(host, hport)}
	if name := d.Labels[AgentServerKeyEnvLabel]; name != "" {
		for _, kv := range d.Env {
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				a.SessionKey = v
			}
		}
	}
	return a
}

// layerBytes measures a writable layer's folder under the data root
// itself: the Engine's own measure (inspect with size) took 65 ms a
// container on fuse-overlayfs, five times a whole pass's other work; a
// walk of the few files a sandbox writes outside its mounts takes
// microseconds. 0 when the driver has no such folder or it cannot be read.
func layerBytes(ctx context.Context, storage, upper string) int64 {
	upper = filepath.Clean(upper)
	rel, err := filepath.Rel(storage, upper)
	if storage == "" || upper == "." || err != nil || !local.Inside(storage, upper) {
		return 0
	}
	res, err := treesize.Measure(ctx, storage, rel, treesize.Options{})
	if err != nil {
		return 0
	}
	return res.AllocBytes
}

// lastActivity is the container's last start or finish, else its creation.
func lastActivity(d dockerclient.Details) time.Time {
	t := d.StartedAt
	if d.FinishedAt.After(t) {
		t = d.FinishedAt
	}
	if t.IsZero() {
		t = d.Created
	}
	return t
}

func fingerprint(id string, rt backend.Runtime, d dockerclient.Details) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%s\x00%s\x00%s", id, d.State, d.StartedAt.UnixNano(), d.FinishedAt.UnixNano(),
		rt.Root, rt.Home, strings.Join(rt.Workspaces, "\x00"))
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// unowned lists the direct child folders of the roots that no container
// mounts (see the package documentation).
func (b *Backend) unowned(ctx context.Context, binds []bind, want map[string]bool, light bool) ([]backend.Runtime, error) {
	if len(want) > 0 && !wantsUnowned(want) {
		return nil, nil
	}
	var rts []backend.Runtime
	for _, root := range b.Roots {
		names, err := childDirs(root)
		if errors.Is(err, os.ErrNotExist) {
			continue // a root not made yet holds nothing
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", root, err)
		}
		for _, n := range names {
			path := filepath.Join(root, n)
			id := UnownedPrefix + path
			if (len(want) > 0 && !want[id]) || slices.ContainsFunc(binds, func(m bind) bool { return overlaps(path, m.source) }) {
				continue
			}
			rt := backend.Runtime{Key: backend.Key{Backend: Name, ID: id}, State: backend.StateUnowned, Path: path, Root: root,
				Unsaved: "the folder's files"}
			if !light {
				act := local.Activity(ctx, b.Git, rt)
				rt.LastActivity = act.Newest
				sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", path, act.Newest.UnixNano(), act.Files))
				rt.Fingerprint = hex.EncodeToString(sum[:12])
			}
			rts = append(rts, rt)
		}
	}
	return rts, nil
}

func wantsUnowned(want map[string]bool) bool {
	for id := range want {
		if strings.HasPrefix(id, UnownedPrefix) {
			return true
		}
	}
	return false
}

// childDirs lists the folders directly in root that can be unowned: not
// hidden (the trash), not links, not mount points, not a filesystem's
// lost+found (a root may be a filesystem of its own).
func childDirs(root string) ([]string, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	f := os.NewFile(uintptr(fd), root) // owns fd from here
	defer f.Close()
	rootMnt, err := beneath.MountID(fd)
	if err != nil {
		return nil, err
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.Name() == "lost+found" || !e.IsDir() {
			continue // hidden, a file or a link (ReadDir does not follow)
		}
		var stx unix.Statx_t
		if unix.Statx(fd, e.Name(), unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx) != nil ||
			(stx.Mask&unix.STATX_MNT_ID != 0 && stx.Mnt_id != rootMnt) {
			continue
		}
		names = append(names, e.Name())
	}
	return names, nil
}

var (
	_ backend.Lister = (*Backend)(nil)
)

// ManagedRoots implements backend.Rooted.
func (b *Backend) ManagedRoots() []string { return b.Roots }

var _ backend.Rooted = (*Backend)(nil)
