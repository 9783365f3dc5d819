package dirwalk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
)

// Visitor receives the walk's events. Its methods run concurrently.
type Visitor interface {
	// EnterDir is called once per directory, the first time it is opened,
	// with the descriptor and its status.
	EnterDir(n *Node, fd int, st *unix.Stat_t)
	// Entry handles one entry of the open directory dirfd that is not a
	// directory to descend into. typ is a DT_* value, resolved from
	// DT_UNKNOWN by the walker; DT_DIR appears only for a directory the
	// walker could not enter (already reported through OpenFailed).
	Entry(n *Node, dirfd int, name string, typ uint8)
	// OpenFailed reports that the subdirectory name of parent could not be
	// entered. Returning true asks the walker to try once more (after the
	// visitor fixed a permission, say).
	OpenFailed(parent *Node, parentFD int, name string, err error) (retry bool)
	// LeaveDir runs after every entry and subdirectory of n was handled.
	// parentFD is the open descriptor of n's parent. Returning true asks
	// the walker to read n again (entries appeared while it ran); the
	// walker bounds how often.
	LeaveDir(n *Node, parentFD int) (again bool)
}

// EntryStatter is implemented by a Visitor that only needs the status of
// the entries that are not directories (a sizer): the walker then calls
// fstatat itself, on the name where it lies in the directory buffer, and
// hands over the result instead of calling Entry. An entry whose fstatat
// fails for another reason than vanishing still goes to Entry.
type EntryStatter interface {
	EntryStat(n *Node, st *unix.Stat_t)
}

// Options tune a walk. The zero value is usable.
type Options struct {
	// Workers is the number of goroutines issuing system calls. Default
	// 2 × GOMAXPROCS, at least 4: most of the time goes into the kernel,
	// and a second call in flight per core hides lock waits there.
	Workers int
	// MaxOpenDirs bounds the directory descriptors held at once. Default 512.
	MaxOpenDirs int
	// ChunkSize is how many entries of one directory a worker handles
	// before handing the rest to others. Default 1024.
	ChunkSize int
	// MaxRescans bounds how often a directory is read again when LeaveDir
	// asks for it. Default 3.
	MaxRescans int
	// Resolver opens directories; set Fallback to test the path used on
	// kernels without openat2.
	Resolver beneath.Resolver
}

// ErrReplaced reports that a directory evicted from the descriptor cache
// was no longer the same inode when reopened by name.
var ErrReplaced = errors.New("directory was replaced during the walk")

// Node is one directory of the walk.
type Node struct {
	parent *Node
	name   string
	depth  int

	// Set on the first open; used to verify a reopen.
	ino, dev uint64
	alloc    int64
	opened   bool

	// pending counts work outstanding on this directory: 1 while it is
	// being read, plus one per subdirectory and per chunk not finished.
	pending atomic.Int64
	kept    atomic.Int64
	rescans int

	// Guarded by walker.mu.
	fd               int
	pins             int
	lruPrev, lruNext *Node
}

// Name is the directory's name in its parent (the walked path for the root).
func (n *Node) Name() string { return n.name }

// Parent is the directory holding n, nil above the root.
func (n *Node) Parent() *Node { return n.parent }

// Depth is 0 for the directory holding the walk's root, 1 for the root.
func (n *Node) Depth() int { return n.depth }

// Keep records that something inside n stays (a mount point, an entry that
// failed): its ancestors will not be empty either, so LeaveDir can tell an
// expected ENOTEMPTY from entries that appeared meanwhile.
func (n *Node) Keep() {
	for a := n; a != nil; a = a.parent {
		a.kept.Add(1)
	}
}

// AllocBytes is the space the directory itself occupies (its blocks).
func (n *Node) AllocBytes() int64 { return n.alloc }

// Rescans tells how often n was read again at LeaveDir's request.
func (n *Node) Rescans() int { return n.rescans }

// Kept tells whether anything inside n was kept.
func (n *Node) Kept() bool { return n.kept.Load() > 0 }

// Path is n's path relative to the walk's base directory.
func (n *Node) Path() string {
	var names []string
	for a := n; a != nil; a = a.parent {
		if a.name != "" {
			names = append(names, a.name)
		}
	}
	for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
		names[i], names[j] = names[j], names[i]
	}
	return strings.Join(names, "/")
}

