package local

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/ignored"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

// Inside tells whether path is strictly inside root (both clean, absolute).
func Inside(root, path string) bool {
	if root == "" || !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return false
	}
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../")
}

// realDir tells whether path is a directory reached from root without a
// symbolic link or a mount point on the way: a home or workspace that is a
// link (to a checkout elsewhere, say) is never looked into.
func realDir(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return false
	}
	rootFD, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(rootFD)
	fd, err := beneath.Resolver{}.OpenDir(rootFD, rel)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// Size measures path beneath root (allocated bytes); 0 when it cannot.
func Size(ctx context.Context, root, path string) int64 {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return 0
	}
	res, _ := treesize.Measure(ctx, root, rel, treesize.Options{})
	return res.AllocBytes
}

var coreName = regexp.MustCompile(`^core(\.[0-9]+)?$`)

// isCoreDump tells whether path is a regular file holding an ELF core
// dump: a source file that happens to be named "core" is never one.
func isCoreDump(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Type == elf.ET_CORE
}

// Caches selects a runtime's cache folders (cacheDirs relative to its
// home) and the core dumps at the top of its folders. A cache that is a
// symbolic link is selected as the link itself (unlinked, never followed).
func Caches(ctx context.Context, rt backend.Runtime, cacheDirs []string) []backend.File {
	var files []backend.File
	if rt.Home != "" && Inside(rt.Root, rt.Home) && realDir(rt.Root, rt.Home) {
		for _, d := range cacheDirs {
			p := filepath.Join(rt.Home, d)
			if !Inside(rt.Home, p) {
				continue
			}
			fi, err := os.Lstat(p)
			if err != nil {
				continue
			}
			if fi.Mode()&os.ModeSymlink != 0 {
				files = append(files, backend.File{Path: p, Bytes: 0})
				continue
			}
			if fi.IsDir() {
				files = append(files, backend.File{Path: p, Bytes: Size(ctx, rt.Root, p)})
			}
		}
	}
	seen := map[string]bool{}
	for _, dir := range append([]string{rt.Path, rt.Home}, rt.Workspaces...) {
		if dir == "" || seen[dir] || !(dir == rt.Path || Inside(rt.Root, dir) && realDir(rt.Root, dir)) {
			continue // a home or workspace reached through a link is not looked into
		}
		seen[dir] = true
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !coreName.MatchString(e.Name()) || !e.Type().IsRegular() {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if isCoreDump(p) {
				files = append(files, backend.File{Path: p, Bytes: Size(ctx, rt.Root, p)})
			}
		}
	}
	return files
}

// Dependencies selects the git-ignored folders of the runtime's workspaces
// (its own folder when it names none). A workspace outside the managed
// root (a caller-supplied checkout) is never looked at.
// rebuildable and keep are the rule's lists (nil: the built-in ones).
func Dependencies(ctx context.Context, git gitcmd.Runner, rt backend.Runtime, rebuildable, keep []string) ([]backend.File, error) {
	shed, _, err := dependencies(ctx, git, rt, rebuildable, keep)
	return shed, err
}

// dependencies is Dependencies with the ignored folders the rebuildable
// rule keeps (ignored.Options.Kept), each with why.
func dependencies(ctx context.Context, git gitcmd.Runner, rt backend.Runtime, rebuildable, keep []string) (shed, kept []backend.File, err error) {
	workspaces := rt.Workspaces
	if len(workspaces) == 0 && rt.Path != "" {
		workspaces = []string{rt.Path}
	}
	var files []backend.File
	var errs []error
	for _, ws := range workspaces {
		if ws != rt.Path && (!Inside(rt.Root, ws) || !realDir(rt.Root, ws)) {
			continue // outside, or reached through a link: not ours to shed
		}
		dirs, err := ignored.Select(ctx, git, ws, ignored.Options{Root: rt.Root, Rebuildable: rebuildable, Keep: keep, Kept: func(dir, why string) {
			kept = append(kept, backend.File{Path: dir, Kept: why})
		}})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, d := range dirs {
			if Inside(rt.Root, d.Path) && !slices.ContainsFunc(files, func(f backend.File) bool { return f.Path == d.Path }) {
				files = append(files, backend.File{Path: d.Path, Bytes: Size(ctx, rt.Root, d.Path)})
			}
		}
	}
	return files, kept, errors.Join(errs...)
}

