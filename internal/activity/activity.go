package activity

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
)

// Options tune a walk. The zero value walks everything.
type Options struct {
	// Skip leaves out the entry at relPath (slash-separated, relative to
	// the root, e.g. "web/node_modules"); isDir is true for a real
	// directory (not a link to one). A skipped directory is not entered
	// and its own mtime does not count. It is called concurrently.
	Skip func(relPath string, isDir bool) bool
	// Workers bounds the goroutines issuing system calls. Default
	// 2 × GOMAXPROCS, between 4 and 16.
	Workers int
	// Cache, when set, remembers git directory lookups and where activity
	// was last found, across calls.
	Cache *Cache
}

// Problem is an entry that could not be read.
type Problem struct {
	Path string `json:"path"`
	Err  error  `json:"-"`
}

func (p Problem) Error() string { return p.Path + ": " + p.Err.Error() }

// Result is what a walk found.
type Result struct {
	// Newest is the newest mtime seen; zero when nothing was seen. After
	// an early stop (Partial) it is a time after the bound, not
	// necessarily the newest.
	Newest time.Time `json:"newest"`
	// NewestPath is the absolute path of the entry that had it.
	NewestPath string `json:"newest_path"`
	// Files counts the entries whose time was read (stat calls):
	// directories, links and git admin files included.
	Files int `json:"files"`
	// Dirs counts the directories read.
	Dirs int `json:"dirs"`
	// Partial is set when NewestAfter stopped at an entry newer than its
	// bound.
	Partial bool `json:"partial"`
	// Skipped lists mount points below the root that were not entered
	// (absolute paths).
	Skipped []string `json:"skipped,omitempty"`
	// Failed lists entries that could not be read: something newer may
	// hide in them.
	Failed []Problem `json:"failed,omitempty"`
}

// Err summarises Failed, nil when everything was read.
func (r Result) Err() error {
	if len(r.Failed) == 0 {
		return nil
	}
	errs := make([]error, len(r.Failed))
	for i, p := range r.Failed {
		errs[i] = p
	}
	return fmt.Errorf("read activity: %d entries unread: %w", len(r.Failed), errors.Join(errs...))
}

// Newest returns the newest mtime among root's own files (see the package
// documentation for what counts).
func Newest(ctx context.Context, root string, opts Options) (Result, error) {
	return run(ctx, root, opts, nil)
}

// NewestAfter is Newest that stops at the first entry modified after
// after. If Result.Newest is after it, something changed (Result.Partial);
// otherwise nothing did and the result is Newest's.
func NewestAfter(ctx context.Context, root string, after time.Time, opts Options) (Result, error) {
	return run(ctx, root, opts, &after)
}

// stamp is a time as statx gives it; comparisons need no allocation.
type stamp struct {
	sec  int64
	nsec uint32
}

func (a stamp) after(b stamp) bool {
	return a.sec > b.sec || (a.sec == b.sec && a.nsec > b.nsec)
}

func stampOf(t unix.StatxTimestamp) stamp { return stamp{t.Sec, t.Nsec} }

func (a stamp) time() time.Time { return time.Unix(a.sec, int64(a.nsec)) }

// statxFlags never follow a link nor trigger an automount.
const (
	statxFlags = unix.AT_SYMLINK_NOFOLLOW | unix.AT_NO_AUTOMOUNT
	statxMask  = unix.STATX_TYPE | unix.STATX_MTIME | unix.STATX_MNT_ID
)