// Join returns the path of entry name of n relative to the base.
func (n *Node) Join(name string) string {
	if p := n.Path(); p != "" {
		return p + "/" + name
	}
	return name
}

type task struct {
	node  *Node
	names []string // a chunk of entries; nil means read the directory
	types []uint8
	inos  []uint64
}

type walker struct {
	ctx  context.Context
	opts Options
	v    Visitor

	qmu     sync.Mutex
	qcond   *sync.Cond
	stack   []task
	running int
	idle    int // workers waiting in pop
	done    bool

	// raw: issue metadata calls as raw system calls (see sys.go).
	raw bool

	mu       sync.Mutex // descriptor cache
	open     int
	lruHead  *Node // most recently released
	lruTail  *Node
	anchorFD int
}

// Walk visits rel beneath basefd. rel "" walks basefd itself (LeaveDir of
// the root then gets parentFD -1). If rel names something other than a
// directory, Entry is called for it alone.
func Walk(ctx context.Context, basefd int, rel string, opts Options, v Visitor) error {
	opts = withDefaults(opts)
	w := &walker{ctx: ctx, opts: opts, v: v, raw: !Remote(basefd)}
	w.qcond = sync.NewCond(&w.qmu)

	parts, err := beneath.Split(rel)
	if err != nil {
		return err
	}
	var anchorFD int
	var rootName string
	if len(parts) == 0 {
		anchorFD = -1
	} else {
		anchorFD, rootName, err = opts.Resolver.OpenParent(basefd, rel)
		if err != nil {
			return err
		}
		defer unix.Close(anchorFD)
	}
	anchor := &Node{name: strings.Join(parts[:max(len(parts)-1, 0)], "/"), fd: anchorFD, pins: 1}
	anchor.pending.Store(1)
	w.anchorFD = anchorFD

	root := &Node{parent: anchor, name: rootName, depth: 1, fd: -1}
	if anchorFD < 0 {
		// Walking the base itself: it has no parent to reopen it from, so
		// its descriptor stays pinned for the whole walk.
		fd, err := opts.Resolver.OpenDir(basefd, "")
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("walk base: %w", err)
		}
		root.fd, root.pins = fd, 1
		root.opened, root.ino, root.dev = true, st.Ino, st.Dev
		v.EnterDir(root, fd, &st)
	} else {
		var st unix.Stat_t
		if err := unix.Fstatat(anchorFD, rootName, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("walk %q: %w", rel, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			v.Entry(anchor, anchorFD, rootName, modeToDT(st.Mode))
			return nil
		}
	}
	root.pending.Store(1)
	w.push(task{node: root})

	var wg sync.WaitGroup
	for i := 0; i < opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.work()
		}()
	}
	wg.Wait()
	w.closeAll()
	return ctx.Err()
}

// WithDefaults returns o with every unset field at its default.
func (o Options) WithDefaults() Options { return withDefaults(o) }

func withDefaults(o Options) Options {
	if o.Workers <= 0 {
		o.Workers = max(4, 2*runtime.GOMAXPROCS(0))
	}
	if o.MaxOpenDirs <= 0 {
		o.MaxOpenDirs = 512
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = 1024
	}
	if o.MaxRescans <= 0 {
		o.MaxRescans = 3
	}
	return o
}

func (w *walker) push(t task) {
	w.qmu.Lock()
	w.stack = append(w.stack, t)
	wake := w.idle > 0
	w.qmu.Unlock()
	if wake {
		// Waking a thread costs more than most directories: only when
		// one is waiting.
		w.qcond.Signal()
	}
}

func (w *walker) pop() (task, bool) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	for len(w.stack) == 0 && !w.done {
		if w.running == 0 {
			w.done = true
			w.qcond.Broadcast()
			break
		}
		w.idle++
		w.qcond.Wait()
		w.idle--
	}
	if w.done {
		return task{}, false
	}
	if w.ctx.Err() != nil {
		// Cancelled: drop what is queued; directories stay as they are.
		w.stack = nil
		if w.running == 0 {
			w.done = true
			w.qcond.Broadcast()
		}
		return task{}, false
	}
	t := w.stack[len(w.stack)-1]
	w.stack[len(w.stack)-1] = task{}
	w.stack = w.stack[:len(w.stack)-1]
	w.running++
	return t, true
}

