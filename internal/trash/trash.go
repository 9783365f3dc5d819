package trash

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/deletion"
	"github.com/reclaimer/reclaimer/internal/mountinfo"
	"github.com/reclaimer/reclaimer/internal/rootcheck"
)

// DirName is the trash folder's name inside its managed root.
const DirName = ".reclaimer-trash"

var (
	// ErrClosed reports use of a closed Trash.
	ErrClosed = errors.New("trash is closed")
	// ErrCrossDevice reports a path that cannot be renamed into the trash
	// without copying; nothing was deleted.
	ErrCrossDevice = errors.New("not on the trash's filesystem")
	// ErrHoldsMount reports a folder with a mount point below it; nothing
	// was moved.
	ErrHoldsMount = errors.New("holds a mount point")
)

// Purged describes one trash entry the purger finished with.
type Purged struct {
	Name   string // the entry's name in the trash folder
	Origin string // the path it was discarded from, when this process discarded it
	Result deletion.Result
	Err    error // a failure to delete it (it stays for the next start)
}

// Options configure a Trash.
type Options struct {
	Deletion deletion.Options
	// OnPurged, when set, is called after each entry is purged, from the
	// purger goroutine.
	OnPurged func(Purged)
	// Resolver opens paths under the root (tests force the fallback).
	Resolver beneath.Resolver
}

// Trash is a trash folder with its background purger.
type Trash struct {
	root   string
	rootFD int
	dirFD  int
	opts   Options

	// fdMu keeps Close from closing the descriptors under a Discard.
	fdMu sync.RWMutex

	mu          sync.Mutex
	cond        *sync.Cond
	interrupted bool // Close stopped a purge midway
	queue       []entry
	busy        bool // the purger is deleting an entry
	closed      bool
	failures    map[string]error // entries that failed this run, by name
	freed       int64

	cancel context.CancelFunc
	done   chan struct{}
}

type entry struct{ name, origin string }

// Open opens (creating if needed) the trash folder of root and starts the
// purger, which first purges whatever an earlier process left there.
func Open(root string, opts Options) (*Trash, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open trash root %q: %w", root, err)
	}
	// Only a proven root holds a trash: never "/" or a system folder, and
	// never a root that is itself a link (configured roots are resolved
	// once at load; one swapped for a link since is refused).
	if err := rootcheck.Check(filepath.Clean(root)); err != nil {
		return nil, fmt.Errorf("open trash root %q: %w", root, err)
	}
	rootFD, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open trash root %q: %w", root, err)
	}
	if err := unix.Mkdirat(rootFD, DirName, 0o700); err != nil && err != unix.EEXIST {
		unix.Close(rootFD)
		return nil, fmt.Errorf("create trash in %q: %w", root, err)
	}
	dirFD, err := opts.Resolver.OpenChild(rootFD, DirName)
	if err != nil {
		unix.Close(rootFD)
		return nil, fmt.Errorf("open trash in %q: %w", root, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Trash{root: root, rootFD: rootFD, dirFD: dirFD, opts: opts,
		failures: map[string]error{}, cancel: cancel, done: make(chan struct{})}
	t.cond = sync.NewCond(&t.mu)
	leftovers, err := t.list()
	if err != nil {
		t.closeFDs()
		cancel()
		return nil, err
	}
	for _, name := range leftovers {
		t.queue = append(t.queue, entry{name: name})
	}
	go t.purge(ctx)
	return t, nil
}

// Root is the managed root this trash serves.
func (t *Trash) Root() string { return t.root }

// Dir is the trash folder's path.
func (t *Trash) Dir() string { return filepath.Join(t.root, DirName) }

// Discard moves path, which must lie inside the root, into the trash with
// one rename and queues it for purging. It returns the entry's name. On any
// error nothing was moved.
func (t *Trash) Discard(path string) (string, error) {
	rel, err := t.rel(path)
	if err != nil {
		return "", err
	}
	t.fdMu.RLock()
	defer t.fdMu.RUnlock()
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return "", fmt.Errorf("discard %q: %w", path, ErrClosed)
	}
	parentFD, name, err := t.opts.Resolver.OpenParent(t.rootFD, rel)
	if err != nil {
		if errors.Is(err, beneath.ErrMountPoint) {
			err = fmt.Errorf("%w: %w", ErrCrossDevice, err)
		}
		return "", fmt.Errorf("discard %q: %w", path, err)
	}
	defer unix.Close(parentFD)
	if parentFD >= 0 && name == DirName && strings.Count(rel, "/") == 0 {
		return "", fmt.Errorf("discard %q: refusing to discard the trash itself", path)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parentFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "", fmt.Errorf("discard %q: %w", path, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return "", fmt.Errorf("discard %q: %w", path, beneath.ErrSymlink)
	}
	if mnt, err := beneath.IsMountPoint(parentFD, name); err != nil {
		return "", fmt.Errorf("discard %q: %w", path, err)
	} else if mnt {
		return "", fmt.Errorf("discard %q: %w: %w", path, ErrCrossDevice, beneath.ErrMountPoint)
	}
	// A mount below the folder would ride along with the rename: its place
	// would vanish and the entry could never be purged. Such a folder is not
	// renamed whole.
	if below, err := mountinfo.Below(filepath.Join(t.root, rel)); err != nil {
		return "", fmt.Errorf("discard %q: %w", path, err)
	} else if len(below) > 0 {
		return "", fmt.Errorf("discard %q: %w: %s", path, ErrHoldsMount, strings.Join(below, ", "))
	}
	entryName := newName()
	restore := keepTimes(parentFD)
	// RENAME_NOREPLACE: never clobber an entry, however unlikely a clash.
	if err := unix.Renameat2(parentFD, name, t.dirFD, entryName, unix.RENAME_NOREPLACE); err != nil {
		if err == unix.EXDEV {
			err = fmt.Errorf("%w: %w", ErrCrossDevice, err)
		}
		return "", fmt.Errorf("discard %q: %w", path, err)
	}
	restore()
	t.mu.Lock()
	t.queue = append(t.queue, entry{name: entryName, origin: path})
	t.mu.Unlock()
	t.cond.Broadcast()
	return entryName, nil
}

// RemoveLink unlinks path, which must be a symbolic link inside the root,
// without following it. A link frees nothing worth a trip through the
// trash, and renaming one would look like following it; this is how a
// link planted where a cache folder should be goes.
func (t *Trash) RemoveLink(path string) error {
	rel, err := t.rel(path)
	if err != nil {
		return err
	}
	t.fdMu.RLock()
	defer t.fdMu.RUnlock()
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return fmt.Errorf("remove link %q: %w", path, ErrClosed)
	}
	parentFD, name, err := t.opts.Resolver.OpenParent(t.rootFD, rel)
	if err != nil {
		return fmt.Errorf("remove link %q: %w", path, err)
	}
	defer unix.Close(parentFD)
	var st unix.Stat_t
	if err := unix.Fstatat(parentFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("remove link %q: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return fmt.Errorf("remove link %q: not a symbolic link", path)
	}
	restore := keepTimes(parentFD)
	defer restore()
	if err := unix.Unlinkat(parentFD, name, 0); err != nil && err != unix.ENOENT {
		return fmt.Errorf("remove link %q: %w", path, err)
	}
	return nil
}

// rel turns path (absolute, or relative to the root) into a path relative
// to the root, refusing anything outside it.
func (t *Trash) rel(path string) (string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(t.root, path)
	}
	rel, err := filepath.Rel(t.root, filepath.Clean(path))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("discard %q: %w", path, beneath.ErrOutside)
	}
	return rel, nil
}