// statxAt stats the NUL-terminated name in dirfd without allocating.
func statxAt(dirfd int, name *byte, flags int, stx *unix.Statx_t) error {
	for {
		_, _, e := unix.Syscall6(unix.SYS_STATX, uintptr(dirfd), uintptr(unsafe.Pointer(name)),
			uintptr(flags), statxMask, uintptr(unsafe.Pointer(stx)), 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

var (
	emptyName = []byte{0}
	nameGit   = []byte(".git\x00")
)

// walk is one call's shared state.
type walk struct {
	ctx     context.Context
	root    string
	rootFD  int
	mnt     uint64 // mount id of the root (device number where statx lacks it)
	useMnt  bool
	opts    Options
	bound   stamp
	bounded bool
	res     beneath.Resolver

	stop    atomic.Bool
	partial atomic.Bool

	mu     sync.Mutex
	cond   *sync.Cond
	stack  []task
	active int
	// Workers start one at a time as work appears: most runtimes are a
	// handful of folders, and 2 × GOMAXPROCS goroutines with their
	// buffers per call would cost more than the walk.
	started int
	idle    int
	wg      sync.WaitGroup
	tallies []tally
}

// task is a directory to read (h nil) or a chunk of an open directory's
// entries (raw getdents records) to stat.
type task struct {
	rel  string
	h    *dirHandle
	data []byte
}

// dirHandle is an open directory shared by the chunks of its entries.
type dirHandle struct {
	fd   int
	rel  string
	refs atomic.Int32
}

func (h *dirHandle) release() {
	if h.refs.Add(-1) == 0 {
		unix.Close(h.fd)
	}
}

// tally is one goroutine's findings.
type tally struct {
	files, dirs int
	best        stamp
	bestPath    string // relative to the root, or absolute for git files
	bestAbs     bool
	seen        bool
	skipped     []string
	failed      []Problem
}

func (t *tally) note(ts stamp, path func() string, abs bool) {
	if !t.seen || ts.after(t.best) {
		t.seen, t.best, t.bestPath, t.bestAbs = true, ts, path(), abs
	}
}

func (t *tally) merge(o *tally) {
	t.files += o.files
	t.dirs += o.dirs
	if o.seen && (!t.seen || o.best.after(t.best)) {
		t.seen, t.best, t.bestPath, t.bestAbs = true, o.best, o.bestPath, o.bestAbs
	}
	t.skipped = append(t.skipped, o.skipped...)
	t.failed = append(t.failed, o.failed...)
}

func run(ctx context.Context, root string, opts Options, after *time.Time) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("read activity of %s: %w", root, err)
	}
	if !filepath.IsAbs(root) {
		abs, err := filepath.Abs(root)
		if err != nil {
			return Result{}, fmt.Errorf("read activity of %s: %w", root, err)
		}
		root = abs
	}
	root = filepath.Clean(root)
	if opts.Workers <= 0 {
		opts.Workers = min(16, max(4, 2*runtime.GOMAXPROCS(0)))
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		var st unix.Stat_t
		if (err == unix.ELOOP || err == unix.ENOTDIR) && unix.Lstat(root, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = beneath.ErrSymlink
		}
		return Result{}, fmt.Errorf("read activity of %s: %w", root, err)
	}
	defer unix.Close(fd)

	w := &walk{ctx: ctx, root: root, rootFD: fd, opts: opts}
	w.cond = sync.NewCond(&w.mu)
	if after != nil {
		w.bounded = true
		w.bound = stamp{after.Unix(), uint32(after.Nanosecond())}
	}
	var stx unix.Statx_t
	if err := statxAt(fd, &emptyName[0], unix.AT_EMPTY_PATH, &stx); err != nil {
		return Result{}, fmt.Errorf("read activity of %s: %w", root, err)
	}
	w.useMnt = stx.Mask&unix.STATX_MNT_ID != 0
	w.mnt = w.mountOf(&stx)

	var total tally
	total.files++
	w.found(&total, stampOf(stx.Mtime), func() string { return "" }, false)

	// Cheap and likely places first: the git admin files, then where the
	// newest entry was found last time.
	st := opts.Cache.state(root)
	w.gitAdmin(&total, st)
	var hint string
	if st != nil && w.bounded {
		hint = st.hint()
	}
	if hint != "" && !w.stop.Load() && !w.skippedPath(hint) {
		w.hintDir(&total, hint)
	}

	if !w.stop.Load() {
		stopWatch := context.AfterFunc(ctx, func() { w.stop.Store(true); w.wake() })
		w.tallies = make([]tally, opts.Workers)
		w.push(task{rel: ""})
		w.wg.Wait()
		stopWatch()
		tallies := w.tallies
		for _, t := range w.stack { // left when stopped early
			if t.h != nil {
				t.h.release()
			}
		}
		w.stack = nil
		for i := range tallies {
			total.merge(&tallies[i])
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("read activity of %s: %w", root, err)
	}

	res := Result{Files: total.files, Dirs: total.dirs, Partial: w.partial.Load(), Skipped: total.skipped, Failed: total.failed}
	if total.seen {
		res.Newest = total.best.time()
		res.NewestPath = total.bestPath
		if !total.bestAbs {
			res.NewestPath = w.abs(total.bestPath)
		}
		if st != nil && !total.bestAbs {
			st.setHint(filepath.Dir(total.bestPath))
		}
	}
	return res, nil
}

func (w *walk) abs(rel string) string {
	if rel == "" {
		return w.root
	}
	return w.root + "/" + rel
}

func (w *walk) mountOf(stx *unix.Statx_t) uint64 {
	if w.useMnt {
		return stx.Mnt_id
	}
	return unix.Mkdev(stx.Dev_major, stx.Dev_minor)
}

// found records ts and, with a bound, stops everything once it is passed.
func (w *walk) found(t *tally, ts stamp, path func() string, abs bool) {
	t.note(ts, path, abs)
	if w.bounded && ts.after(w.bound) {
		w.partial.Store(true)
		w.stop.Store(true)
		w.wake()
	}
}

// skippedPath tells whether rel or a folder above it is skipped.
func (w *walk) skippedPath(rel string) bool {
	if w.opts.Skip == nil {
		return false
	}
	for i := 0; i <= len(rel); i++ {
		if i == len(rel) || rel[i] == '/' {
			if w.opts.Skip(rel[:i], true) {
				return true
			}
		}
	}
	return false
}

func (w *walk) push(t task) {
	w.mu.Lock()
	w.stack = append(w.stack, t)
	if w.idle == 0 && w.started < len(w.tallies) {
		w.spawnLocked()
	}
	w.mu.Unlock()
	w.cond.Signal()
}

// spawnLocked starts one more worker; w.mu is held.
func (w *walk) spawnLocked() {
	t := &w.tallies[w.started]
	w.started++
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.work(t)
	}()
}

func (w *walk) wake() {
	w.mu.Lock()
	w.cond.Broadcast()
	w.mu.Unlock()
}

// pop hands out the next task; false once the walk is over or stopped.
func (w *walk) pop() (task, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.stack) == 0 && w.active > 0 && !w.stop.Load() {
		w.idle++
		w.cond.Wait()
		w.idle--
	}
	if len(w.stack) == 0 || w.stop.Load() {
		w.cond.Broadcast()
		return task{}, false
	}
	t := w.stack[len(w.stack)-1]
	w.stack[len(w.stack)-1] = task{}
	w.stack = w.stack[:len(w.stack)-1]
	w.active++
	return t, true
}

