package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/local"
	"github.com/reclaimer/reclaimer/internal/dockerclient"
)

func isUnowned(rt backend.Runtime) bool { return strings.HasPrefix(rt.ID, UnownedPrefix) }

// Suspend implements backend.Suspender: the container is stopped, its
// files and writable layer kept.
func (b *Backend) Suspend(ctx context.Context, rt backend.Runtime, opts backend.SuspendOptions) error {
	if isUnowned(rt) {
		return fmt.Errorf("suspend %s: a folder has nothing to stop: %w", rt.Key, errors.ErrUnsupported)
	}
	timeout := b.StopTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if err := b.Client.Stop(ctx, rt.ID, timeout); err != nil {
		if dockerclient.IsNotFound(err) {
			return fmt.Errorf("suspend %s: %w", rt.Key, backend.ErrNotFound)
		}
		return fmt.Errorf("suspend %s: %w", rt.Key, err)
	}
	return nil
}

// ReclaimFiles implements backend.FileReclaimer: the caches of the home
// and the dependencies of the workspaces, only inside the runtime's root
// and never while the container or one sharing its folders runs.
func (b *Backend) ReclaimFiles(ctx context.Context, rt backend.Runtime, opts backend.FileOptions) ([]backend.File, error) {
	if isUnowned(rt) {
		return local.Reclaim(ctx, b.Git, rt, opts)
	}
	if rt.State.Active() || rt.State == backend.StateUnknown {
		return nil, fmt.Errorf("reclaim files of %s: the container is %s: %w", rt.Key, rt.State, backend.ErrBusy)
	}
	if rt.Busy != "" {
		return nil, fmt.Errorf("reclaim files of %s: %s: %w", rt.Key, rt.Busy, backend.ErrBusy)
	}
	// A container has no folder of its own: only its home and workspaces
	// are looked into (local would take Path for a missing workspace).
	view := rt
	view.Path = ""
	return local.Reclaim(ctx, b.Git, view, opts)
}

// managedWorkspaces are the workspaces this backend may archive or shed:
// inside the runtime's root, reached without a link or a mount point.
func managedWorkspaces(rt backend.Runtime) []string {
	var out []string
	for _, ws := range rt.Workspaces {
		if local.RealDir(rt.Root, ws) && !slices.Contains(out, ws) {
			out = append(out, ws)
		}
	}
	return out
}

// managedHome is rt's home when it is a real folder inside its root and
// not one of (or around, or inside) its managed workspaces: an archive
// keeps it as its own folder.
func managedHome(rt backend.Runtime) string {
	if rt.Home == "" || isUnowned(rt) || !local.RealDir(rt.Root, rt.Home) {
		return ""
	}
	for _, ws := range managedWorkspaces(rt) {
		if overlaps(ws, rt.Home) {
			return ""
		}
	}
	return rt.Home
}

// NotKept implements backend.Discloser.
func (b *Backend) NotKept(rt backend.Runtime, opts backend.ExportOptions) []string {
	if isUnowned(rt) {
		return local.NotKept(backend.Runtime{}, opts)
	}
	out := []string{"the container itself and its writable layer (its owner recreates it)"}
	switch {
	case len(managedWorkspaces(rt)) == 0 && managedHome(rt) == "":
		return []string{"everything of the container (no folder of it lies inside a managed root)"}
	case rt.Home != "" && managedHome(rt) == "" && !slices.ContainsFunc(managedWorkspaces(rt), func(ws string) bool { return overlaps(ws, rt.Home) }):
		out = append(out, "the home "+rt.Home+" (not a folder inside a managed root)")
	}
	view := rt
	if managedHome(rt) == "" && !opts.ExcludeHome {
		view.Home = "" // nothing of a home not archived to speak of
	}
	return append(out, local.NotKept(view, opts)...)
}

// Export implements backend.Exporter: a tar.zst of each managed workspace
// and of the home (unless opts.ExcludeHome; of the folder itself for an
// unowned folder), git-ignored dependencies left out, the home's caches
// and core dumps never stored, each verified by reading it back. A
// container with no managed folder exports an empty manifest that says so.
func (b *Backend) Export(ctx context.Context, rt backend.Runtime, opts backend.ExportOptions) (backend.Export, error) {
	trees := managedWorkspaces(rt)
	home := ""
	if !isUnowned(rt) && !opts.ExcludeHome {
		home = managedHome(rt)
	}
	view := rt
	if isUnowned(rt) {
		trees = []string{rt.Path}
	} else {
		view.Path = ""
	}
	deps, err := local.Dependencies(ctx, b.Git, view, opts.Rebuildable, opts.Keep)
	if err != nil {
		return backend.Export{}, fmt.Errorf("export %s: select dependencies to leave out: %w", rt.Key, err)
	}
	leave := local.LeftOut(ctx, rt, opts)
	var folders []archive.Folder
	add := func(name, tree string) {
		f := archive.Folder{Name: name, Path: tree}
		for _, d := range deps {
			if rel, err := filepath.Rel(tree, d.Path); err == nil && filepath.IsLocal(rel) {
				f.Dependencies = append(f.Dependencies, d.Path)
			}
		}
		for _, l := range leave {
			if rel, err := filepath.Rel(tree, l); err == nil && filepath.IsLocal(rel) {
				f.Leave = append(f.Leave, l)
			}
		}
		folders = append(folders, f)
	}
	for i, tree := range trees {
		add(folderName(rt, i), tree)
	}
	if home != "" {
		add("home", home)
	}
	req := archive.Request{Sink: opts.Sink, Base: opts.Name, Runtime: rt.ID, Backend: Name,
		Conversations: opts.Conversations, CreatedAt: opts.CreatedAt, Staging: opts.Dir,
		IncludeDependencies: opts.IncludeDependencies}
	req.NotKept = b.NotKept(rt, opts)
	m, err := archive.ExportFolders(ctx, req, folders)
	if err != nil {
		return backend.Export{}, err
	}
	exp := m.BackendExport()
	exp.Restore = "reclaimer restore " + rt.Key.String()
	return exp, nil
}

