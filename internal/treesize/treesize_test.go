package treesize_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/dirwalk"
	"github.com/reclaimer/reclaimer/internal/testtree"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

var modes = []struct {
	name string
	opts treesize.Options
}{
	{"openat2", treesize.Options{}},
	{"fallback", treesize.Options{Walk: dirwalk.Options{Resolver: beneath.Resolver{Fallback: true}}}},
	// Tiny chunks, few descriptors and many workers: hard links and big
	// directories are handled by several goroutines at once.
	{"small-chunks", treesize.Options{Walk: dirwalk.Options{Workers: 9, ChunkSize: 7, MaxOpenDirs: 3}}},
}

func writeFile(t testing.TB, path string, size int, seed byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = seed + byte(i*13)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func measure(t *testing.T, base, rel string, opts treesize.Options) treesize.Result {
	t.Helper()
	res, err := treesize.Measure(context.Background(), base, rel, opts)
	if err != nil {
		t.Fatalf("Measure(%q, %q): %v", base, rel, err)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("Measure(%q, %q) failed entries: %v", base, rel, err)
	}
	return res
}

// run runs a command and returns its standard output, failing the test
// with its standard error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// duFind returns what du and find say about path: allocated bytes, apparent
// bytes and entries. Both count a hard-linked inode once and never follow
// symbolic links (du -P is the default).
func duFind(t *testing.T, path string) treesize.Size {
	t.Helper()
	first := func(out string) int64 {
		f := strings.Fields(out)
		if len(f) == 0 {
			t.Fatalf("unexpected du output %q", out)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("unexpected du output %q: %v", out, err)
		}
		return n
	}
	alloc := first(run(t, "du", "-s", "-B1", path))
	apparent := first(run(t, "du", "-s", "-b", path))
	entries := int64(strings.Count(run(t, "find", path), "\n"))
	return treesize.Size{AllocBytes: alloc, ApparentBytes: apparent, Entries: entries}
}

// mixedTree lays out files of various sizes, a sparse file, hard links,
// symbolic links to a big outside file and folder, empty folders, a FIFO
// and a folder large enough to be split into chunks. It returns how many
// entries it laid below tree.
func mixedTree(t *testing.T, tree, outside string) {
	t.Helper()
	for i, size := range []int{0, 1, 511, 512, 4095, 4096, 4097, 65536, 1<<20 + 3} {
		writeFile(t, filepath.Join(tree, "sizes", "f"+strconv.Itoa(i)), size, byte(i))
	}
	// Sparse: 64 MiB apparent, one 4 KiB block written in the middle.
	sparse, err := os.Create(filepath.Join(tree, "sparse.img"))
	must(t, err)
	must(t, sparse.Truncate(64<<20))
	_, err = sparse.WriteAt(bytes.Repeat([]byte{7}, 4096), 10<<20)
	must(t, err)
	must(t, sparse.Close())
	// Hard links: three names of one inode inside the tree, in two folders.
	writeFile(t, filepath.Join(tree, "links", "orig"), 300<<10, 1)
	must(t, os.Link(filepath.Join(tree, "links", "orig"), filepath.Join(tree, "links", "again")))
	must(t, os.MkdirAll(filepath.Join(tree, "other"), 0o755))
	must(t, os.Link(filepath.Join(tree, "links", "orig"), filepath.Join(tree, "other", "third")))
	// A hard link to an inode whose other name is outside the tree.
	writeFile(t, filepath.Join(outside, "shared"), 50<<10, 2)
	must(t, os.Link(filepath.Join(outside, "shared"), filepath.Join(tree, "other", "shared")))
	// Symbolic links: never followed, so the 32 MiB outside never counts.
	writeFile(t, filepath.Join(outside, "big"), 32<<20, 3)
	must(t, os.Symlink(filepath.Join(outside, "big"), filepath.Join(tree, "big-abs")))
	rel, err := filepath.Rel(tree, filepath.Join(outside, "big"))
	must(t, err)
	must(t, os.Symlink(rel, filepath.Join(tree, "big-rel")))
	must(t, os.Symlink(outside, filepath.Join(tree, "outside-dir")))
	must(t, os.Symlink("sizes", filepath.Join(tree, "sizes-link")))
	must(t, os.Symlink("/nonexistent/"+strings.Repeat("x", 200), filepath.Join(tree, "dangling-long")))
	// Empty folders, nested.
	for _, d := range []string{"empty", "nested/a/b/c", "nested/x"} {
		must(t, os.MkdirAll(filepath.Join(tree, d), 0o755))
	}
	must(t, unix.Mkfifo(filepath.Join(tree, "fifo"), 0o644))
	// A folder of 1,500 entries, split into chunks by the walker.
	for i := 0; i < 1500; i++ {
		writeFile(t, filepath.Join(tree, "many", "m"+strconv.Itoa(i)), i%9000, byte(i))
	}
	must(t, os.Chmod(filepath.Join(tree, "nested", "x"), 0o500))
}

// Measure agrees with du and find on a mixed tree, on the real
// node_modules shape, and whichever resolver is used.
func TestMeasureMatchesDuAndFind(t *testing.T) {
	base := t.TempDir()
	outside := t.TempDir()
	mixedTree(t, filepath.Join(base, "mixed"), outside)
	var shapeDir string
	if shape := testtree.ShapePath(); shape != "" {
		shapeDir = filepath.Join(base, "shape")
		testtree.LayShape(t, shape, shapeDir)
	}
	outsideBefore := duFind(t, outside)

	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Run("mixed", func(t *testing.T) {
				path := filepath.Join(base, "mixed")
				want := duFind(t, path)
				// du counts other/shared, whose other link is outside the
				// tree; deleting the tree frees nothing of it.
				var st unix.Stat_t
				must(t, unix.Lstat(filepath.Join(outside, "shared"), &st))
				want.AllocBytes -= st.Blocks * 512
				want.ApparentBytes -= st.Size
				want.SharedBytes = st.Blocks * 512
				got := measure(t, base, "mixed", mode.opts)
				if got.Size != want {
					t.Errorf("Measure = %+v, du/find say %+v", got.Size, want)
				}
				if len(got.Skipped) != 0 {
					t.Errorf("Skipped = %v, want none", got.Skipped)
				}
				// The outside targets are big; make sure the numbers
				// above could tell.
				if got.ApparentBytes >= 32<<20+64<<20 || want.ApparentBytes < 64<<20 {
					t.Errorf("apparent bytes %d: the 32 MiB link target was counted, or the sparse file was not", got.ApparentBytes)
				}
				if got.AllocBytes >= 32<<20 {
					t.Errorf("alloc bytes %d: the 32 MiB link target or the sparse file's holes were counted", got.AllocBytes)
				}
			})
			t.Run("node_modules", func(t *testing.T) {
				if shapeDir == "" {
					t.Skip("../shared/bench/node_modules.shape.tsv.gz not found")
				}
				want := duFind(t, filepath.Join(shapeDir, "node_modules"))
				got := measure(t, shapeDir, "node_modules", mode.opts)
				if got.Size != want {
					t.Errorf("Measure = %+v, du/find say %+v", got.Size, want)
				}
				if want.Entries != 26611 {
					t.Errorf("find counts %d entries in the laid shape, the shape records 26,611", want.Entries)
				}
			})
		})
	}
	if got := duFind(t, outside); got != outsideBefore {
		t.Errorf("outside folder changed: %+v, was %+v", got, outsideBefore)
	}
}