func (w *walk) finish() {
	w.mu.Lock()
	w.active--
	if w.active == 0 && len(w.stack) == 0 {
		w.cond.Broadcast()
	}
	w.mu.Unlock()
}

// worker holds one goroutine's buffers.
type worker struct {
	w     *walk
	t     *tally
	buf   []byte
	spare []byte
	stx   unix.Statx_t
}

func (w *walk) work(t *tally) {
	b1, b2 := getBuf(), getBuf()
	defer func() { putBuf(b1); putBuf(b2) }()
	k := &worker{w: w, t: t, buf: *b1, spare: *b2}
	defer func() { *b1, *b2 = k.buf, k.spare }() // they may have swapped
	for {
		tk, ok := w.pop()
		if !ok {
			return
		}
		if tk.h == nil {
			k.readDir(tk.rel)
		} else {
			k.entries(tk.h, tk.data)
			tk.h.release()
		}
		w.finish()
	}
}

// readDir opens the directory rel and stats its entries. While more
// records follow, each full buffer is handed to other workers as a chunk;
// the last one is handled here.
func (k *worker) readDir(rel string) {
	w := k.w
	fd, err := w.res.OpenDir(w.rootFD, rel)
	if err != nil {
		k.openFailed(rel, err)
		return
	}
	k.t.dirs++
	h := &dirHandle{fd: fd, rel: rel}
	h.refs.Store(1)
	defer h.release()

	n, err := getdents(fd, k.buf)
	for err == nil && n > 0 && !w.stop.Load() {
		m, err2 := getdents(fd, k.spare)
		if err2 != nil || m <= 0 {
			k.entries(h, k.buf[:n])
			err = err2
			break
		}
		h.refs.Add(1)
		w.push(task{h: h, data: append([]byte(nil), k.buf[:n]...)})
		k.buf, k.spare = k.spare, k.buf
		n = m
	}
	if err != nil {
		k.t.failed = append(k.t.failed, Problem{w.abs(rel), fmt.Errorf("read directory: %w", err)})
	}
}

