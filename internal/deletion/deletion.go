package deletion

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/dirwalk"
)

// Options tune a deletion; the zero value is right for most uses.
type Options struct {
	Walk dirwalk.Options
	// MaxProblems bounds how many problems of each kind the Result keeps
	// (the counts stay exact). Default 100.
	MaxProblems int
	// Progress, when set, is told the entries removed and bytes freed so
	// far, every ProgressEvery entries. It is called from the walk's
	// workers, concurrently: it must be quick and safe for that.
	Progress func(removed, freedBytes int64)
}

// ProgressEvery is how many removed entries apart Options.Progress is
// called.
const ProgressEvery = 4096

// Problem is one entry that was left in place, with why.
type Problem struct {
	Path string // relative to the base
	Err  error
}

func (p Problem) String() string { return p.Path + ": " + p.Err.Error() }

// Result says what a deletion did.
type Result struct {
	// FreedBytes are the allocated bytes of the inodes whose every link
	// was removed: a file also linked from outside the tree frees nothing.
	FreedBytes int64
	Removed    int64 // entries removed, directories included
	// Skipped are mount points left alone, by rule.
	Skipped      []Problem
	SkippedCount int
	// Failed are entries that could not be removed.
	Failed      []Problem
	FailedCount int
}

// Err summarises the failures, nil when there were none. Skipped mount
// points are not failures.
func (r Result) Err() error {
	if r.FailedCount == 0 {
		return nil
	}
	errs := make([]error, 0, len(r.Failed)+1)
	for _, p := range r.Failed {
		errs = append(errs, errors.New(p.String()))
	}
	if more := r.FailedCount - len(r.Failed); more > 0 {
		errs = append(errs, fmt.Errorf("and %d more", more))
	}
	return fmt.Errorf("delete: %d entries left: %w", r.FailedCount, errors.Join(errs...))
}

// ErrBase reports a request to delete the base directory itself.
var ErrBase = errors.New("refusing to delete the base directory itself")

// Delete removes rel beneath the directory base. base is trusted (it is
// opened as it is); rel may not leave it.
func Delete(ctx context.Context, base, rel string, opts Options) (Result, error) {
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Result{}, fmt.Errorf("open base %q: %w", base, err)
	}
	defer unix.Close(fd)
	return DeleteAt(ctx, fd, rel, opts)
}

// DeleteAt is Delete with the base given as an open directory descriptor.
func DeleteAt(ctx context.Context, basefd int, rel string, opts Options) (Result, error) {
	parts, err := beneath.Split(rel)
	if err != nil {
		return Result{}, fmt.Errorf("delete %q: %w", rel, err)
	}
	if len(parts) == 0 {
		return Result{}, fmt.Errorf("delete %q: %w", rel, ErrBase)
	}
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 100
	}
	if opts.Walk.Workers == 0 && dirwalk.LatencyBound(basefd) {
		// Each unlink waits on a discard or the network: keep many in
		// flight (measured on a discard-mounted ext4: 16 workers 3.95 s,
		// 4 workers 4.78 s for the node_modules tree).
		opts.Walk.Workers = 16
	}
	d := &deleter{opts: opts, walk: opts.Walk.WithDefaults(), euid: os.Geteuid()}
	err = dirwalk.Walk(ctx, basefd, rel, d.walk, d)
	res := Result{
		FreedBytes:   d.freed.Load(),
		Removed:      d.removed.Load(),
		Skipped:      d.skipped,
		SkippedCount: d.skippedCount,
		Failed:       d.failed,
		FailedCount:  d.failedCount,
	}
	if errors.Is(err, unix.ENOENT) {
		return res, nil // nothing there: already deleted
	}
	if err != nil {
		return res, fmt.Errorf("delete %q: %w", rel, err)
	}
	return res, nil
}

type deleter struct {
	opts Options
	walk dirwalk.Options
	euid int

	freed   atomic.Int64
	removed atomic.Int64

	sawLinks atomic.Bool
	linksMu  sync.Mutex
	links    map[[2]uint64]linkState

	mu           sync.Mutex
	skipped      []Problem
	skippedCount int
	failed       []Problem
	failedCount  int
}

func (d *deleter) progress(removed int64) {
	if d.opts.Progress != nil && removed%ProgressEvery == 0 {
		d.opts.Progress(removed, d.freed.Load())
	}
}

func (d *deleter) skip(path string, err error) {
	d.mu.Lock()
	d.skippedCount++
	if len(d.skipped) < d.opts.MaxProblems {
		d.skipped = append(d.skipped, Problem{Path: path, Err: err})
	}
	d.mu.Unlock()
}

func (d *deleter) fail(path string, err error) {
	d.mu.Lock()
	d.failedCount++
	if len(d.failed) < d.opts.MaxProblems {
		d.failed = append(d.failed, Problem{Path: path, Err: err})
	}
	d.mu.Unlock()
}

// linkState is what the deletion knows of a multiply linked inode: its link
// count when first met, and how many of its links this deletion removed.
type linkState struct{ first, removed uint64 }

