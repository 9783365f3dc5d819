package openhands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/docker"
	"github.com/reclaimer/reclaimer/internal/backend/local"
	"github.com/reclaimer/reclaimer/internal/dockerclient"
)

// kind tells which sort of runtime an ID names.
type kind int

const (
	kindConversation kind = iota
	kindContainer         // container:<name> or execution:<name>
	kindTrash
	kindUnknown
)

func kindOf(id string) (kind, string) {
	switch {
	case IsConversationID(id):
		return kindConversation, id
	case strings.HasPrefix(id, ContainerPrefix):
		return kindContainer, strings.TrimPrefix(id, ContainerPrefix)
	case strings.HasPrefix(id, ExecutionPrefix):
		return kindContainer, strings.TrimPrefix(id, ExecutionPrefix)
	case id == TrashID:
		return kindTrash, ""
	}
	return kindUnknown, ""
}

// isRunFolder tells whether rt is conversation id's runtime folder as this
// layout places it: the only folder a conversation's steps touch.
func (b *Backend) isRunFolder(rt backend.Runtime) bool {
	l := b.opts.Layout
	return IsConversationID(rt.ID) && rt.Path == l.RunDir(rt.ID) && rt.Root == l.DataRoot()
}

// activeUser returns the name of a running container that mounts path
// (or a folder in or around it), from a fresh Engine listing; "" when none.
func (b *Backend) activeUser(ctx context.Context, path string) (string, error) {
	if b.opts.Client == nil {
		return "", nil
	}
	all, err := b.opts.Client.List(ctx, nil, "running", "paused", "restarting")
	if err != nil {
		return "", fmt.Errorf("list containers: %w", err)
	}
	for _, c := range all {
		for _, m := range c.Mounts {
			src := filepath.Clean(m.Source)
			if m.Bind() && docker.Overlaps(src, path) {
				return c.Name, nil
			}
		}
	}
	return "", nil
}

// Suspend implements backend.Suspender: the conversation's containers are
// stopped (the agent-server runs them with --rm, so they go; it starts a
// new one when the conversation is next used), files kept.
func (b *Backend) Suspend(ctx context.Context, rt backend.Runtime, opts backend.SuspendOptions) error {
	if b.opts.Client == nil {
		return fmt.Errorf("suspend %s: no Docker Engine: %w", rt.Key, errors.ErrUnsupported)
	}
	k, name := kindOf(rt.ID)
	var names []string
	switch k {
	case kindContainer:
		names = []string{name}
	case kindConversation:
		eng, err := b.readEngine(ctx)
		if err != nil {
			return fmt.Errorf("suspend %s: %w", rt.Key, err)
		}
		if len(eng.ours[rt.ID]) == 0 && !b.exists(rt.ID) {
			return fmt.Errorf("suspend %s: %w", rt.Key, backend.ErrNotFound)
		}
		for _, c := range eng.ours[rt.ID] {
			if docker.Active(c.State) {
				names = append(names, c.ID)
			}
		}
	default:
		return fmt.Errorf("suspend %s: nothing runs: %w", rt.Key, errors.ErrUnsupported)
	}
	timeout := b.opts.StopTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	for _, n := range names {
		if err := b.opts.Client.Stop(ctx, n, timeout); err != nil && !dockerclient.IsNotFound(err) {
			return fmt.Errorf("suspend %s: %w", rt.Key, err)
		}
	}
	return nil
}

