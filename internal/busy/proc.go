package busy

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NUL-terminated names for the raw system calls below.
var (
	nameCwd       = []byte("cwd\x00")
	nameRoot      = []byte("root\x00")
	nameFD        = []byte("fd\x00")
	nameMaps      = []byte("maps\x00")
	nameTask      = []byte("task\x00")
	nameComm      = []byte("comm\x00")
	nameMountinfo = []byte("mountinfo\x00")
	nameNSMnt     = []byte("ns/mnt\x00")
)

// kcmp(2) types.
const (
	kcmpFiles = 2
	kcmpFS    = 3
)

// worker reads processes one at a time with buffers it reuses, so reading
// a descriptor costs one readlinkat and no allocation unless it matches.
type worker struct {
	s      *scanner
	dents  []byte // fd/ listings
	tdents []byte // task/ listings
	link   []byte
	file   []byte
	roots  []int

	procs, denied, failed int
	privileged            int
	unread                []string // the first few of this worker's
	hits                  []hit
}

func newWorker(s *scanner) *worker {
	return &worker{
		s:      s,
		dents:  make([]byte, 32<<10),
		tdents: make([]byte, 8<<10),
		link:   make([]byte, unix.PathMax+64),
		file:   make([]byte, 64<<10),
	}
}

// proc is the process being read.
type proc struct {
	pid            int
	fd             int // /proc/PID
	m              *matcher
	comm           string
	commRead       bool
	denied, failed bool
	why            string // the first thing that could not be read
}

// note records a read error of what ("cwd", "fd 5", "maps"): vanishing is
// not one.
func (p *proc) note(err error, what string) {
	switch {
	case err == nil, errors.Is(err, unix.ENOENT), errors.Is(err, unix.ESRCH):
		return
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		p.denied = true
	default:
		p.failed = true
	}
	if p.why == "" {
		p.why = what + ": " + err.Error()
	}
}

func (w *worker) inspect(pid int) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	p := &proc{pid: pid, fd: fd}
	if err != nil {
		p.note(err, "/proc/PID")
		w.count(p, false)
		return
	}
	defer unix.Close(fd)

	p.m = w.s.self
	if n, err := readlinkat(fd, nameNSMnt, w.link); err == nil && string(w.link[:n]) != w.s.selfNS {
		p.m = w.s.matcherFor(string(w.link[:n]), fd, w)
	}

	leaderAlive := w.checkLink(p, fd, nameCwd, "cwd")
	w.checkLink(p, fd, nameRoot, "root")
	nfds := w.checkFDs(p, fd)
	w.checkMaps(p, fd)
	w.checkThreads(p, nfds, leaderAlive)
	w.count(p, true)
}

func (w *worker) count(p *proc, seen bool) {
	if seen {
		w.procs++
	}
	if p.denied && !p.failed && p.pid == 1 && w.s.morePrivileged(w, p) {
		// The init of this PID namespace refused because it holds
		// capabilities this process lacks: the supervisor of the container
		// the reclaimer runs in, never an agent. It does not make the
		// answer unknown; counted apart. Any other process refused is
		// unknown, however privileged (a privileged agent container).
		w.privileged++
		return
	}
	if p.denied {
		w.denied++
	} else if p.failed {
		w.failed++
	}
	if (p.denied || p.failed) && len(w.unread) < maxUnread {
		if !p.commRead {
			p.commRead = true
			if data, err := w.readFile(p.fd, nameComm); err == nil {
				p.comm = string(bytes.TrimRight(data, "\n"))
			}
		}
		w.unread = append(w.unread, fmt.Sprintf("pid %d (%s) %s", p.pid, p.comm, p.why))
	}
}

// checkLink matches the target of the link name in dirfd and tells
// whether it could be read.
func (w *worker) checkLink(p *proc, dirfd int, name []byte, what string) bool {
	n, err := readlinkat(dirfd, name, w.link)
	if err == unix.ENAMETOOLONG {
		// Deeper than PATH_MAX: no name to match, so find it by identity.
		return w.locate(p, dirfd, name, what)
	}
	if err != nil {
		p.note(err, what)
		return false
	}
	w.check(p, w.link[:n], what)
	return true
}

// check records a hit for every root path lies in.
func (w *worker) check(p *proc, path []byte, what string) {
	w.roots = p.m.match(path, w.roots[:0])
	for _, r := range w.roots {
		w.record(p, r, path, what)
	}
}

// record notes that p holds root through path.
func (w *worker) record(p *proc, root int, path []byte, what string) {
	if !p.commRead {
		p.commRead = true
		if data, err := w.readFile(p.fd, nameComm); err == nil {
			p.comm = string(bytes.TrimRight(data, "\n"))
		}
	}
	w.hits = append(w.hits, hit{root: root, Holder: Holder{PID: p.pid, Command: p.comm, What: what, Path: string(path)}})
}

