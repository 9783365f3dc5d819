package rundir

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/local"
	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"golang.org/x/sys/unix"
)

// Name is the backend's name in runtime keys.
const Name = "dir"

// Backend lists the run folders of one root.
type Backend struct {
	Root       string   // absolute, clean
	Home       string   // subpath of each run folder, optional
	Workspaces []string // subpaths, optional
	Git        gitcmd.Runner
	// CacheDirs are the home's cache folders (the source's cache_dirs):
	// what a probe looks for.
	CacheDirs []string
	// ProbeDir, when set, is where what full listings learned is kept
	// across passes and processes (probe.go): the state folder's "cache".
	ProbeDir string

	// bare holds the run folders the last full listing found with nothing
	// the caches step could select (probe.go). Selecting caches for them
	// is then free instead of a dozen system calls each, which was most of
	// a pass over 100,000 run folders. A plan is a preview, so a folder
	// that gains a cache after the listing is found by the next pass;
	// apply re-selects planned paths without it.
	mu   sync.Mutex
	bare map[string]struct{}
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// List implements backend.Lister.
func (b *Backend) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	var names []string
	if len(opts.IDs) > 0 {
		for _, id := range opts.IDs {
			if validID(id) {
				names = append(names, id)
			}
		}
	} else {
		if err := local.Folder("folder", b.Root); err != nil {
			return nil, err
		}
		var err error
		if names, err = childDirs(b.Root); err != nil {
			return nil, fmt.Errorf("list %s: %w", b.Root, err)
		}
	}
	rootFD, err := unix.Open(b.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", b.Root, err)
	}
	defer unix.Close(rootFD)
	// A child on another mount (a bind mount included) is never a runtime
	// to remove: compare mount ids with the root's, measured once.
	rootMnt, err := beneath.MountID(rootFD)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", b.Root, err)
	}
	var rootSt unix.Stat_t
	if err := unix.Fstat(rootFD, &rootSt); err != nil {
		return nil, fmt.Errorf("list %s: %w", b.Root, err)
	}
	rootDev := uint64(rootSt.Dev)
	// Run folders are independent: observe them in parallel, in order.
	found := make([]backend.Runtime, len(names))
	ok := make([]bool, len(names))
	// A listing by IDs re-observes runtimes about to be acted on: it never
	// vouches for their emptiness, it only forgets what was known.
	probe := len(opts.IDs) == 0
	var probes *probeRun
	if probe {
		probes = b.startProbes(len(names))
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(len(names), 2*runtime.GOMAXPROCS(0)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 8<<10) // for the probe's getdents
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) || ctx.Err() != nil {
					return
				}
				var st stamp
				found[i], st, ok[i] = b.observe(ctx, rootFD, rootMnt, rootDev, names[i], opts.Light)
				if probe && ok[i] && found[i].Pinned == "" {
					probes.probe(rootFD, i, names[i], st, buf)
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if probe {
		probes.finish(names)
	} else {
		b.mu.Lock()
		for _, id := range opts.IDs {
			delete(b.bare, id)
		}
		b.mu.Unlock()
	}
	// Compact in place: at 100,000 run folders a second array is 25 MB of
	// fresh pages.
	rts := found[:0]
	for i := range found {
		if ok[i] {
			rts = append(rts, found[i])
		}
	}
	return rts, nil
}

func validID(name string) bool {
	return name != "" && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "/\x00")
}

func (b *Backend) observe(ctx context.Context, rootFD int, rootMnt, rootDev uint64, name string, light bool) (backend.Runtime, stamp, bool) {
	// One statx tells the type, the mount, the time of creation and the
	// stamp the probe cache compares.
	var stx unix.Statx_t
	err := unix.Statx(rootFD, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE|unix.STATX_CTIME|unix.STATX_INO|unix.STATX_MNT_ID, &stx)
	if err != nil || uint32(stx.Mode)&unix.S_IFMT != unix.S_IFDIR {
		return backend.Runtime{}, stamp{}, false // gone, a file or a symbolic link
	}
	st := stamp{ctimeSec: stx.Ctime.Sec, ctimeNsec: stx.Ctime.Nsec, ino: stx.Ino}
	if stx.Mask&unix.STATX_CTIME == 0 || stx.Mask&unix.STATX_INO == 0 {
		st = stamp{} // never matches a remembered folder: probe it
	}
	path := filepath.Join(b.Root, name)
	rt := backend.Runtime{
		Key:   backend.Key{Backend: Name, ID: name},
		State: backend.StateStopped,
		Path:  path,
		Root:  b.Root,
		// A run folder is the only copy of whatever it holds.
		Unsaved: "the run folder's files",
	}
	if (stx.Mask&unix.STATX_MNT_ID != 0 && stx.Mnt_id != rootMnt) ||
		(stx.Mask&unix.STATX_MNT_ID == 0 && unix.Mkdev(stx.Dev_major, stx.Dev_minor) != rootDev) {
		rt.Pinned = "is a mount point"
	}
	if b.Home != "" {
		rt.Home = filepath.Join(path, b.Home)
	}
	for _, w := range b.Workspaces {
		rt.Workspaces = append(rt.Workspaces, filepath.Join(path, w))
	}
	rt.CreatedAt = time.Unix(stx.Ctime.Sec, int64(stx.Ctime.Nsec))
	if light {
		return rt, st, true
	}
	act := local.Activity(ctx, b.Git, rt)
	rt.LastActivity = act.Newest
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", path, act.Newest.UnixNano(), act.Files))
	rt.Fingerprint = hex.EncodeToString(sum[:12])
	return rt, st, true
}