func (k *worker) openFailed(rel string, err error) {
	w := k.w
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, beneath.ErrSymlink), errors.Is(err, unix.ENOTDIR):
		// Gone, or replaced by a link or a file since it was listed: the
		// change shows in the parent's mtime.
	case errors.Is(err, beneath.ErrMountPoint):
		k.t.skipped = append(k.t.skipped, w.abs(rel))
	default:
		k.t.failed = append(k.t.failed, Problem{w.abs(rel), err})
	}
}

// entries stats the getdents records in data, read from h.
func (k *worker) entries(h *dirHandle, data []byte) {
	w := k.w
	skip := w.opts.Skip
	for off := 0; off < len(data) && !w.stop.Load(); {
		reclen := int(*(*uint16)(unsafe.Pointer(&data[off+16])))
		typ := data[off+18]
		name := data[off+19 : off+reclen]
		off += reclen
		if name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)) {
			continue
		}
		var rel string
		relOf := func() string {
			if rel == "" {
				rel = joinName(h.rel, name)
			}
			return rel
		}
		if skip != nil && typ != unix.DT_UNKNOWN && skip(relOf(), typ == unix.DT_DIR) {
			continue
		}
		if err := statxAt(h.fd, &name[0], statxFlags, &k.stx); err != nil {
			if err != unix.ENOENT {
				k.t.failed = append(k.t.failed, Problem{w.abs(relOf()), err})
			}
			continue
		}
		isDir := k.stx.Mode&unix.S_IFMT == unix.S_IFDIR
		if skip != nil && typ == unix.DT_UNKNOWN && skip(relOf(), isDir) {
			continue
		}
		if w.mountOf(&k.stx) != w.mnt {
			// A mount point (a directory, or a file bind-mounted on a
			// file): what is there is not the runtime's own.
			k.t.skipped = append(k.t.skipped, w.abs(relOf()))
			continue
		}
		k.t.files++
		w.found(k.t, stampOf(k.stx.Mtime), relOf, false)
		if isDir {
			w.push(task{rel: relOf()})
		}
	}
}