func (w *walker) finishTask() {
	w.qmu.Lock()
	w.running--
	if w.running == 0 && len(w.stack) == 0 {
		w.done = true
		w.qcond.Broadcast()
	}
	w.qmu.Unlock()
}

func (w *walker) work() {
	buf := make([]byte, 64<<10)
	for {
		t, ok := w.pop()
		if !ok {
			return
		}
		if t.names == nil {
			// Go on with one subdirectory of each directory read, without
			// a trip through the queue.
			for next := t.node; next != nil; {
				next = w.readDir(next, buf)
			}
		} else {
			w.runChunk(t.node, t.names, t.types, t.inos)
		}
		w.finishTask()
	}
}

// readDir opens (or reopens) n, hands its subdirectories to the queue and
// its other entries to the visitor. It keeps one subdirectory back and
// returns it for the caller to read next.
func (w *walker) readDir(n *Node, buf []byte) (next *Node) {
	fd, err := w.acquire(n)
	if err != nil {
		w.openFailed(n, err)
		return nil
	}
	if n.rescans > 0 {
		// Reading again: start from the first entry.
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			w.release(n)
			w.openFailed(n, err)
			return nil
		}
	}
	var names []string
	var types []uint8
	var inos []uint64
	statter, _ := w.v.(EntryStatter)
	for {
		nread, err := getdents(w.raw, fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			w.v.OpenFailed(n.parent, -1, n.name, fmt.Errorf("read directory: %w", err))
			n.Keep()
			break
		}
		if nread <= 0 {
			break
		}
		for off := 0; off < nread; {
			ino := *(*uint64)(unsafe.Pointer(&buf[off]))
			reclen := int(*(*uint16)(unsafe.Pointer(&buf[off+16])))
			typ := buf[off+18]
			nameBytes := buf[off+19 : off+reclen]
			if i := indexZero(nameBytes); i >= 0 {
				nameBytes = nameBytes[:i]
			}
			nameOff := off + 19
			off += reclen
			if isDot(nameBytes) {
				continue
			}
			if statter != nil && typ != unix.DT_DIR && typ != unix.DT_UNKNOWN {
				// The name is NUL-terminated in the buffer: stat it in
				// place, without a string, a batch or a sort.
				var st unix.Stat_t
				if err := lstatatPtr(w.raw, fd, &buf[nameOff], &st); err == nil {
					statter.EntryStat(n, &st)
					continue
				} else if err == unix.ENOENT {
					continue
				}
				// Anything else goes the long way, with its name.
			}
			name := string(nameBytes)
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					if err != unix.ENOENT {
						w.v.Entry(n, fd, name, unix.DT_UNKNOWN)
					}
					continue
				}
				typ = modeToDT(st.Mode)
			}
			if typ == unix.DT_DIR {
				child := &Node{parent: n, name: name, depth: n.depth + 1, fd: -1}
				child.pending.Store(1)
				n.pending.Add(1)
				if next == nil && w.ctx.Err() == nil {
					next = child
				} else {
					w.push(task{node: child})
				}
				continue
			}
			names = append(names, name)
			types = append(types, typ)
			inos = append(inos, ino)
			if len(names) >= w.opts.ChunkSize {
				n.pending.Add(1)
				w.push(task{node: n, names: names, types: types, inos: inos})
				names, types, inos = nil, nil, nil
			}
		}
	}
	w.entries(n, fd, names, types, inos)
	w.release(n)
	w.finish(n)
	return next
}

// entries hands a batch to the visitor in inode order: on ext4 and xfs
// neighbouring inodes share inode-table and bitmap blocks, so the kernel
// touches (and journals) fewer distinct blocks than in hash order.
func (w *walker) entries(n *Node, fd int, names []string, types []uint8, inos []uint64) {
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(inos[a], inos[b]) })
	for _, i := range order {
		w.v.Entry(n, fd, names[i], types[i])
	}
}