// Mount points inside the tree, a tmpfs and a bind mount of the same
// filesystem, are reported in Skipped and not counted: the totals are what
// they were before the mount points existed.
func TestMeasureSkipsMounts(t *testing.T) {
	for _, mode := range modes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			base := t.TempDir()
			src := t.TempDir()
			tree := filepath.Join(base, "tree")
			testtree.Synthetic(t, tree, 2, 3, 4, 1000)
			writeFile(t, filepath.Join(src, "inside", "big"), 2<<20, 1)
			writeFile(t, filepath.Join(src, "f"), 1000, 2)

			parents := []string{filepath.Join(tree, "d0"), filepath.Join(tree, "d1", "d2")}
			statParents := func() (alloc, apparent int64) {
				for _, p := range parents {
					var st unix.Stat_t
					must(t, unix.Lstat(p, &st))
					alloc += st.Blocks * 512
					apparent += st.Size
				}
				return
			}
			before := measure(t, base, "tree", mode.opts)
			pAlloc, pApparent := statParents()

			tmpfs := filepath.Join(parents[0], "tmp")
			bind := filepath.Join(parents[1], "bind")
			testtree.MountTmpfs(t, tmpfs, "size=8m")
			writeFile(t, filepath.Join(tmpfs, "x", "y"), 3<<20, 3)
			testtree.BindMount(t, src, bind)
			if !strings.Contains(testtree.Fingerprint(t, tree), `"d1/d2/bind/inside/big"`) {
				t.Fatal("the bind mount is not visible in the tree")
			}

			got, err := treesize.Measure(context.Background(), base, "tree", mode.opts)
			if err != nil || got.Err() != nil {
				t.Fatalf("Measure: %v / %v", err, got.Err())
			}
			// Creating the two mount points may have grown their parent
			// folders; nothing else may differ.
			nAlloc, nApparent := statParents()
			want := before.Size
			want.AllocBytes += nAlloc - pAlloc
			want.ApparentBytes += nApparent - pApparent
			if got.Size != want {
				t.Errorf("Measure with mounts = %+v, want %+v (the tree without its mount points)", got.Size, want)
			}
			var skipped []string
			for _, p := range got.Skipped {
				skipped = append(skipped, p.Path)
				if !errors.Is(p.Err, beneath.ErrMountPoint) {
					t.Errorf("Skipped %s with %v, want ErrMountPoint", p.Path, p.Err)
				}
			}
			sort.Strings(skipped)
			if strings.Join(skipped, ",") != "tree/d0/tmp,tree/d1/d2/bind" {
				t.Errorf("Skipped = %v, want [tree/d0/tmp tree/d1/d2/bind]", skipped)
			}

			// Measuring a mount point itself reports it and counts nothing;
			// a path inside one is refused.
			for _, rel := range []string{"tree/d0/tmp", "tree/d1/d2/bind"} {
				res, err := treesize.Measure(context.Background(), base, rel, mode.opts)
				if err != nil {
					t.Errorf("Measure(%s): %v", rel, err)
				}
				if res.Size != (treesize.Size{}) || len(res.Skipped) != 1 || res.Skipped[0].Path != rel {
					t.Errorf("Measure(%s) = %+v skipped %v, want nothing counted and the mount point skipped", rel, res.Size, res.Skipped)
				}
			}
			for _, rel := range []string{"tree/d0/tmp/x", "tree/d1/d2/bind/inside", "tree/d1/d2/bind/f"} {
				res, err := treesize.Measure(context.Background(), base, rel, mode.opts)
				if !errors.Is(err, beneath.ErrMountPoint) {
					t.Errorf("Measure(%s) = %+v, %v; want an error wrapping ErrMountPoint", rel, res.Size, err)
				}
			}
		})
	}
}