// ReclaimFiles implements backend.FileReclaimer.
func (b *Backend) ReclaimFiles(ctx context.Context, rt backend.Runtime, opts backend.FileOptions) ([]backend.File, error) {
	if opts.Step == backend.StepCaches && len(opts.Paths) == 0 && rt.Path == filepath.Join(b.Root, rt.ID) &&
		slices.Equal(opts.CacheDirs, b.CacheDirs) {
		b.mu.Lock()
		_, bare := b.bare[rt.ID]
		b.mu.Unlock()
		if bare {
			return nil, nil
		}
	}
	return local.Reclaim(ctx, b.Git, rt, opts)
}

// Delete implements backend.Deleter: the run folder goes into the trash.
func (b *Backend) Delete(ctx context.Context, rt backend.Runtime, opts backend.DeleteOptions) error {
	if !local.Inside(b.Root, rt.Path) || filepath.Dir(rt.Path) != b.Root {
		return fmt.Errorf("delete %s: %q is not a run folder of %s: %w", rt.Key, rt.Path, b.Root, backend.ErrProtected)
	}
	if err := opts.Discard(rt.Path); err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	return nil
}

// Export implements backend.Exporter: a tar.zst of the run folder, its
// home included (left out with opts.ExcludeHome), with its git-ignored
// dependency folders left out (kept with opts.IncludeDependencies) and the
// home's caches and core dumps never stored, in opts.Sink and read back
// (archive.ExportFolders).
func (b *Backend) Export(ctx context.Context, rt backend.Runtime, opts backend.ExportOptions) (backend.Export, error) {
	deps, err := local.Dependencies(ctx, b.Git, rt, opts.Rebuildable, opts.Keep)
	if err != nil {
		return backend.Export{}, fmt.Errorf("export %s: select dependencies to leave out: %w", rt.Key, err)
	}
	var depPaths []string
	for _, d := range deps {
		depPaths = append(depPaths, d.Path)
	}
	m, err := archive.ExportFolders(ctx, archive.Request{Sink: opts.Sink, Base: opts.Name, Runtime: rt.ID, Backend: Name,
		Conversations: opts.Conversations, CreatedAt: opts.CreatedAt, Staging: opts.Dir,
		IncludeDependencies: opts.IncludeDependencies, NotKept: b.NotKept(rt, opts)},
		[]archive.Folder{{Name: "run", Path: rt.Path, Dependencies: depPaths, Leave: local.LeftOut(ctx, rt, b.exportOpts(opts))}})
	if err != nil {
		return backend.Export{}, err
	}
	return m.BackendExport(), nil
}

// exportOpts fills in the source's cache folders when the engine gave none.
func (b *Backend) exportOpts(opts backend.ExportOptions) backend.ExportOptions {
	if opts.CacheDirs == nil {
		opts.CacheDirs = b.CacheDirs
	}
	return opts
}

// NotKept implements backend.Discloser: the home's caches and core dumps
// (never archived), the home with include_home = false, and the
// dependency folders unless kept.
func (b *Backend) NotKept(rt backend.Runtime, opts backend.ExportOptions) []string {
	return local.NotKept(rt, b.exportOpts(opts))
}

// Restore implements backend.Restorer: the run folder is extracted from
// the sink where it was, or into opts.To (backend.RestoreTarget).
func (b *Backend) Restore(ctx context.Context, k backend.Key, opts backend.RestoreOptions) (string, error) {
	m, err := archive.ParseManifest(opts.Manifest)
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	dest := backend.RestoreTarget(opts.To, filepath.Join(b.Root, k.ID))
	if _, err := os.Lstat(dest); err == nil {
		return "", fmt.Errorf("restore %s: %s already exists: %w", k, dest, backend.ErrConflict)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	if err := archive.RestoreFolders(ctx, opts.Sink, m, map[string]string{"run": dest}); err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	return dest, nil
}

var (
	_ backend.Lister        = (*Backend)(nil)
	_ backend.FileReclaimer = (*Backend)(nil)
	_ backend.Exporter      = (*Backend)(nil)
	_ backend.Deleter       = (*Backend)(nil)
	_ backend.Restorer      = (*Backend)(nil)
	_ backend.Discloser     = (*Backend)(nil)
)

// childDirs lists the names of the folders in dir that can be runtimes, in
// directory order (the engine sorts): raw getdents, because os.ReadDir
// allocates and sorts an entry for each of what can be 100,000 folders.
func childDirs(dir string) ([]string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var names []string
	err = readNames(fd, make([]byte, 64<<10), func(name []byte, typ byte) {
		// DT_UNKNOWN: observe's statx tells what it is.
		if (typ == unix.DT_DIR || typ == unix.DT_UNKNOWN) && validID(string(name)) {
			names = append(names, string(name))
		}
	})
	return names, err
}

// readNames calls fn with the name and type of each entry of the open
// folder fd but "." and "..", reading until getdents returns 0: a short
// read does not mean the end (ext4 returns them mid-directory). name is
// only valid during the call.
func readNames(fd int, buf []byte, fn func(name []byte, typ byte)) error {
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		for b := buf[:n]; len(b) > 0; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if string(name) != "." && string(name) != ".." {
				fn(name, typ)
			}
		}
	}
}

// ManagedRoots implements backend.Rooted.
func (b *Backend) ManagedRoots() []string { return []string{b.Root} }

var _ backend.Rooted = (*Backend)(nil)