func (w *walker) runChunk(n *Node, names []string, types []uint8, inos []uint64) {
	fd, err := w.acquire(n)
	if err != nil {
		w.v.OpenFailed(n.parent, -1, n.name, err)
		n.Keep()
	} else {
		w.entries(n, fd, names, types, inos)
		w.release(n)
	}
	w.finish(n)
}

// openFailed handles a directory that could not be opened for reading.
func (w *walker) openFailed(n *Node, err error) {
	p := n.parent
	if errors.Is(err, unix.ENOENT) && !n.opened {
		w.finish(p) // vanished before we got to it: nothing to do
		return
	}
	pfd, perr := w.acquire(p)
	if perr != nil {
		w.v.OpenFailed(p, -1, n.name, err)
		n.Keep()
		w.finish(p)
		return
	}
	if !n.opened && (errors.Is(err, beneath.ErrSymlink) || errors.Is(err, unix.ENOTDIR)) {
		// Replaced by a link or a file since it was listed: hand it over
		// as what it is now.
		var st unix.Stat_t
		if unix.Fstatat(pfd, n.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			w.v.Entry(p, pfd, n.name, modeToDT(st.Mode))
			w.release(p)
			w.finish(p)
			return
		}
	}
	retry := w.v.OpenFailed(p, pfd, n.name, err)
	w.release(p)
	if retry && n.rescans < w.opts.MaxRescans {
		n.rescans++
		w.push(task{node: n}) // p.pending still counts n
		return
	}
	n.Keep()
	w.finish(p)
}

// finish drops one unit of pending work from n and, when none is left,
// leaves n and then every ancestor that becomes complete. It loops rather
// than recursing, so depth costs no stack.
func (w *walker) finish(n *Node) {
	for n.pending.Add(-1) == 0 {
		p := n.parent
		if p == nil {
			return // the anchor
		}
		pfd := -1
		if p.parent != nil || p.fd >= 0 {
			var err error
			w.reopenFromChild(p, n)
			pfd, err = w.acquire(p)
			if err != nil {
				w.v.OpenFailed(p, -1, n.name, err)
				n.Keep()
				pfd = -2
			}
		}
		again := false
		if pfd != -2 {
			again = w.v.LeaveDir(n, pfd)
			if pfd >= 0 {
				w.release(p)
			}
		}
		if again && n.rescans < w.opts.MaxRescans && w.ctx.Err() == nil {
			n.rescans++
			n.pending.Store(1)
			w.push(task{node: n})
			return
		}
		w.closeNode(n)
		n = p
	}
}

// acquire returns n's open descriptor, pinned until release. A directory
// whose descriptor was evicted, or that was never opened, is opened by
// name from its nearest open ancestor.
func (w *walker) acquire(n *Node) (int, error) {
	w.mu.Lock()
	if n.fd >= 0 {
		w.pin(n)
		w.mu.Unlock()
		return n.fd, nil
	}
	// Collect the closed chain up to the nearest open ancestor.
	var chain []*Node
	a := n
	for ; a.fd < 0; a = a.parent {
		if a.parent == nil {
			w.mu.Unlock()
			return -1, fmt.Errorf("reopen %q: %w", n.Path(), ErrReplaced)
		}
		chain = append(chain, a)
	}
	w.pin(a)
	w.mu.Unlock()

	prev := a
	for i := len(chain) - 1; i >= 0; i-- {
		c := chain[i]
		fd, err := w.opts.Resolver.OpenChild(prev.fd, c.name)
		if err != nil {
			w.release(prev)
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			w.release(prev)
			return -1, fmt.Errorf("stat %q: %w", c.Path(), err)
		}
		first := false
		w.mu.Lock()
		switch {
		case c.fd >= 0:
			// Another worker opened it meanwhile: use theirs.
			unix.Close(fd)
		case c.opened && (st.Ino != c.ino || st.Dev != c.dev):
			w.mu.Unlock()
			unix.Close(fd)
			w.release(prev)
			return -1, fmt.Errorf("reopen %q: %w", c.Path(), ErrReplaced)
		default:
			if !c.opened {
				c.opened, c.ino, c.dev, first = true, st.Ino, st.Dev, true
				c.alloc = st.Blocks * 512
			}
			c.fd = fd
			c.pins = 0
			w.open++
		}
		w.pin(c)
		w.unpin(prev)
		w.evict()
		w.mu.Unlock()
		if first {
			w.v.EnterDir(c, c.fd, &st)
		}
		prev = c
	}
	return n.fd, nil
}