// The base itself, a single file, and symbolic links as rel.
func TestMeasureRel(t *testing.T) {
	for _, mode := range modes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			base := t.TempDir()
			outside := t.TempDir()
			testtree.Synthetic(t, filepath.Join(base, "dir"), 2, 2, 3, 5000)
			writeFile(t, filepath.Join(base, "file"), 123457, 1)
			writeFile(t, filepath.Join(outside, "big"), 8<<20, 2)
			must(t, os.Symlink(filepath.Join(outside, "big"), filepath.Join(base, "link-big")))
			must(t, os.Symlink("dir", filepath.Join(base, "link-dir")))
			must(t, os.Symlink(outside, filepath.Join(base, "dir", "d0", "link-out")))

			whole := duFind(t, base)
			for _, rel := range []string{"", ".", "./"} {
				if got := measure(t, base, rel, mode.opts); got.Size != whole {
					t.Errorf("Measure(%q) = %+v, du/find on the base say %+v", rel, got.Size, whole)
				}
			}
			lstat := func(rel string) treesize.Size {
				var st unix.Stat_t
				must(t, unix.Lstat(filepath.Join(base, rel), &st))
				return treesize.Size{AllocBytes: st.Blocks * 512, ApparentBytes: st.Size, Entries: 1}
			}
			for _, rel := range []string{"file", "link-big", "link-dir", "dir/d0/link-out", "dir/d1/f2"} {
				got := measure(t, base, rel, mode.opts)
				if want := lstat(rel); got.Size != want {
					t.Errorf("Measure(%q) = %+v, want %+v (the entry itself)", rel, got.Size, want)
				}
			}
			if got := measure(t, base, "link-big", mode.opts); got.ApparentBytes != int64(len(filepath.Join(outside, "big"))) {
				t.Errorf("link-big apparent size %d, want the length of its target path", got.ApparentBytes)
			}
			if got, want := measure(t, base, "dir/d1", mode.opts), duFind(t, filepath.Join(base, "dir", "d1")); got.Size != want {
				t.Errorf("Measure(dir/d1) = %+v, du/find say %+v", got.Size, want)
			}
			if _, err := treesize.Measure(context.Background(), base, "missing/x", mode.opts); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Measure(missing/x) error %v, want ErrNotExist", err)
			}
			if _, err := treesize.Measure(context.Background(), base, "missing", mode.opts); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Measure(missing) error %v, want ErrNotExist", err)
			}
		})
	}
}