// Drain waits until every entry queued so far was purged (or failed) and
// returns the failures of this process's purges, if any are still there.
func (t *Trash) Drain(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	})
	defer stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for (len(t.queue) > 0 || t.busy) && !t.closed && ctx.Err() == nil {
		t.cond.Wait()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("drain trash: %w", err)
	}
	if len(t.queue) > 0 || t.busy || t.interrupted {
		return fmt.Errorf("drain trash: entries left for the next start: %w", ErrClosed)
	}
	var errs []error
	for name, err := range t.failures {
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("drain trash %q: %w", t.Dir(), errors.Join(errs...))
	}
	return nil
}

// Pending is the number of entries waiting or being purged.
func (t *Trash) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.queue)
	if t.busy {
		n++
	}
	return n
}

// FreedBytes is what the purger freed since Open.
func (t *Trash) FreedBytes() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.freed
}

// Close stops the purger, interrupting the entry in progress; what is left
// stays in the trash for the next Open.
func (t *Trash) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.cond.Broadcast()
	<-t.done
	t.fdMu.Lock()
	t.closeFDs()
	t.fdMu.Unlock()
	return nil
}

func (t *Trash) closeFDs() {
	unix.Close(t.dirFD)
	unix.Close(t.rootFD)
}

func (t *Trash) purge(ctx context.Context) {
	defer close(t.done)
	for {
		t.mu.Lock()
		for len(t.queue) == 0 && !t.closed {
			t.cond.Wait()
		}
		if t.closed {
			t.mu.Unlock()
			return
		}
		e := t.queue[0]
		t.queue = t.queue[1:]
		t.busy = true
		t.mu.Unlock()

		res, err := deletion.DeleteAt(ctx, t.dirFD, e.name, t.opts.Deletion)
		if err == nil {
			err = res.Err()
		}
		if err == nil && res.SkippedCount > 0 {
			err = fmt.Errorf("left %d mount points in place: %s", res.SkippedCount, res.Skipped[0])
		}

		stopped := ctx.Err() != nil
		if stopped && err == nil {
			err = ctx.Err()
		}
		// Report before Drain can return, so that a caller draining and
		// then closing never misses a callback.
		if t.opts.OnPurged != nil {
			t.opts.OnPurged(Purged{Name: e.name, Origin: e.origin, Result: res, Err: err})
		}
		t.mu.Lock()
		t.busy = false
		t.freed += res.FreedBytes
		switch {
		case stopped:
			t.interrupted = true
		case err != nil:
			t.failures[e.name] = err
		default:
			delete(t.failures, e.name)
		}
		t.mu.Unlock()
		t.cond.Broadcast()
	}
}

func (t *Trash) list() ([]string, error) {
	fd, err := unix.Openat(t.dirFD, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("list trash: %w", err)
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 16<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list trash: %w", err)
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	return names, nil
}

// newName makes an entry name that sorts by discard time and never
// repeats: nanoseconds since the epoch and 64 random bits.
func newName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(time.Now().UnixNano(), 10) + "-" + hex.EncodeToString(b[:])
}

// keepTimes records the times of the directory dirfd and returns a function
// that puts them back. Reclaiming a cache or a dependency folder is not the
// user's activity: without this, the rename would move the parent's mtime,
// the runtime would look active, and its retention clock would start over
// every time its caches were dropped.
func keepTimes(dirfd int) func() {
	var st unix.Stat_t
	if unix.Fstat(dirfd, &st) != nil {
		return func() {}
	}
	return func() {
		ts := []unix.Timespec{st.Atim, st.Mtim}
		_ = unix.UtimesNanoAt(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(dirfd), ts, 0)
	}
}