// reopenFromChild reopens p, whose descriptor was evicted, through ".." of
// its child n while n is still open. Climbing out of a deep tree then costs
// one open per level instead of a walk down from the nearest open ancestor.
// ".." is never a link, n's parent is on n's mount (n was entered from it),
// and the result must be p's very inode, or it is dropped and acquire takes
// the long way.
func (w *walker) reopenFromChild(p, n *Node) {
	w.mu.Lock()
	if p.fd >= 0 || !p.opened || n.fd < 0 {
		w.mu.Unlock()
		return
	}
	w.pin(n)
	w.mu.Unlock()
	fd, err := unix.Openat(n.fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	var st unix.Stat_t
	if err == nil && (unix.Fstat(fd, &st) != nil || st.Ino != p.ino || st.Dev != p.dev) {
		unix.Close(fd)
		err = ErrReplaced
	}
	w.mu.Lock()
	if err == nil {
		if p.fd >= 0 {
			unix.Close(fd) // another worker reopened it meanwhile
		} else {
			p.fd = fd
			w.open++
			w.lruPush(p)
		}
	}
	w.unpin(n)
	w.evict()
	w.mu.Unlock()
}

func (w *walker) release(n *Node) {
	w.mu.Lock()
	w.unpin(n)
	w.evict()
	w.mu.Unlock()
}

// closeNode closes n's descriptor for good: n is done.
func (w *walker) closeNode(n *Node) {
	w.mu.Lock()
	if n.fd >= 0 && n.pins == 0 {
		w.lruRemove(n)
		unix.Close(n.fd)
		n.fd = -1
		w.open--
	}
	w.mu.Unlock()
}

func (w *walker) closeAll() {
	w.mu.Lock()
	for n := w.lruHead; n != nil; {
		next := n.lruNext
		unix.Close(n.fd)
		n.fd = -1
		n.lruPrev, n.lruNext = nil, nil
		n = next
	}
	w.lruHead, w.lruTail = nil, nil
	w.open = 0
	w.mu.Unlock()
}

// The LRU holds open, unpinned directories; the tail is evicted first.
// Callers hold w.mu. The anchor is pinned forever and never listed.
func (w *walker) pin(n *Node) {
	if n.pins == 0 && n.fd >= 0 {
		w.lruRemove(n)
	}
	n.pins++
}

func (w *walker) unpin(n *Node) {
	n.pins--
	if n.pins == 0 && n.fd >= 0 {
		w.lruPush(n)
	}
}

func (w *walker) evict() {
	for w.open > w.opts.MaxOpenDirs && w.lruTail != nil {
		n := w.lruTail
		w.lruRemove(n)
		unix.Close(n.fd)
		n.fd = -1
		w.open--
	}
}

func (w *walker) lruPush(n *Node) {
	n.lruPrev, n.lruNext = nil, w.lruHead
	if w.lruHead != nil {
		w.lruHead.lruPrev = n
	}
	w.lruHead = n
	if w.lruTail == nil {
		w.lruTail = n
	}
}

func (w *walker) lruRemove(n *Node) {
	if n.lruPrev != nil {
		n.lruPrev.lruNext = n.lruNext
	} else if w.lruHead == n {
		w.lruHead = n.lruNext
	}
	if n.lruNext != nil {
		n.lruNext.lruPrev = n.lruPrev
	} else if w.lruTail == n {
		w.lruTail = n.lruPrev
	}
	n.lruPrev, n.lruNext = nil, nil
}

func indexZero(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

func isDot(b []byte) bool {
	return (len(b) == 1 && b[0] == '.') || (len(b) == 2 && b[0] == '.' && b[1] == '.')
}

func modeToDT(mode uint32) uint8 {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFLNK:
		return unix.DT_LNK
	case unix.S_IFIFO:
		return unix.DT_FIFO
	case unix.S_IFSOCK:
		return unix.DT_SOCK
	case unix.S_IFCHR:
		return unix.DT_CHR
	case unix.S_IFBLK:
		return unix.DT_BLK
	}
	return unix.DT_UNKNOWN
}