// Hostile rel values are refused before anything is read.
func TestMeasureHostileRel(t *testing.T) {
	for _, mode := range modes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			tmp := t.TempDir()
			base := filepath.Join(tmp, "base")
			testtree.Synthetic(t, filepath.Join(base, "a", "sub"), 1, 2, 2, 100)
			testtree.Synthetic(t, filepath.Join(tmp, "x"), 1, 2, 2, 100)
			must(t, os.Symlink(filepath.Join(base, "a"), filepath.Join(base, "link-in")))
			must(t, os.Symlink(filepath.Join(tmp, "x"), filepath.Join(base, "link-out")))
			must(t, os.Symlink("sub", filepath.Join(base, "a", "link-sub")))
			for _, rel := range []string{"../x", "/etc", "/", "a/../../b", "a/../sub", "..", "a/..", "a/sub/../../../x"} {
				res, err := treesize.Measure(context.Background(), base, rel, mode.opts)
				if !errors.Is(err, beneath.ErrOutside) {
					t.Errorf("Measure(%q) = %+v, %v; want an error wrapping ErrOutside", rel, res.Size, err)
				}
				if res.Entries != 0 {
					t.Errorf("Measure(%q) counted %d entries", rel, res.Entries)
				}
			}
			// "a/link-sub/d0" (a link ending the parent path) is in
			// TestMeasureSymlinkParentIsErrSymlink.
			for _, rel := range []string{"link-in/sub", "link-out/d0", "link-in/sub/d1", "a/link-sub/d0/f1"} {
				res, err := treesize.Measure(context.Background(), base, rel, mode.opts)
				if !errors.Is(err, beneath.ErrSymlink) {
					t.Errorf("Measure(%q) = %+v, %v; want an error wrapping ErrSymlink", rel, res.Size, err)
				}
				if res.Entries != 0 {
					t.Errorf("Measure(%q) counted %d entries", rel, res.Entries)
				}
			}
		})
	}
}