// Reclaim implements backend.FileReclaimer for local runtimes: without
// Paths it selects; with Paths it re-selects and discards only the planned
// paths that still qualify, returning those.
func Reclaim(ctx context.Context, git gitcmd.Runner, rt backend.Runtime, opts backend.FileOptions) ([]backend.File, error) {
	var current []backend.File
	var err error
	switch opts.Step {
	case backend.StepCaches:
		current = Caches(ctx, rt, opts.CacheDirs)
	case backend.StepDependencies:
		var kept []backend.File
		current, kept, err = dependencies(ctx, git, rt, opts.Rebuildable, opts.Keep)
		if len(opts.Paths) == 0 {
			// Selecting for a plan: the kept folders are listed too, with
			// why, so the plan says what it leaves and why.
			current = append(current, kept...)
		}
	default:
		return nil, fmt.Errorf("reclaim files: step %q: %w", opts.Step, errors.ErrUnsupported)
	}
	if len(opts.Paths) == 0 {
		return current, err
	}
	if opts.Discard == nil {
		return nil, errors.New("reclaim files: no discard function")
	}
	var done []backend.File
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range opts.Paths {
		i := slices.IndexFunc(current, func(f backend.File) bool { return f.Path == p && f.Kept == "" })
		if i < 0 || !Inside(rt.Root, p) {
			continue // no longer qualifies: kept
		}
		if err := opts.Discard(p); err != nil {
			errs = append(errs, fmt.Errorf("discard %s: %w", p, err))
			continue
		}
		done = append(done, current[i])
	}
	return done, errors.Join(errs...)
}

// RealDir tells whether path is a directory inside root reached without a
// symbolic link or a mount point on the way.
func RealDir(root, path string) bool { return Inside(root, path) && realDir(root, path) }

// Folder checks that a configured folder exists and is one, and says what
// is wrong in plain words when not: "repository /x does not exist",
// "root /srv/runs is not a folder". A listing starts with it so that its
// source's problem names the cause, not the system call that met it.
func Folder(what, path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s %s does not exist", what, path)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%s %s cannot be read: permission denied", what, path)
	case err != nil:
		return fmt.Errorf("%s %s: %w", what, path, err)
	case !fi.IsDir():
		return fmt.Errorf("%s %s is not a folder", what, path)
	}
	return nil
}

// LeftOut is what an archive of a local runtime never keeps: its home's
// cache folders and the core dumps (Caches), and the home itself with
// opts.ExcludeHome. leave are the paths to leave out of the tars.
func LeftOut(ctx context.Context, rt backend.Runtime, opts backend.ExportOptions) (leave []string) {
	for _, c := range Caches(ctx, rt, opts.CacheDirs) {
		leave = append(leave, c.Path)
	}
	if opts.ExcludeHome && rt.Home != "" && Inside(rt.Root, rt.Home) {
		leave = append(leave, rt.Home)
	}
	return leave
}

// NotKept says, without reading anything, what LeftOut leaves out of an
// archive of rt (backend.Discloser).
func NotKept(rt backend.Runtime, opts backend.ExportOptions) []string {
	var out []string
	switch {
	case opts.ExcludeHome && rt.Home != "":
		out = append(out, "the home "+rt.Home+" ([archive] include_home = false)")
	case rt.Home != "" && len(opts.CacheDirs) > 0:
		out = append(out, "the home's caches ("+strings.Join(opts.CacheDirs, ", ")+") and core dumps: rebuildable, never archived")
	default:
		out = append(out, "core dumps: never archived")
	}
	return out
}