// checkFDs matches every descriptor under dirfd/fd and returns how many
// there were.
func (w *worker) checkFDs(p *proc, dirfd int) int {
	fdd, err := openat(dirfd, nameFD, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		p.note(err, "fd")
		return 0
	}
	defer unix.Close(fdd)
	count := 0
	for {
		n, err := unix.Getdents(fdd, w.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			p.note(err, "fd")
			return count
		}
		if n <= 0 {
			return count
		}
		for off := 0; off < n; {
			reclen := int(*(*uint16)(unsafe.Pointer(&w.dents[off+16])))
			name := w.dents[off+19 : off+reclen]
			off += reclen
			if name[0] == '.' {
				continue
			}
			count++
			l, err := readlinkat(fdd, name, w.link)
			if err == unix.ENAMETOOLONG {
				w.locate(p, fdd, name, "fd "+string(name[:bytes.IndexByte(name, 0)]))
				continue
			}
			if err != nil {
				p.note(err, "fd "+string(name[:bytes.IndexByte(name, 0)]))
				if err == unix.EACCES || err == unix.EPERM {
					return count // the rest would be refused as well
				}
				continue
			}
			path := w.link[:l]
			w.roots = p.m.match(path, w.roots[:0])
			if len(w.roots) > 0 {
				what := "fd " + string(name[:bytes.IndexByte(name, 0)])
				for _, r := range w.roots {
					w.record(p, r, path, what)
				}
			}
		}
	}
}

// checkMaps matches the file-backed mappings, each file once.
func (w *worker) checkMaps(p *proc, dirfd int) {
	data, err := w.readFile(dirfd, nameMaps)
	if err != nil {
		p.note(err, "maps")
		return
	}
	var prev []byte
	var done []int // roots already reported through a mapping
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		path := mapsPath(line)
		if len(path) == 0 || path[0] != '/' || bytes.Equal(path, prev) {
			continue
		}
		prev = path
		w.roots = p.m.match(unescapeMapsPath(path), w.roots[:0])
		for _, r := range w.roots {
			if !slices.Contains(done, r) {
				done = append(done, r)
				w.record(p, r, unescapeMapsPath(path), "mmap")
			}
		}
	}
}

// mapsPath returns the path column of a maps line: everything after the
// fifth field and the padding that follows it.
func mapsPath(line []byte) []byte {
	i := 0
	for f := 0; f < 5; f++ {
		for i < len(line) && line[i] != ' ' {
			i++
		}
		for i < len(line) && line[i] == ' ' {
			i++
		}
	}
	return line[i:]
}

// unescapeMapsPath undoes the kernel's escape of a newline in a mapped
// file's name ("\012").
func unescapeMapsPath(p []byte) []byte {
	if !bytes.Contains(p, []byte(`\012`)) {
		return p
	}
	return bytes.ReplaceAll(p, []byte(`\012`), []byte("\n"))
}