// A rel whose parent path ends in a symbolic link ("a/link/x") is refused
// with ErrSymlink, as beneath promises for any component, in both modes.
func TestMeasureSymlinkParentIsErrSymlink(t *testing.T) {
	for _, mode := range modes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			base := t.TempDir()
			testtree.Synthetic(t, filepath.Join(base, "a", "sub"), 1, 2, 2, 100)
			must(t, os.Symlink("sub", filepath.Join(base, "a", "link-sub")))
			for _, rel := range []string{"a/link-sub/d0", "a/link-sub/f0"} {
				res, err := treesize.Measure(context.Background(), base, rel, mode.opts)
				if !errors.Is(err, beneath.ErrSymlink) {
					t.Errorf("Measure(%q) = %+v, %v; want an error wrapping ErrSymlink", rel, res.Size, err)
				}
			}
		})
	}
}

// deepChain builds base/deep/d/d/... depth folders deep, with a 5,000 byte
// file every 100 levels, using descriptors (the full path is longer than
// PATH_MAX). It returns what the chain holds, as du would count it.
func deepChain(t *testing.T, base string, depth int) treesize.Size {
	t.Helper()
	must(t, os.Mkdir(filepath.Join(base, "deep"), 0o755))
	fd, err := unix.Open(filepath.Join(base, "deep"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	for i := 0; i < depth; i++ {
		must(t, unix.Mkdirat(fd, "d", 0o755))
		if i%100 == 0 {
			f, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			must(t, err)
			_, err = unix.Write(f, bytes.Repeat([]byte{1}, 5000))
			must(t, err)
			unix.Close(f)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		must(t, err)
		unix.Close(fd)
		fd = next
	}
	unix.Close(fd)

	// Sum the stats top-down now that every folder is complete.
	var want treesize.Size
	addStat := func(fd int, name string) {
		var st unix.Stat_t
		must(t, unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW))
		want.AllocBytes += st.Blocks * 512
		want.ApparentBytes += st.Size
		want.Entries++
	}
	addStat(unix.AT_FDCWD, filepath.Join(base, "deep"))
	fd, err = unix.Open(filepath.Join(base, "deep"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	for i := 0; i < depth; i++ {
		addStat(fd, "d")
		if i%100 == 0 {
			addStat(fd, "f")
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		must(t, err)
		unix.Close(fd)
		fd = next
	}
	unix.Close(fd)
	if want.Entries != int64(1+depth+(depth+99)/100) {
		t.Fatalf("built %d entries", want.Entries)
	}
	return want
}

// limitFDs lowers this process's soft RLIMIT_NOFILE so that at most extra
// more descriptors can be open at once, and restores it when the test ends.
// A walker going past its bound then fails with EMFILE instead of passing
// unnoticed. Tests of this package do not run in parallel.
func limitFDs(t *testing.T, extra int) {
	t.Helper()
	var old unix.Rlimit
	must(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
	ents, err := os.ReadDir("/proc/self/fd")
	must(t, err)
	open := map[int]bool{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		// ReadDir's own descriptor is closed by now: keep only open ones.
		if _, ferr := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && ferr == nil {
			open[fd] = true
		}
	}
	// New descriptors take the lowest free numbers below the limit, so
	// the limit is the number below which exactly extra numbers are free.
	limit, free := 0, 0
	for free < extra {
		if !open[limit] {
			free++
		}
		limit++
	}
	lim := old
	lim.Cur = uint64(limit)
	must(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &lim))
	t.Cleanup(func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
}

// A chain of 3,000 nested folders (paths far beyond PATH_MAX) is measured
// exactly with MaxOpenDirs 16, within a hard descriptor budget, and no
// descriptor leaks.
func TestMeasureDeepTree(t *testing.T) {
	base := t.TempDir()
	want := deepChain(t, base, 3000)
	for _, mode := range modes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			opts := mode.opts
			opts.Walk.MaxOpenDirs = 16
			opts.Walk.Workers = 4
			before := testtree.OpenFDs(t)
			// 16 cached folders, the base and the anchor of rel, per worker
			// the folder it works in plus one being opened, and one spare.
			limitFDs(t, 16+2+2*opts.Walk.Workers+1)
			res, err := treesize.Measure(context.Background(), base, "deep", opts)
			if err != nil {
				t.Fatalf("Measure: %v", err)
			}
			if res.Err() != nil {
				t.Errorf("Measure went past its descriptor budget: %v", res.Err())
			}
			if res.Size != want {
				t.Errorf("Measure = %+v, want %+v", res.Size, want)
			}
			if after := testtree.OpenFDs(t); after != before {
				t.Errorf("open descriptors: %d before, %d after", before, after)
			}
		})
	}
}

// Each folder of a deep chain should be opened a bounded number of times,
// whatever the depth. A walker that reopens an evicted parent by walking
// down from the top again opens the top folders once per MaxOpenDirs
// levels, and the walk of a chain becomes quadratic in its depth.
func TestMeasureDeepTreeOpensTopFoldersFewTimes(t *testing.T) {
	const depth = 1000
	base := t.TempDir()
	want := deepChain(t, base, depth)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	must(t, err)
	defer unix.Close(fd)
	labels := map[int32]string{}
	for i, rel := range []string{"deep/d", "deep/d/d", "deep/d/d/d/d/d"} {
		wd, err := unix.InotifyAddWatch(fd, filepath.Join(base, rel), unix.IN_OPEN|unix.IN_ONLYDIR)
		must(t, err)
		labels[int32(wd)] = []string{"depth 1", "depth 2", "depth 5"}[i]
	}
	res := measure(t, base, "deep", treesize.Options{Walk: dirwalk.Options{MaxOpenDirs: 16}})
	if res.Size != want {
		t.Fatalf("Measure = %+v, want %+v", res.Size, want)
	}
	opens := map[string]int{}
	buf := make([]byte, 1<<20)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EAGAIN {
			break
		}
		must(t, err)
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				t.Fatal("inotify queue overflowed")
			}
			if ev.Mask&unix.IN_OPEN != 0 {
				opens[labels[ev.Wd]]++
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
	for _, label := range []string{"depth 1", "depth 2", "depth 5"} {
		if opens[label] < 1 || opens[label] > 4 {
			t.Errorf("the folder at %s of a %d-deep chain was opened %d times, want 1 to 4", label, depth, opens[label])
		}
	}
}

// Cancelling the context stops the walk and returns the cancellation.
func TestMeasureCancelled(t *testing.T) {
	base := t.TempDir()
	testtree.Synthetic(t, filepath.Join(base, "t"), 2, 3, 3, 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := treesize.Measure(ctx, base, "t", treesize.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Measure with a cancelled context = %+v, %v; want context.Canceled", res.Size, err)
	}
}

// BenchmarkMeasure sizes the recorded node_modules shape.
func BenchmarkMeasure(b *testing.B) {
	shape := testtree.ShapePath()
	if shape == "" {
		b.Skip("../shared/bench/node_modules.shape.tsv.gz not found")
	}
	base := b.TempDir()
	testtree.LayShape(b, shape, base)
	var entries int64
	start := time.Now()
	n := 0
	for b.Loop() {
		res, err := treesize.Measure(context.Background(), base, "node_modules", treesize.Options{})
		if err != nil || res.Err() != nil {
			b.Fatal(err, res.Err())
		}
		entries += res.Entries
		n++
	}
	if n > 0 && entries != int64(n)*26611 {
		b.Errorf("measured %d entries in %d runs, want 26,611 each", entries, n)
	}
	b.ReportMetric(float64(entries)/time.Since(start).Seconds(), "entries/s")
}
