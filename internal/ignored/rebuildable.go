package ignored

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/dirwalk"
)

// DefaultRebuildable are folder names that are dependencies or build output
// a project rebuilds (a package install, a compile): an ignored folder with
// one of these names is shed even if some file in it looks like a secret
// (node_modules ships test keys named *.pem).
var DefaultRebuildable = []string{
	"node_modules", "bower_components", ".pnpm-store", ".yarn-cache",
	".venv", "venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".nox",
	"target", "build", "dist", "out", ".gradle", ".next", ".nuxt", ".svelte-kit", ".turbo",
	".parcel-cache", ".angular", "coverage", ".dart_tool", ".cxx", "cmake-build-debug", "cmake-build-release",
}

// DefaultKeep are name patterns (path.Match, on one name, case-insensitive)
// of what a user would want back: an ignored folder that is not a known
// dependency or build output is shed only when nothing in it (itself
// included) matches one. A ".git" anywhere inside keeps any folder.
var DefaultKeep = []string{
	".env*", "*.pem", "*credentials*", "*.tfstate*", "id_*", "*.key", "*.p12", "*.pfx", "*.kdbx",
	"*secret*", ".netrc", ".npmrc", ".pypirc", "*.sqlite", "*.db",
}

// keepReason walks dir whole and tells why it must be kept, "" when it is
// rebuildable: it holds a ".git" (file or folder) at any depth (someone's
// clone: its commits), a mount point, or an unreadable folder; or, when
// its name is not in rebuildable, an entry whose name matches keep.
func keepReason(ctx context.Context, dir string, rebuildable, keep []string) (string, error) {
	known := false
	for _, n := range rebuildable {
		if strings.EqualFold(filepath.Base(dir), n) {
			known = true
			break
		}
	}
	if !known {
		if p := matchKeep(filepath.Base(dir), keep); p != "" {
			return fmt.Sprintf("its name matches %q", p), nil
		}
	}
	fd, err := unix.Open(filepath.Dir(dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := &keepScan{cancel: cancel, known: known, keep: keep}
	err = dirwalk.Walk(ctx, fd, filepath.Base(dir), dirwalk.Options{}, v)
	if v.why != "" {
		return v.why, nil
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return "", err
		}
		return fmt.Sprintf("could not be read whole (%v)", err), nil
	}
	return "", nil
}

func matchKeep(name string, keep []string) string {
	lower := strings.ToLower(name)
	for _, p := range keep {
		if ok, _ := filepath.Match(strings.ToLower(p), lower); ok {
			return p
		}
	}
	return ""
}

// keepScan is the walk's visitor: it stops at the first reason to keep.
type keepScan struct {
	cancel context.CancelFunc
	known  bool
	keep   []string

	mu  sync.Mutex
	why string
}

func (k *keepScan) found(format string, args ...any) {
	k.mu.Lock()
	if k.why == "" {
		k.why = fmt.Sprintf(format, args...)
	}
	k.mu.Unlock()
	k.cancel()
}

func (k *keepScan) name(n *dirwalk.Node, name string) {
	switch {
	case strings.EqualFold(name, ".git"):
		k.found("it holds a .git at %s (someone's clone)", n.Join(name))
	case !k.known:
		if p := matchKeep(name, k.keep); p != "" {
			k.found("it holds %s, which matches %q", n.Join(name), p)
		}
	}
}

func (k *keepScan) EnterDir(n *dirwalk.Node, _ int, _ *unix.Stat_t) {
	if n.Parent() != nil {
		k.name(n.Parent(), n.Name())
	}
}

func (k *keepScan) Entry(n *dirwalk.Node, _ int, name string, _ uint8) { k.name(n, name) }

func (k *keepScan) OpenFailed(parent *dirwalk.Node, _ int, name string, err error) bool {
	if errors.Is(err, unix.ENOENT) {
		return false
	}
	if errors.Is(err, beneath.ErrMountPoint) {
		k.found("it holds a mount point at %s", parent.Join(name))
	} else {
		k.found("%s could not be read (%v)", parent.Join(name), err)
	}
	return false
}

func (k *keepScan) LeaveDir(*dirwalk.Node, int) bool { return false }