// checkThreads reads the threads whose working directory or descriptor
// table differ from the leader's. nfds is how many descriptors the leader
// showed; with none (an exited leader) every thread's table is read.
// leaderAlive tells that the leader's cwd could be read: a leader that
// exited while its threads run shows nothing of its own.
func (w *worker) checkThreads(p *proc, nfds int, leaderAlive bool) {
	// A task directory links 2 + live threads: with a live leader, one
	// thread is the leader alone and needs no listing.
	var st unix.Stat_t
	if _, _, e := unix.Syscall6(unix.SYS_NEWFSTATAT, uintptr(p.fd), uintptr(unsafe.Pointer(&nameTask[0])),
		uintptr(unsafe.Pointer(&st)), 0, 0, 0); e == 0 && st.Nlink <= 3 && leaderAlive {
		return
	}
	td, err := openat(p.fd, nameTask, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		p.note(err, "task")
		return
	}
	defer unix.Close(td)
	for {
		n, err := unix.Getdents(td, w.tdents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			p.note(err, "task")
			return
		}
		if n <= 0 {
			return
		}
		for off := 0; off < n; {
			reclen := int(*(*uint16)(unsafe.Pointer(&w.tdents[off+16])))
			name := w.tdents[off+19 : off+reclen]
			off += reclen
			tid := atoi(name)
			if tid <= 0 || tid == p.pid {
				continue
			}
			sameFS, sameFiles := w.shares(p, tid, nfds)
			if sameFS && sameFiles {
				continue
			}
			tfd, err := openat(td, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
			if err != nil {
				p.note(err, "task")
				continue
			}
			if !sameFS {
				w.checkLink(p, tfd, nameCwd, "cwd")
				w.checkLink(p, tfd, nameRoot, "root")
			}
			if !sameFiles {
				w.checkFDs(p, tfd)
			}
			unix.Close(tfd)
		}
	}
}

// shares tells whether thread tid shares its leader's filesystem context
// (cwd, root) and descriptor table. A thread that kcmp(2) may not compare
// is one whose links would be refused too: it is counted as denied and
// skipped. Without kcmp it assumes a separate filesystem context (reading
// two links is cheap) and a shared table unless the leader showed none.
func (w *worker) shares(p *proc, tid, nfds int) (sameFS, sameFiles bool) {
	if w.s.kcmpBroken.Load() {
		return false, nfds > 0
	}
	var r [2]uintptr
	for i, typ := range [2]uintptr{kcmpFS, kcmpFiles} {
		v, _, e := unix.Syscall6(unix.SYS_KCMP, uintptr(p.pid), uintptr(tid), typ, 0, 0, 0)
		switch e {
		case 0:
			r[i] = v
		case unix.ENOSYS:
			w.s.kcmpBroken.Store(true)
			return false, nfds > 0
		default:
			p.note(e, "kcmp") // refused, or the thread is gone
			return true, true
		}
	}
	return r[0] == 0, r[1] == 0
}

// readFile reads the whole of name in dirfd into the worker's buffer; the
// result is valid until the next call.
func (w *worker) readFile(dirfd int, name []byte) ([]byte, error) {
	fd, err := openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(w.file) {
			w.file = append(w.file, make([]byte, len(w.file))...)
		}
		k, err := unix.Read(fd, w.file[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if k == 0 {
			return w.file[:n], nil
		}
		n += k
	}
}

func atoi(name []byte) int {
	v := 0
	for _, c := range name {
		if c == 0 {
			break
		}
		if c < '0' || c > '9' {
			return -1
		}
		v = v*10 + int(c-'0')
	}
	return v
}

// readlinkat reads the link name (NUL-terminated) of dirfd into buf. It
// reports ENAMETOOLONG for a target that does not fit.
func readlinkat(dirfd int, name []byte, buf []byte) (int, error) {
	for {
		n, _, e := unix.Syscall6(unix.SYS_READLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])),
			uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
		switch {
		case e == unix.EINTR:
			continue
		case e != 0:
			return 0, e
		case int(n) >= len(buf):
			return 0, unix.ENAMETOOLONG
		}
		return int(n), nil
	}
}

// openat opens the NUL-terminated name in dirfd.
func openat(dirfd int, name []byte, flags int) (int, error) {
	for {
		fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])), uintptr(flags), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(fd), nil
	}
}

// devIno names a file independently of its path and of the mount showing
// it (a bind mount shows the same device and inode).
type devIno struct{ dev, ino uint64 }

// maxClimb bounds locate's walk up: far deeper than any real tree.
const maxClimb = 1 << 16

// locate finds which roots the target of the link name in dirfd (a cwd,
// root or descriptor too deep for its path to be read) lies in, by
// identity: it opens the target itself (O_PATH through the magic link) and,
// for a folder, climbs ".." comparing device and inode with the roots'
// until the top. A target that is not a folder cannot be climbed from: the
// process is counted as unread, which makes the answer unknown (busy).
func (w *worker) locate(p *proc, dirfd int, name []byte, what string) bool {
	fd, err := openat(dirfd, name, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		p.note(err, what)
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		p.note(err, what)
		return false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		p.note(unix.ENAMETOOLONG, what+" (a file deeper than PATH_MAX)")
		return false
	}
	ids := w.s.rootIDs()
	dotdot := []byte("..\x00")
	for range maxClimb {
		for _, r := range ids[devIno{st.Dev, st.Ino}] {
			w.record(p, r, []byte("(a folder deeper than PATH_MAX)"), what)
		}
		up, err := openat(fd, dotdot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
		unix.Close(fd)
		if err != nil {
			p.note(err, what)
			return false
		}
		fd = up
		var pst unix.Stat_t
		if err := unix.Fstat(fd, &pst); err != nil {
			unix.Close(fd)
			p.note(err, what)
			return false
		}
		if pst.Dev == st.Dev && pst.Ino == st.Ino {
			break // the top: ".." is itself
		}
		st = pst
	}
	unix.Close(fd)
	return true
}

var nameStatus = []byte("status\x00")

// capPrm reads the permitted capability set from a status file.
func capPrm(status []byte) (uint64, bool) {
	i := bytes.Index(status, []byte("\nCapPrm:"))
	if i < 0 {
		return 0, false
	}
	line := status[i+len("\nCapPrm:"):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 16, 64)
	return v, err == nil
}

// morePrivileged tells whether p holds a permitted capability this
// process lacks (its status file is readable to all).
func (s *scanner) morePrivileged(w *worker, p *proc) bool {
	if !s.ownCapsOK || p.fd < 0 {
		return false
	}
	data, err := w.readFile(p.fd, nameStatus)
	if err != nil {
		return false
	}
	c, ok := capPrm(data)
	return ok && c&^s.ownCaps != 0
}