// ReclaimFiles implements backend.FileReclaimer for a conversation's
// runtime folder (caches of its home, core dumps, git-ignored
// dependencies of its workspace), never while a container uses it.
func (b *Backend) ReclaimFiles(ctx context.Context, rt backend.Runtime, opts backend.FileOptions) ([]backend.File, error) {
	if !b.isRunFolder(rt) {
		return nil, fmt.Errorf("reclaim files of %s: no runtime folder: %w", rt.Key, errors.ErrUnsupported)
	}
	if rt.State.Active() || rt.State == backend.StateUnknown || rt.Busy != "" {
		return nil, fmt.Errorf("reclaim files of %s: %s %s: %w", rt.Key, rt.State, rt.Busy, backend.ErrBusy)
	}
	if len(opts.Paths) > 0 {
		// Right before the renames: a container may have started since.
		if name, err := b.activeUser(ctx, rt.Path); err != nil || name != "" {
			return nil, fmt.Errorf("reclaim files of %s: in use by container %q: %w", rt.Key, name, errors.Join(err, backend.ErrBusy))
		}
	}
	return b.dirs.ReclaimFiles(ctx, rt, opts)
}

// NotKept implements backend.Discloser: what Export leaves out.
func (b *Backend) NotKept(rt backend.Runtime, opts backend.ExportOptions) []string {
	if !b.isRunFolder(rt) {
		return []string{"everything of it (it has no runtime folder)"}
	}
	opts.CacheDirs = b.opts.CacheDirs
	opts.ExcludeHome = false // the sandbox home is the conversation's state: always kept
	out := local.NotKept(rt, opts)
	out = append(out, "the conversation's history and runtime-control manifest (they stay with the agent-server)")
	if ws := rt.Labels["caller_workspace"]; ws != "" {
		out = append(out, "the caller's workspace "+ws+" (not the agent-server's; left in place)")
	}
	return out
}

// Export implements backend.Exporter: a verified tar.zst of the runtime
// folder, the workspace and the home, with the home's caches, core dumps
// and the workspace's git-ignored dependencies left out. A caller's
// workspace outside it, the history and the manifest are not in it: they
// stay where they are. A runtime with no folder exports an empty archive
// that says so.
func (b *Backend) Export(ctx context.Context, rt backend.Runtime, opts backend.ExportOptions) (backend.Export, error) {
	req := archive.Request{Sink: opts.Sink, Base: opts.Name, Runtime: rt.ID, Backend: Name,
		Conversations: opts.Conversations, CreatedAt: opts.CreatedAt, Staging: opts.Dir,
		IncludeDependencies: opts.IncludeDependencies}
	var folders []archive.Folder
	if b.isRunFolder(rt) {
		f := archive.Folder{Name: "run", Path: rt.Path}
		deps, err := local.Dependencies(ctx, b.opts.Git, rt, opts.Rebuildable, opts.Keep)
		if err != nil {
			return backend.Export{}, fmt.Errorf("export %s: select dependencies to leave out: %w", rt.Key, err)
		}
		for _, d := range deps {
			f.Dependencies = append(f.Dependencies, d.Path)
		}
		for _, c := range local.Caches(ctx, rt, b.opts.CacheDirs) { // never archived, whatever include_home says
			f.Leave = append(f.Leave, c.Path)
		}
		folders = append(folders, f)
		req.NotKept = append(req.NotKept, "the conversation's history and runtime-control manifest (they stay with the agent-server)")
		if ws := rt.Labels["caller_workspace"]; ws != "" {
			req.NotKept = append(req.NotKept, "the caller's workspace "+ws+" (not the agent-server's; left in place)")
		}
	} else {
		req.NotKept = []string{"everything of it (it has no runtime folder)"}
	}
	m, err := archive.ExportFolders(ctx, req, folders)
	if err != nil {
		return backend.Export{}, err
	}
	exp := m.BackendExport()
	exp.Restore = "reclaimer restore " + rt.Key.String()
	return exp, nil
}

