package busy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Holder is one reason a folder is busy.
type Holder struct {
	PID     int    `json:"pid"`     // the process (thread group) id
	Command string `json:"command"` // its name, from /proc/PID/comm ("" if it exited meanwhile)
	// What holds the folder: "cwd", "root", "fd N" or "mmap".
	What string `json:"what"`
	// Path is what the process has open, as it sees it (a process in
	// another mount namespace sees its own paths); " (deleted)" marks an
	// unlinked file.
	Path string `json:"path"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d (%s) %s %s", h.PID, h.Command, h.What, h.Path)
}

// Options tune a scan. The zero value is what callers want.
type Options struct {
	// IncludeSelf also reports the calling process. By default it is left
	// out (ExcludeSelf), so its own descriptors on a folder it is working
	// on do not make the folder busy.
	IncludeSelf bool
	// Workers bounds how many processes are read at once. Default
	// GOMAXPROCS, between 2 and 8.
	Workers int
}

// Snapshot is what one scan of /proc found, for the folders it was asked
// about. It is a moment's truth: re-check under the runtime's lock.
type Snapshot struct {
	// Processes is how many processes were looked at (the caller excluded).
	Processes int `json:"processes"`
	// Denied counts processes of which something could not be read for
	// lack of permission. Zero when running as root without hidepid.
	Denied int `json:"denied"`
	// Failed counts processes of which something could not be read for
	// another reason than vanishing or permission.
	Failed int `json:"failed"`
	// Privileged is 1 when the init of this PID namespace refused a scan
	// running as root because it holds capabilities the scan lacks: the
	// supervisor of the container the reclaimer runs in. It is not counted
	// in Denied and does not make the answer unknown.
	Privileged int `json:"privileged,omitempty"`
	// Unread says, for the first few processes counted in Denied or
	// Failed, what could not be read ("pid 42 (node) cwd: ...").
	Unread []string `json:"unread,omitempty"`

	holders map[string][]Holder
}

// maxUnread bounds Snapshot.Unread.
const maxUnread = 5

// Holders lists what keeps path busy, ordered by PID; nil when nothing
// does. path must be one of the folders given to Scan (compared cleaned).
func (s *Snapshot) Holders(path string) []Holder {
	return s.holders[cleanAbs(path)]
}

// Busy tells whether path may be in use: a process holds it, or some
// process could not be read entirely, so nobody can say it does not (fail
// closed: unknown is busy).
func (s *Snapshot) Busy(path string) bool { return len(s.Holders(path)) > 0 || !s.Complete() }

// Reason describes why path is busy in one line, "" when it is not: its
// holders, or why the answer is unknown.
func (s *Snapshot) Reason(path string) string {
	hs := s.Holders(path)
	switch len(hs) {
	case 0:
		if !s.Complete() {
			return s.unknown()
		}
		return ""
	case 1:
		return hs[0].String()
	}
	return fmt.Sprintf("%s (and %d more)", hs[0], len(hs)-1)
}

func (s *Snapshot) unknown() string {
	n := s.Denied + s.Failed
	msg := fmt.Sprintf("unknown: %d processes could not be read", n)
	if len(s.Unread) > 0 {
		msg += " (" + strings.Join(s.Unread, "; ")
		if n > len(s.Unread) {
			msg += fmt.Sprintf("; and %d more", n-len(s.Unread))
		}
		msg += ")"
	}
	return msg
}

// Complete tells whether every process could be read entirely.
func (s *Snapshot) Complete() bool { return s.Denied == 0 && s.Failed == 0 }

// Reasons scans once for paths and maps each busy path to its Reason. Its
// signature fits a caller that wants a plain function (engine.BusyFunc).
func (o Options) Reasons(ctx context.Context, paths []string) (map[string]string, error) {
	s, err := Scan(ctx, paths, o)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range paths {
		if r := s.Reason(p); r != "" {
			out[p] = r
		}
	}
	return out, nil
}

// Scan reads /proc once and finds, for each of roots, the processes that
// use it. It fails only when /proc cannot be listed or ctx ends.
func Scan(ctx context.Context, roots []string, opts Options) (*Snapshot, error) {
	snap := &Snapshot{holders: map[string][]Holder{}}
	var clean []string
	seen := map[string]bool{}
	for _, r := range roots {
		c := cleanAbs(r)
		if !seen[c] {
			seen[c] = true
			clean = append(clean, c)
		}
	}
	if len(clean) == 0 {
		return snap, ctx.Err()
	}
	if opts.Workers <= 0 {
		opts.Workers = min(8, max(2, runtime.GOMAXPROCS(0)))
	}

	s := newScanner(ctx, clean)
	pids, err := listPIDs()
	if err != nil {
		return nil, fmt.Errorf("scan processes: %w", err)
	}
	self := os.Getpid()
	if !opts.IncludeSelf {
		pids = slices.DeleteFunc(pids, func(p int) bool { return p == self })
	}

	var next atomic.Int64
	workers := make([]*worker, min(opts.Workers, len(pids)))
	var wg sync.WaitGroup
	for i := range workers {
		w := newWorker(s)
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(pids) {
					return
				}
				w.inspect(pids[i])
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scan processes: %w", err)
	}

	var hits []hit
	for _, w := range workers {
		snap.Processes += w.procs
		snap.Denied += w.denied
		snap.Failed += w.failed
		snap.Privileged += w.privileged
		for _, u := range w.unread {
			if len(snap.Unread) < maxUnread {
				snap.Unread = append(snap.Unread, u)
			}
		}
		hits = append(hits, w.hits...)
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return a.PID - b.PID })
	for _, h := range hits {
		r := clean[h.root]
		snap.holders[r] = append(snap.holders[r], h.Holder)
	}
	return snap, nil
}

func cleanAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// matcher finds the roots a path of one mount namespace lies in.
type matcher struct {
	prefixes map[string][]int    // an alias of a root → the roots
	firsts   map[string]struct{} // first components of the aliases ("/srv")
	lens     []bool              // lens[n]: some alias is n bytes long
	all      []int               // roots with the alias "/"
}

func newMatcher() *matcher {
	return &matcher{prefixes: map[string][]int{}, firsts: map[string]struct{}{}}
}

func (m *matcher) add(alias string, root int) {
	alias = filepath.Clean(alias)
	if !strings.HasPrefix(alias, "/") {
		return
	}
	if alias == "/" {
		if !slices.Contains(m.all, root) {
			m.all = append(m.all, root)
		}
		return
	}
	if !slices.Contains(m.prefixes[alias], root) {
		m.prefixes[alias] = append(m.prefixes[alias], root)
	}
	if len(alias) >= len(m.lens) {
		m.lens = append(m.lens, make([]bool, len(alias)+1-len(m.lens))...)
	}
	m.lens[len(alias)] = true
	first := alias
	if i := strings.IndexByte(alias[1:], '/'); i >= 0 {
		first = alias[:i+1]
	}
	m.firsts[first] = struct{}{}
}

var deletedSuffix = []byte(" (deleted)")

// match appends to out the roots path lies in, each once. A path that ends
// in " (deleted)" is tried with and without the suffix.
func (m *matcher) match(path []byte, out []int) []int {
	out = m.matchOne(path, out)
	if bytes.HasSuffix(path, deletedSuffix) {
		out = m.matchOne(path[:len(path)-len(deletedSuffix)], out)
	}
	return out
}

func (m *matcher) matchOne(path []byte, out []int) []int {
	if len(path) == 0 || path[0] != '/' {
		return out // "socket:[…]", "pipe:[…]", "anon_inode:…"
	}
	for _, r := range m.all {
		out = appendOnce(out, r)
	}
	first := path
	if i := bytes.IndexByte(path[1:], '/'); i >= 0 {
		first = path[:i+1]
	}
	if _, ok := m.firsts[string(first)]; !ok {
		return out
	}
	for end := len(path); end > 0; {
		if end >= len(m.lens) || !m.lens[end] {
			// No alias this long: no need to hash.
		} else if rs, ok := m.prefixes[string(path[:end])]; ok {
			for _, r := range rs {
				out = appendOnce(out, r)
			}
		}
		i := bytes.LastIndexByte(path[:end], '/')
		if i <= 0 {
			break
		}
		end = i
	}
	return out
}

func appendOnce(s []int, v int) []int {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// scanner holds what every worker of one scan shares.
type scanner struct {
	ctx    context.Context
	roots  []string
	keys   []fsKey
	hasKey []bool
	self   *matcher
	selfNS string
	// ids are the roots by device and inode, for locate: made on first
	// use (a folder deeper than PATH_MAX is rare; a stat per root is not
	// free at 100,000 runtimes).
	idsOnce sync.Once
	ids     map[devIno][]int
	// ownCaps is this process's permitted capability set.
	ownCaps   uint64
	ownCapsOK bool

	mu sync.Mutex
	ns map[string]*matcher // by mount namespace link ("mnt:[4026531832]")

	kcmpBroken atomic.Bool
}

func newScanner(ctx context.Context, roots []string) *scanner {
	s := &scanner{
		ctx:    ctx,
		roots:  roots,
		keys:   make([]fsKey, len(roots)),
		hasKey: make([]bool, len(roots)),
		self:   newMatcher(),
		ns:     map[string]*matcher{},
	}
	if l, err := os.Readlink("/proc/self/ns/mnt"); err == nil {
		s.selfNS = l
	}
	// Only as root: a process root cannot read holds capabilities root
	// here lacks (a supervisor above a confined service or container).
	// Without root, whatever cannot be read is unknown.
	if data, err := os.ReadFile("/proc/self/status"); err == nil && os.Geteuid() == 0 {
		s.ownCaps, s.ownCapsOK = capPrm(data)
	}
	data, _ := os.ReadFile("/proc/self/mountinfo")
	mounts := parseMountinfo(data)
	parents := parentResolver{}
	defer parents.close()
	for i, r := range roots {
		s.self.add(r, i)
		real := r
		if e, ok := parents.realPath(r); ok && e != r {
			real = e
			s.self.add(real, i)
		}
		if k, ok := keyOf(mounts, real); ok {
			s.keys[i], s.hasKey[i] = k, true
			for _, a := range aliases(mounts, k) {
				s.self.add(a, i)
			}
		}
	}
	if s.selfNS != "" {
		s.ns[s.selfNS] = s.self
	}
	return s
}

// rootIDs returns the roots by device and inode.
func (s *scanner) rootIDs() map[devIno][]int {
	s.idsOnce.Do(func() {
		s.ids = map[devIno][]int{}
		for i, r := range s.roots {
			var st unix.Stat_t
			if unix.Stat(r, &st) == nil {
				k := devIno{st.Dev, st.Ino}
				s.ids[k] = append(s.ids[k], i)
			}
		}
	})
	return s.ids
}

// parentResolver resolves many paths that share parents (a pass's run
// folders): each parent is resolved once, and a path whose last component
// is not a symbolic link is its resolved parent plus that name; one
// fstatat instead of an open, a readlink and a close per path.
type parentResolver map[string]*resolvedParent

type resolvedParent struct {
	fd   int
	real string
	ok   bool
}

func (pr parentResolver) realPath(path string) (string, bool) {
	dir, base := filepath.Split(filepath.Clean(path))
	if base == "" || dir == "" {
		return realPath(path)
	}
	p, seen := pr[dir]
	if !seen {
		p = &resolvedParent{fd: -1}
		if fd, err := unix.Open(dir, unix.O_PATH|unix.O_CLOEXEC, 0); err == nil {
			if real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil && strings.HasPrefix(real, "/") {
				p.fd, p.real, p.ok = fd, real, true
			} else {
				unix.Close(fd)
			}
		}
		pr[dir] = p
	}
	if !p.ok {
		return realPath(path)
	}
	var st unix.Stat_t
	if unix.Fstatat(p.fd, base, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return realPath(path)
	}
	return filepath.Join(p.real, base), true
}

func (pr parentResolver) close() {
	for _, p := range pr {
		if p.fd >= 0 {
			unix.Close(p.fd)
		}
	}
}

// realPath resolves every symbolic link in path, as the kernel names it
// (the name of an O_PATH descriptor of it: three system calls where
// filepath.EvalSymlinks takes one per component).
func realPath(path string) (string, bool) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false
	}
	defer unix.Close(fd)
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !strings.HasPrefix(real, "/") {
		return "", false
	}
	return real, true
}

// matcherFor returns the matcher of the mount namespace ns, building it
// from mountinfo (read through pidfd) the first time.
func (s *scanner) matcherFor(ns string, pidfd int, w *worker) *matcher {
	if ns == "" {
		return s.self
	}
	s.mu.Lock()
	m, ok := s.ns[ns]
	s.mu.Unlock()
	if ok {
		return m
	}
	data, err := w.readFile(pidfd, nameMountinfo)
	if err != nil {
		return s.self
	}
	mounts := parseMountinfo(data)
	m = newMatcher()
	for i := range s.roots {
		if s.hasKey[i] {
			for _, a := range aliases(mounts, s.keys[i]) {
				m.add(a, i)
			}
		}
	}
	s.mu.Lock()
	s.ns[ns] = m
	s.mu.Unlock()
	return m
}

type hit struct {
	root int
	Holder
}

// listPIDs lists the processes in /proc.
func listPIDs() ([]int, error) {
	f, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
