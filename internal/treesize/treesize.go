package treesize

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/dirwalk"
)

// Size is what a tree occupies: what deleting it frees. A file counts only
// when all its hard links lie inside the tree (its link count against the
// links the walk met); one also linked from outside (pnpm's store, a
// deduplicated cache) frees nothing when the tree goes, and its bytes are
// in SharedBytes instead.
type Size struct {
	AllocBytes    int64 `json:"alloc_bytes"`    // allocated blocks, hard links once
	ApparentBytes int64 `json:"apparent_bytes"` // file sizes, hard links once
	Entries       int64 `json:"entries"`        // files, links, directories, the root included
	// SharedBytes are the allocated bytes of files that also have links
	// outside the tree: not in AllocBytes.
	SharedBytes int64 `json:"shared_bytes,omitempty"`
}

// Add returns the sum of s and o.
func (s Size) Add(o Size) Size {
	return Size{s.AllocBytes + o.AllocBytes, s.ApparentBytes + o.ApparentBytes, s.Entries + o.Entries,
		s.SharedBytes + o.SharedBytes}
}

// Problem is one entry that was not measured.
type Problem struct {
	Path string
	Err  error
}

// Result is a measurement with what it left out.
type Result struct {
	Size
	Skipped []Problem // mount points, by rule
	Failed  []Problem // entries that could not be read
}

// Err summarises the failures, nil when there were none.
func (r Result) Err() error {
	if len(r.Failed) == 0 {
		return nil
	}
	errs := make([]error, len(r.Failed))
	for i, p := range r.Failed {
		errs[i] = fmt.Errorf("%s: %w", p.Path, p.Err)
	}
	return fmt.Errorf("measure: %d entries unread: %w", len(r.Failed), errors.Join(errs...))
}

// Options tune a measurement.
type Options struct {
	Walk dirwalk.Options
}

// Measure sizes rel beneath the directory base ("" measures base itself).
func Measure(ctx context.Context, base, rel string, opts Options) (Result, error) {
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Result{}, fmt.Errorf("open base %q: %w", base, err)
	}
	defer unix.Close(fd)
	return MeasureAt(ctx, fd, rel, opts)
}

// MeasureAt is Measure with the base given as an open descriptor.
func MeasureAt(ctx context.Context, basefd int, rel string, opts Options) (Result, error) {
	m := &measurer{}
	err := dirwalk.Walk(ctx, basefd, rel, opts.Walk, m)
	res := Result{
		Size:    Size{AllocBytes: m.alloc.Load(), ApparentBytes: m.apparent.Load(), Entries: m.entries.Load()},
		Skipped: m.skipped,
		Failed:  m.failed,
	}
	for _, l := range m.links {
		if l.seen >= l.nlink {
			res.AllocBytes += l.alloc
			res.ApparentBytes += l.apparent
		} else {
			res.SharedBytes += l.alloc
		}
	}
	if err != nil {
		return res, fmt.Errorf("measure %q: %w", rel, err)
	}
	return res, nil
}

const maxProblems = 100

var _ dirwalk.EntryStatter = (*measurer)(nil)

type measurer struct {
	alloc, apparent, entries atomic.Int64

	linksMu sync.Mutex
	links   map[[2]uint64]*linked

	mu      sync.Mutex
	skipped []Problem
	failed  []Problem
}

// linked is a multiply linked inode: counted at the end, only when the
// walk met all its links.
type linked struct {
	nlink, seen     uint64
	alloc, apparent int64
}

func (m *measurer) add(st *unix.Stat_t) {
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		m.linksMu.Lock()
		if m.links == nil {
			m.links = make(map[[2]uint64]*linked)
		}
		k := [2]uint64{st.Dev, st.Ino}
		l, ok := m.links[k]
		if !ok {
			l = &linked{nlink: uint64(st.Nlink), alloc: st.Blocks * 512, apparent: st.Size}
			m.links[k] = l
		}
		l.seen++
		m.linksMu.Unlock()
		m.entries.Add(1)
		return
	}
	m.alloc.Add(st.Blocks * 512)
	m.apparent.Add(st.Size)
	m.entries.Add(1)
}

func (m *measurer) problem(list *[]Problem, path string, err error) {
	m.mu.Lock()
	if len(*list) < maxProblems {
		*list = append(*list, Problem{path, err})
	}
	m.mu.Unlock()
}

func (m *measurer) EnterDir(_ *dirwalk.Node, _ int, st *unix.Stat_t) { m.add(st) }

// EntryStat lets the walker stat entries in place (dirwalk.EntryStatter).
func (m *measurer) EntryStat(_ *dirwalk.Node, st *unix.Stat_t) { m.add(st) }

func (m *measurer) Entry(n *dirwalk.Node, dirfd int, name string, typ uint8) {
	if typ == unix.DT_DIR {
		return // not entered; reported through OpenFailed
	}
	var st unix.Stat_t
	if err := dirwalk.Lstatat(dirfd, name, &st); err != nil {
		if err != unix.ENOENT {
			m.problem(&m.failed, n.Join(name), err)
		}
		return
	}
	m.add(&st)
}

func (m *measurer) OpenFailed(parent *dirwalk.Node, _ int, name string, err error) bool {
	if errors.Is(err, beneath.ErrMountPoint) {
		m.problem(&m.skipped, parent.Join(name), err)
	} else if !errors.Is(err, unix.ENOENT) {
		m.problem(&m.failed, parent.Join(name), err)
	}
	return false
}

func (m *measurer) LeaveDir(*dirwalk.Node, int) bool { return false }