// Delete implements backend.Deleter.
//
// A conversation: its archive marker is written first, the way the
// agent-server's own retention does, so from then on the agent-server
// shows the conversation as archived and refuses to start its runtime
// (HTTP 410); then, with no container using the folder, its stopped
// containers are removed and the runtime folder goes into the trash. The
// manifest and the history stay. A container found running after the
// marker was written aborts the delete and takes the marker away again (if
// this call wrote it).
//
// A container runtime: the container is removed, never while it runs. The
// agent-server's trash: each entry goes into reclaimer's trash.
func (b *Backend) Delete(ctx context.Context, rt backend.Runtime, opts backend.DeleteOptions) error {
	k, name := kindOf(rt.ID)
	switch k {
	case kindContainer:
		return b.removeContainer(ctx, rt, name)
	case kindTrash:
		return b.emptyTrash(rt, opts)
	case kindConversation:
	default:
		return fmt.Errorf("delete %s: unknown runtime: %w", rt.Key, backend.ErrNotFound)
	}
	l := b.opts.Layout
	if rt.Path != "" && !b.isRunFolder(rt) {
		return fmt.Errorf("delete %s: %q is not its runtime folder %s: %w", rt.Key, rt.Path, l.RunDir(rt.ID), backend.ErrProtected)
	}
	if !b.exists(rt.ID) {
		// Neither manifest nor folder: no conversation to mark archived;
		// its containers, if any are left, go.
		return b.removeStopped(ctx, rt)
	}
	created, err := l.writeMarker(rt.ID, b.opts.Now())
	if err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	undo := func(cause error) error {
		if created {
			if err := l.removeMarker(rt.ID); err != nil {
				return fmt.Errorf("delete %s: %w; and its marker could not be taken away again: %w", rt.Key, cause, err)
			}
		}
		return fmt.Errorf("delete %s: %w", rt.Key, cause)
	}
	dir := l.RunDir(rt.ID)
	eng, err := b.readEngine(ctx)
	if err != nil {
		return undo(err)
	}
	for _, c := range eng.ours[rt.ID] {
		if docker.Active(c.State) {
			return undo(fmt.Errorf("container %s is %s: %w", c.Name, c.State, backend.ErrBusy))
		}
	}
	if who := sharedWithOthers(dir, nil, eng.all); who != "" {
		return undo(fmt.Errorf("%s: %w", who, backend.ErrBusy))
	}
	for _, c := range eng.ours[rt.ID] {
		if err := b.opts.Client.Remove(ctx, c.ID); err != nil && !dockerclient.IsNotFound(err) {
			return undo(err)
		}
	}
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil // moved by an earlier, interrupted delete, or by the agent-server
	}
	if err := opts.Discard(dir); err != nil {
		return fmt.Errorf("delete %s: the archive marker is written, but: %w", rt.Key, err)
	}
	return nil
}

// exists tells whether conversation id has a manifest or a runtime folder.
func (b *Backend) exists(id string) bool {
	l := b.opts.Layout
	for _, p := range []string{l.ManifestPath(id), l.RunDir(id)} {
		if _, err := os.Lstat(p); err == nil {
			return true
		}
	}
	return false
}

// removeStopped removes the conversation's stopped containers; a running
// one is ErrBusy.
func (b *Backend) removeStopped(ctx context.Context, rt backend.Runtime) error {
	eng, err := b.readEngine(ctx)
	if err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	for _, c := range eng.ours[rt.ID] {
		if docker.Active(c.State) {
			return fmt.Errorf("delete %s: container %s is %s: %w", rt.Key, c.Name, c.State, backend.ErrBusy)
		}
		if err := b.opts.Client.Remove(ctx, c.ID); err != nil && !dockerclient.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", rt.Key, err)
		}
	}
	return nil
}

func (b *Backend) removeContainer(ctx context.Context, rt backend.Runtime, name string) error {
	if b.opts.Client == nil {
		return fmt.Errorf("delete %s: no Docker Engine: %w", rt.Key, errors.ErrUnsupported)
	}
	eng, err := b.readEngine(ctx)
	if err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	for _, c := range append(eng.unclaimed, eng.execution...) {
		if c.Name != name {
			continue
		}
		if docker.Active(c.State) {
			return fmt.Errorf("delete %s: the container is %s: %w", rt.Key, c.State, backend.ErrBusy)
		}
		if err := b.opts.Client.Remove(ctx, c.ID); err != nil && !dockerclient.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", rt.Key, err)
		}
		return nil
	}
	return nil // gone already, or no longer one of ours: nothing to do
}