// freesInode tells, after one of its links was unlinked, whether the
// deletion has now removed every link of the inode (st was read right
// before that unlink): only then are its blocks freed. A file hard-linked
// from outside the tree (pnpm's store) frees nothing.
func (d *deleter) freesInode(st *unix.Stat_t) bool {
	d.linksMu.Lock()
	defer d.linksMu.Unlock()
	k := [2]uint64{st.Dev, st.Ino}
	e, ok := d.links[k]
	if !ok {
		if st.Nlink <= 1 {
			return true
		}
		if d.links == nil {
			d.links = make(map[[2]uint64]linkState)
		}
		e.first = uint64(st.Nlink)
		d.sawLinks.Store(true)
	}
	e.removed++
	d.links[k] = e
	return e.removed == e.first
}

func (d *deleter) EnterDir(n *dirwalk.Node, fd int, st *unix.Stat_t) {
	// Make a read-only directory writable so its entries can go. Root
	// passes permission checks anyway; anyone else would be stopped by a
	// directory of mode 0500.
	if d.euid != 0 && st.Mode&0o700 != 0o700 {
		_ = unix.Fchmod(fd, (st.Mode&0o7777)|0o700)
	}
}

func (d *deleter) Entry(n *dirwalk.Node, dirfd int, name string, typ uint8) {
	if typ == unix.DT_DIR {
		return // a directory the walker could not enter; already reported
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err != unix.ENOENT {
			d.fail(n.Join(name), fmt.Errorf("stat: %w", err))
			n.Keep()
		}
		return
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		// A file was replaced by a directory after it was listed. Leave it
		// for the rescan of its parent rather than race further.
		return
	}
	err := unix.Unlinkat(dirfd, name, 0)
	if err == unix.EACCES || err == unix.EPERM {
		// A directory without write permission: fix and try once more.
		var dst unix.Stat_t
		if unix.Fstat(dirfd, &dst) == nil && unix.Fchmod(dirfd, (dst.Mode&0o7777)|0o700) == nil {
			err = unix.Unlinkat(dirfd, name, 0)
		}
	}
	switch err {
	case nil:
	case unix.ENOENT:
		return
	case unix.EBUSY:
		d.skip(n.Join(name), beneath.ErrMountPoint)
		n.Keep()
		return
	default:
		d.fail(n.Join(name), fmt.Errorf("unlink: %w", err))
		n.Keep()
		return
	}
	d.progress(d.removed.Add(1))
	// A multiply linked inode is counted when its last link goes, and only
	// if every link was inside the tree. Once one was seen, every file is
	// checked, because by the time its last link is unlinked its link count
	// reads 1.
	if (st.Nlink > 1 || d.sawLinks.Load()) && !d.freesInode(&st) {
		return
	}
	d.freed.Add(st.Blocks * 512)
}

func (d *deleter) OpenFailed(parent *dirwalk.Node, parentFD int, name string, err error) bool {
	switch {
	case errors.Is(err, beneath.ErrMountPoint):
		d.skip(parent.Join(name), beneath.ErrMountPoint)
		return false
	case errors.Is(err, unix.EACCES) && parentFD >= 0:
		// An unreadable directory (mode 0000, say): make it ours to
		// read. chmod through an O_PATH descriptor so that a directory
		// swapped for a link meanwhile is never followed.
		if makeAccessible(parentFD, name) {
			return true
		}
	}
	d.fail(parent.Join(name), err)
	return false
}

func makeAccessible(parentFD int, name string) bool {
	fd, err := unix.Openat(parentFD, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), (st.Mode&0o7777)|0o700) == nil
}

func (d *deleter) LeaveDir(n *dirwalk.Node, parentFD int) bool {
	if n.Kept() {
		return false // something inside stays, so n stays too
	}
	err := unix.Unlinkat(parentFD, n.Name(), unix.AT_REMOVEDIR)
	if err == unix.EACCES || err == unix.EPERM {
		var pst unix.Stat_t
		if unix.Fstat(parentFD, &pst) == nil && unix.Fchmod(parentFD, (pst.Mode&0o7777)|0o700) == nil {
			err = unix.Unlinkat(parentFD, n.Name(), unix.AT_REMOVEDIR)
		}
	}
	switch err {
	case nil:
		d.freed.Add(n.AllocBytes())
		d.progress(d.removed.Add(1))
		return false
	case unix.ENOENT:
		return false
	case unix.ENOTEMPTY, unix.EEXIST:
		if n.Rescans() < d.walk.MaxRescans {
			return true // entries appeared meanwhile: read it again
		}
		d.fail(n.Path(), fmt.Errorf("remove directory: %w (entries kept appearing)", err))
	case unix.EBUSY:
		d.skip(n.Path(), beneath.ErrMountPoint)
	default:
		d.fail(n.Path(), fmt.Errorf("remove directory: %w", err))
	}
	if p := n.Parent(); p != nil {
		p.Keep()
	}
	return false
}