// hintDir stats the entries of one directory (not below it) before the
// walk: where the newest entry was found last time.
func (w *walk) hintDir(t *tally, rel string) {
	fd, err := w.res.OpenDir(w.rootFD, rel)
	if err != nil {
		return // the walk will meet and report it
	}
	h := &dirHandle{fd: fd, rel: rel}
	h.refs.Store(1)
	defer h.release()
	var hint tally
	b := getBuf()
	defer putBuf(b)
	k := &worker{w: w, t: &hint, buf: *b}
	for !w.stop.Load() {
		n, err := getdents(fd, k.buf)
		if err != nil || n <= 0 {
			break
		}
		k.entries(h, k.buf[:n])
	}
	// Keep what it found (and counted); drop the directories it queued,
	// the mounts and the problems: the walk meets them again.
	w.mu.Lock()
	w.stack = w.stack[:0]
	w.mu.Unlock()
	t.files += hint.files
	if hint.seen {
		t.note(hint.best, func() string { return hint.bestPath }, false)
	}
}

func getdents(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

// joinName joins dir and the NUL-terminated name with one allocation.
func joinName(dir string, name []byte) string {
	n := 0
	for n < len(name) && name[n] != 0 {
		n++
	}
	if dir == "" {
		return string(name[:n])
	}
	var b strings.Builder
	b.Grow(len(dir) + 1 + n)
	b.WriteString(dir)
	b.WriteByte('/')
	b.Write(name[:n])
	return b.String()
}

// cut returns the name before its NUL terminator.
func cut(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// gitAdmin stats the worktree's git admin files.
func (w *walk) gitAdmin(t *tally, st *rootState) {
	dir, inside := w.gitDir(st)
	if dir == "" {
		return
	}
	var fd int
	var err error
	if inside {
		fd, err = w.res.OpenDir(w.rootFD, ".git")
	} else {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return // not a git directory after all; nothing to add
	}
	defer unix.Close(fd)
	var stx unix.Statx_t
	for _, name := range gitAdminFiles {
		if err := statxAt(fd, &name[0], statxFlags, &stx); err != nil {
			continue
		}
		t.files++
		w.found(t, stampOf(stx.Mtime), func() string { return filepath.Join(dir, cut(name)) }, true)
	}
}

// gitAdminFiles are the per-worktree files git writes when someone works.
var gitAdminFiles = [][]byte{
	[]byte("HEAD\x00"),
	[]byte("index\x00"),
	[]byte("logs/HEAD\x00"),
	[]byte("ORIG_HEAD\x00"),
}

// gitDir finds the worktree's own git directory: root/.git itself, or
// where a root/.git file points. inside tells the former.
func (w *walk) gitDir(st *rootState) (dir string, inside bool) {
	var stx unix.Statx_t
	if err := statxAt(w.rootFD, &nameGit[0], statxFlags, &stx); err != nil {
		return "", false
	}
	switch stx.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if w.mountOf(&stx) != w.mnt {
			return "", false
		}
		return w.root + "/.git", true
	case unix.S_IFREG:
	default:
		return "", false // a link or something odd: git would not trust it either
	}
	key := fileKey{stx.Dev_major, stx.Dev_minor, stx.Ino, stx.Size, stampOf(stx.Mtime), stampOf(stx.Ctime)}
	if d, ok := st.gitDir(key); ok {
		return d, false
	}
	dir = w.readGitFile()
	st.setGitDir(key, dir)
	return dir, false
}

// readGitFile reads "gitdir: PATH" from root/.git. The file is the
// agent's: it is opened without following a link or blocking on a FIFO,
// and only its first 4 KiB are read.
func (w *walk) readGitFile() string {
	fd, err := unix.Openat(w.rootFD, ".git", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return ""
	}
	buf := make([]byte, 4096)
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return ""
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	path, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "gitdir:")
	path = strings.TrimSpace(path)
	if !ok || path == "" {
		return ""
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(w.root, path)
	}
	return filepath.Clean(path)
}

// bufs recycles the 32 KiB getdents buffers across walks: the engine walks
// every runtime on every pass.
var bufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func getBuf() *[]byte  { return bufs.Get().(*[]byte) }
func putBuf(b *[]byte) { bufs.Put(b) }