func (b *Backend) emptyTrash(rt backend.Runtime, opts backend.DeleteOptions) error {
	path := b.opts.Layout.TrashDir()
	if rt.Path != path || realFolder(path) != nil {
		return fmt.Errorf("delete %s: %q is not the agent-server's trash: %w", rt.Key, rt.Path, backend.ErrProtected)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	var errs []error
	for _, e := range entries {
		if err := opts.Discard(filepath.Join(path, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	return nil
}

// Restore implements backend.Restorer: the runtime folder comes back from
// the archive where it was, then the archive marker is removed, so the
// agent-server resumes the conversation (it starts a container on the
// restored folder when next asked). With opts.To the folder is extracted
// there and the conversation stays archived.
func (b *Backend) Restore(ctx context.Context, k backend.Key, opts backend.RestoreOptions) (string, error) {
	if !IsConversationID(k.ID) {
		return "", fmt.Errorf("restore %s: only a conversation's runtime folder can be restored: %w", k, errors.ErrUnsupported)
	}
	m, err := archive.ParseManifest(opts.Manifest)
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	l := b.opts.Layout
	dest := backend.RestoreTarget(opts.To, l.RunDir(k.ID))
	if _, err := os.Lstat(dest); err == nil {
		return "", fmt.Errorf("restore %s: %s already exists: %w", k, dest, backend.ErrConflict)
	}
	if len(m.Folders) == 0 {
		return "", fmt.Errorf("restore %s: the archive holds no runtime folder", k)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	if err := archive.RestoreFolders(ctx, opts.Sink, m, map[string]string{"run": dest}); err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	if opts.To == "" {
		if err := l.removeMarker(k.ID); err != nil {
			return dest, fmt.Errorf("restore %s: the folder is back, but: %w", k, err)
		}
	}
	return dest, nil
}

// Lock implements backend.Locker. The agent-server's own lock cannot be
// taken from outside, so the lock is a fresh observation
// (backend.LockByObserving): a conversation whose container runs or
// started since rt was observed is refused. The archive marker that
// Delete writes first is what keeps the agent-server from starting one
// afterwards.
func (b *Backend) Lock(ctx context.Context, rt backend.Runtime, opts backend.LockOptions) (backend.Lock, error) {
	return backend.LockByObserving(ctx, b, rt, opts)
}

// Watch implements backend.Watcher: the runtime of each of this
// agent-server's containers that dies or stops (by the names the last
// listing saw; a container it never saw is found by the next pass).
func (b *Backend) Watch(ctx context.Context, changed func(id string)) error {
	if b.opts.Client == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	l := b.opts.Layout
	owner, scope := l.Owner(), l.ExecutionScope()
	return b.opts.Client.Events(ctx, nil, []string{"die", "stop"}, func(ev dockerclient.Event) {
		if ev.Labels[OwnerLabel] != owner && ev.Labels[ExecutionScopeLabel] != scope {
			return
		}
		b.mu.Lock()
		id, ok := b.names[ev.Name]
		b.mu.Unlock()
		if ok {
			changed(id)
		}
	})
}

var (
	_ backend.Lister        = (*Backend)(nil)
	_ backend.Suspender     = (*Backend)(nil)
	_ backend.Deleter       = (*Backend)(nil)
	_ backend.FileReclaimer = (*Backend)(nil)
	_ backend.Exporter      = (*Backend)(nil)
	_ backend.Discloser     = (*Backend)(nil)
	_ backend.Restorer      = (*Backend)(nil)
	_ backend.Locker        = (*Backend)(nil)
	_ backend.Watcher       = (*Backend)(nil)
	_ backend.Rooted        = (*Backend)(nil)
)