// folderName names the i-th archived folder of rt in its archive.
func folderName(rt backend.Runtime, i int) string {
	if isUnowned(rt) {
		return "run"
	}
	return fmt.Sprintf("workspace-%d", i)
}

// Restore implements backend.Restorer: each archived folder goes back where
// it was (or, with To, into To/<its folder name>); an existing folder is
// never overwritten. The container itself is not recreated: its owner does
// that.
func (b *Backend) Restore(ctx context.Context, k backend.Key, opts backend.RestoreOptions) (string, error) {
	m, err := archive.ParseManifest(opts.Manifest)
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	dests := map[string]string{}
	var where []string
	for _, f := range m.Folders {
		dest := backend.RestoreTarget(opts.To, f.Path)
		if dest == "" || !filepath.IsAbs(dest) {
			return "", fmt.Errorf("restore %s: the archive does not say where %s came from", k, f.Name)
		}
		if _, err := os.Lstat(dest); err == nil {
			return "", fmt.Errorf("restore %s: %s already exists: %w", k, dest, backend.ErrConflict)
		}
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return "", fmt.Errorf("restore %s: %w", k, err)
		}
		dests[f.Name] = dest
		where = append(where, dest)
	}
	if err := archive.RestoreFolders(ctx, opts.Sink, m, dests); err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	return strings.Join(where, ", "), nil
}

// Delete implements backend.Deleter: the container is removed (never
// forced: the Engine refuses a running one), then each of its bind-mount
// sources inside its root that no other container mounts goes into the
// trash, and the folders that held them are removed once empty. An
// unowned folder goes into the trash whole.
func (b *Backend) Delete(ctx context.Context, rt backend.Runtime, opts backend.DeleteOptions) error {
	if isUnowned(rt) {
		if rt.Root == "" || filepath.Dir(rt.Path) != rt.Root || !slices.Contains(b.Roots, rt.Root) {
			return fmt.Errorf("delete %s: %q is not a folder of a managed root: %w", rt.Key, rt.Path, backend.ErrProtected)
		}
		if err := opts.Discard(rt.Path); err != nil {
			return fmt.Errorf("delete %s: %w", rt.Key, err)
		}
		return nil
	}
	all, err := b.Client.List(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	// What it mounts; once gone (a crash after the removal), what the
	// runtime recorded.
	sources := append([]string{rt.Home}, rt.Workspaces...)
	var self *dockerclient.Container
	for i, c := range all {
		if c.Name == rt.ID && b.Matches(c.Labels) {
			self = &all[i]
		}
	}
	if self != nil {
		if activeState(self.State) {
			return fmt.Errorf("delete %s: the container is %s: %w", rt.Key, self.State, backend.ErrBusy)
		}
		sources = sources[:0]
		for _, m := range self.Mounts {
			if m.Bind() {
				sources = append(sources, filepath.Clean(m.Source))
			}
		}
	}
	var discard []string
	for _, src := range sources {
		if src == "" || !local.Inside(rt.Root, src) || slices.Contains(discard, src) {
			continue
		}
		shared := slices.ContainsFunc(all, func(c dockerclient.Container) bool {
			return c.Name != rt.ID && slices.ContainsFunc(c.Mounts, func(m dockerclient.Mount) bool {
				return m.Bind() && overlaps(src, filepath.Clean(m.Source))
			})
		})
		if !shared {
			discard = append(discard, src)
		}
	}
	if self != nil {
		if err := b.Client.Remove(ctx, self.ID); err != nil && !dockerclient.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", rt.Key, err)
		}
	}
	var errs []error
	for _, src := range discard {
		if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
			continue // discarded by an earlier, interrupted delete
		}
		if err := opts.Discard(src); err != nil {
			errs = append(errs, fmt.Errorf("discard %s: %w", src, err))
			continue
		}
		removeEmptyParents(rt.Root, filepath.Dir(src))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete %s: the container is removed, but: %w", rt.Key, err)
	}
	return nil
}

// removeEmptyParents removes dir and its parents below root while they
// are empty (rmdir refuses anything else), so that a runtime folder whose
// mounts went does not linger as an unowned one.
func removeEmptyParents(root, dir string) {
	for local.Inside(root, dir) {
		if unix.Rmdir(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// Lock implements backend.Locker. The Engine has no lock that keeps a
// container from starting, so the lock is a fresh inspection: a container
// running, restarting or started since rt was observed is refused.
func (b *Backend) Lock(ctx context.Context, rt backend.Runtime, opts backend.LockOptions) (backend.Lock, error) {
	return backend.LockByObserving(ctx, b, rt, opts)
}

// Watch implements backend.Watcher from the Engine's event stream: the
// name of each matching container that dies or stops.
func (b *Backend) Watch(ctx context.Context, changed func(id string)) error {
	if len(b.Labels) == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	return b.Client.Events(ctx, b.Labels, []string{"die", "stop"}, func(ev dockerclient.Event) {
		if ev.Name != "" && b.Matches(ev.Labels) {
			changed(ev.Name)
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
)
