package deletion_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/deletion"
	"github.com/reclaimer/reclaimer/internal/dirwalk"
	"github.com/reclaimer/reclaimer/internal/testtree"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

// modes runs a test with the openat2 resolver and with the fallback walk.
func modes(t *testing.T, f func(t *testing.T, opts deletion.Options)) {
	t.Run("openat2", func(t *testing.T) {
		if !beneath.HaveOpenat2() {
			t.Skip("kernel has no openat2")
		}
		f(t, deletion.Options{})
	})
	t.Run("fallback", func(t *testing.T) {
		f(t, deletion.Options{Walk: dirwalk.Options{Resolver: beneath.Resolver{Fallback: true}}})
	})
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

func gone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("%s still exists (err %v)", path, err)
	}
}

func TestLinksAreUnlinkedNeverFollowed(t *testing.T) {
	modes(t, func(t *testing.T, opts deletion.Options) {
		dir := t.TempDir()
		outside := filepath.Join(dir, "outside")
		base := filepath.Join(dir, "base")
		write(t, filepath.Join(outside, "secret.txt"), "keep me")
		write(t, filepath.Join(outside, "tree", "a", "b.txt"), "keep me too")
		write(t, filepath.Join(base, "sibling", "notes.md"), "a sibling inside the base")
		target := filepath.Join(base, "victim")
		write(t, filepath.Join(target, "src", "main.go"), "package main")
		symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(target, "to-file"))
		symlink(t, filepath.Join(outside, "tree"), filepath.Join(target, "to-dir"))
		symlink(t, "../../sibling", filepath.Join(target, "src", "to-sibling"))
		symlink(t, "loop2", filepath.Join(target, "loop1"))
		symlink(t, "loop1", filepath.Join(target, "loop2"))
		symlink(t, "/", filepath.Join(target, "to-root"))
		symlink(t, filepath.Join(outside, "tree"), filepath.Join(target, ".cache")) // a planted cache link
		before := testtree.Fingerprint(t, outside)
		sibling := testtree.Fingerprint(t, filepath.Join(base, "sibling"))

		res, err := deletion.Delete(context.Background(), base, "victim", opts)
		if err != nil || res.Err() != nil {
			t.Fatalf("delete: %v / %v", err, res.Err())
		}
		gone(t, target)
		if got := testtree.Fingerprint(t, outside); got != before {
			t.Fatalf("outside changed:\n%s\nwas\n%s", got, before)
		}
		if got := testtree.Fingerprint(t, filepath.Join(base, "sibling")); got != sibling {
			t.Fatal("sibling inside the base changed")
		}
		// victim, src, main.go and 7 links.
		if res.Removed != 10 {
			t.Fatalf("removed %d entries, want 10", res.Removed)
		}
	})
}

func TestTargetThatIsALinkIsUnlinkedOnly(t *testing.T) {
	modes(t, func(t *testing.T, opts deletion.Options) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "outside", "f"), "data")
		symlink(t, filepath.Join(dir, "outside"), filepath.Join(dir, "base", "link"))
		res, err := deletion.Delete(context.Background(), filepath.Join(dir, "base"), "link", opts)
		if err != nil || res.Removed != 1 {
			t.Fatalf("delete link: %v, removed %d", err, res.Removed)
		}
		gone(t, filepath.Join(dir, "base", "link"))
		if b, err := os.ReadFile(filepath.Join(dir, "outside", "f")); err != nil || string(b) != "data" {
			t.Fatalf("target of the link harmed: %q %v", b, err)
		}
	})
}

func TestHostilePathsAreRefused(t *testing.T) {
	modes(t, func(t *testing.T, opts deletion.Options) {
		dir := t.TempDir()
		base := filepath.Join(dir, "base")
		write(t, filepath.Join(dir, "outside", "x", "f"), "data")
		write(t, filepath.Join(base, "in", "f"), "data")
		symlink(t, filepath.Join(dir, "outside"), filepath.Join(base, "link"))
		symlink(t, "in", filepath.Join(base, "rel-link"))
		before := testtree.Fingerprint(t, dir)
		for _, tc := range []struct {
			rel  string
			want error
		}{
			{"../outside/x", beneath.ErrOutside},
			{"in/../../outside", beneath.ErrOutside},
			{"/etc", beneath.ErrOutside},
			{"", deletion.ErrBase},
			{".", deletion.ErrBase},
			{"link/x", beneath.ErrSymlink},
			{"rel-link/f", beneath.ErrSymlink},
		} {
			_, err := deletion.Delete(context.Background(), base, tc.rel, opts)
			if !errors.Is(err, tc.want) {
				t.Errorf("Delete(%q) = %v, want %v", tc.rel, err, tc.want)
			}
		}
		if got := testtree.Fingerprint(t, dir); got != before {
			t.Fatal("a refused deletion changed something")
		}
		// A path that does not exist is already deleted.
		if res, err := deletion.Delete(context.Background(), base, "in/missing", opts); err != nil || res.Removed != 0 {
			t.Fatalf("missing path: %v, %d", err, res.Removed)
		}
	})
}

func TestMountPointsAreSkippedAndReported(t *testing.T) {
	modes(t, func(t *testing.T, opts deletion.Options) {
		dir := t.TempDir()
		base := filepath.Join(dir, "base")
		outside := filepath.Join(dir, "outside")
		write(t, filepath.Join(outside, "checkout", "main.go"), "package main // the user's own work")
		target := filepath.Join(base, "victim")
		write(t, filepath.Join(target, "node_modules", "x", "index.js"), "module.exports = 1")
		write(t, filepath.Join(target, "workspace", "keep-parent", "other.txt"), "removable")
		// A bind mount of a folder on the same filesystem: st_dev cannot
		// see it, only the mount id can.
		testtree.BindMount(t, filepath.Join(outside, "checkout"), filepath.Join(target, "workspace", "keep-parent", "checkout"))
		// And another filesystem.
		tmpfs := filepath.Join(target, "scratch")
		testtree.MountTmpfs(t, tmpfs, "size=1m")
		write(t, filepath.Join(tmpfs, "data.bin"), "on tmpfs")
		before := testtree.Fingerprint(t, outside)

		res, err := deletion.Delete(context.Background(), base, "victim", opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.SkippedCount != 2 || res.FailedCount != 0 {
			t.Fatalf("skipped %d (%v), failed %d (%v); want 2 skipped, 0 failed", res.SkippedCount, res.Skipped, res.FailedCount, res.Failed)
		}
		for _, p := range res.Skipped {
			if !errors.Is(p.Err, beneath.ErrMountPoint) {
				t.Errorf("skipped %s for %v", p.Path, p.Err)
			}
		}
		if got := testtree.Fingerprint(t, outside); got != before {
			t.Fatal("the bind-mounted checkout changed")
		}
		if b, err := os.ReadFile(filepath.Join(tmpfs, "data.bin")); err != nil || string(b) != "on tmpfs" {
			t.Fatalf("tmpfs content harmed: %v", err)
		}
		gone(t, filepath.Join(target, "node_modules"))
		gone(t, filepath.Join(target, "workspace", "keep-parent", "other.txt"))
		// The parents of the mount points stay; nothing else does.
		if _, err := os.Stat(filepath.Join(target, "workspace", "keep-parent", "checkout", "main.go")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTargetThatIsAMountPointIsSkipped(t *testing.T) {
	modes(t, func(t *testing.T, opts deletion.Options) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "outside", "f"), "data")
		testtree.BindMount(t, filepath.Join(dir, "outside"), filepath.Join(dir, "base", "mnt"))
		res, err := deletion.Delete(context.Background(), filepath.Join(dir, "base"), "mnt", opts)
		if err != nil || res.SkippedCount != 1 || res.Removed != 0 {
			t.Fatalf("err %v, skipped %d, removed %d", err, res.SkippedCount, res.Removed)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "outside", "f")); string(b) != "data" {
			t.Fatal("mounted folder harmed")
		}
	})
}

func TestOddEntries(t *testing.T) {
	modes(t, func(t *testing.T, opts deletion.Options) {
		dir := t.TempDir()
		base := filepath.Join(dir, "base")
		target := filepath.Join(base, "victim")
		write(t, filepath.Join(target, "plain"), "x")
		if err := unix.Mkfifo(filepath.Join(target, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("unix", filepath.Join(target, "sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := unix.Mknod(filepath.Join(target, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Logf("no device node (%v): covered only where mknod is allowed", err)
			write(t, filepath.Join(target, "null"), "stand-in")
		}
		write(t, filepath.Join(target, "bad-\xff\xfe-utf8", "f\x80"), "non-UTF-8 names")
		long := strings.Repeat("n", 255)
		write(t, filepath.Join(target, long, long), "255-byte names")
		write(t, filepath.Join(target, "empty-dir", ".keep"), "")
		// Hard links: two inside (counted once), one shared with a file
		// outside, which must survive.
		write(t, filepath.Join(target, "big"), strings.Repeat("b", 64<<10))
		if err := os.Link(filepath.Join(target, "big"), filepath.Join(target, "big-link")); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "outside", "shared"), "shared content")
		if err := os.Link(filepath.Join(dir, "outside", "shared"), filepath.Join(target, "shared-link")); err != nil {
			t.Fatal(err)
		}
		want, err := treesize.Measure(context.Background(), base, "victim", treesize.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := deletion.Delete(context.Background(), base, "victim", opts)
		if err != nil || res.Err() != nil {
			t.Fatalf("%v / %v", err, res.Err())
		}
		gone(t, target)
		if b, err := os.ReadFile(filepath.Join(dir, "outside", "shared")); err != nil || string(b) != "shared content" {
			t.Fatal("hard-linked file outside harmed")
		}
		if res.FreedBytes != want.AllocBytes {
			t.Fatalf("freed %d bytes, the tree held %d", res.FreedBytes, want.AllocBytes)
		}
		if res.Removed != want.Entries {
			t.Fatalf("removed %d entries, the tree held %d", res.Removed, want.Entries)
		}
	})
}

func TestDeepTreeBoundedDescriptors(t *testing.T) {
	modes(t, func(t *testing.T, opts deletion.Options) {
		const depth = 10000
		base := t.TempDir()
		// Build the chain descriptor-relative: its paths exceed PATH_MAX.
		fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < depth; i++ {
			if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
				t.Fatal(err)
			}
			if i%1000 == 0 {
				f, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				unix.Close(f)
			}
			next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(fd)
			fd = next
		}
		unix.Close(fd)
		fds := testtree.OpenFDs(t)
		opts.Walk.MaxOpenDirs = 64
		res, err := deletion.Delete(context.Background(), base, "d", opts)
		if err != nil || res.Err() != nil {
			t.Fatalf("%v / %v", err, res.Err())
		}
		// The first file went into base itself, outside the chain.
		if want := int64(depth + depth/1000 - 1); res.Removed != want {
			t.Fatalf("removed %d, want %d", res.Removed, want)
		}
		gone(t, filepath.Join(base, "d"))
		if got := testtree.OpenFDs(t); got != fds {
			t.Fatalf("%d descriptors open after, %d before", got, fds)
		}
	})
}

func TestLargeFlatDirectoryInChunks(t *testing.T) {
	modes(t, func(t *testing.T, opts deletion.Options) {
		base := t.TempDir()
		n := testtree.Synthetic(t, filepath.Join(base, "flat"), 0, 0, 5000, 10)
		opts.Walk.ChunkSize = 100
		res, err := deletion.Delete(context.Background(), base, "flat", opts)
		if err != nil || res.Err() != nil {
			t.Fatalf("%v / %v", err, res.Err())
		}
		if res.Removed != int64(n+1) {
			t.Fatalf("removed %d, want %d", res.Removed, n+1)
		}
		gone(t, filepath.Join(base, "flat"))
	})
}

// TestTreeChangingWhileDeleted runs writers that keep creating files and
// folders, and removers that delete entries, while the tree is deleted.
// Whatever races happen, nothing outside is touched, vanished entries are
// not failures, and a second pass after the writers stop removes the rest.
func TestTreeChangingWhileDeleted(t *testing.T) {
	modes(t, func(t *testing.T, opts deletion.Options) {
		dir := t.TempDir()
		base := filepath.Join(dir, "base")
		write(t, filepath.Join(dir, "outside", "f"), "keep")
		testtree.Synthetic(t, filepath.Join(base, "victim"), 3, 6, 20, 100)
		symlink(t, filepath.Join(dir, "outside"), filepath.Join(base, "victim", "d0", "link"))
		before := testtree.Fingerprint(t, filepath.Join(dir, "outside"))

		var stop atomic.Bool
		var wg sync.WaitGroup
		for w := 0; w < 2; w++ {
			wg.Add(2)
			go func(w int) { // writer
				defer wg.Done()
				for i := 0; i < 3000 && !stop.Load(); i++ {
					d := filepath.Join(base, "victim", fmt.Sprintf("d%d", i%6), fmt.Sprintf("d%d", i%5))
					_ = os.Mkdir(filepath.Join(d, fmt.Sprintf("new-%d-%d", w, i)), 0o755)
					_ = os.WriteFile(filepath.Join(d, fmt.Sprintf("new-%d-%d.txt", w, i)), []byte("late"), 0o644)
				}
			}(w)
			go func(w int) { // remover
				defer wg.Done()
				for i := 0; i < 3000 && !stop.Load(); i++ {
					_ = os.Remove(filepath.Join(base, "victim", fmt.Sprintf("d%d", (i+w)%6), "f"+fmt.Sprint(i%20)))
				}
			}(w)
		}
		_, err := deletion.Delete(context.Background(), base, "victim", opts)
		stop.Store(true)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		res, err := deletion.Delete(context.Background(), base, "victim", opts)
		if err != nil || res.Err() != nil {
			t.Fatalf("second pass: %v / %v", err, res.Err())
		}
		gone(t, filepath.Join(base, "victim"))
		if got := testtree.Fingerprint(t, filepath.Join(dir, "outside")); got != before {
			t.Fatal("outside changed")
		}
	})
}

func TestCancelledDeletionLeavesTheRestAndResumes(t *testing.T) {
	base := t.TempDir()
	n := testtree.Synthetic(t, filepath.Join(base, "victim"), 3, 8, 10, 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := deletion.Delete(ctx, base, "victim", deletion.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if left := testtree.CountEntries(t, filepath.Join(base, "victim")); left == 0 || left > n {
		t.Fatalf("%d entries left of %d", left, n)
	}
	res, err := deletion.Delete(context.Background(), base, "victim", deletion.Options{})
	if err != nil || res.Err() != nil {
		t.Fatalf("%v / %v", err, res.Err())
	}
	gone(t, filepath.Join(base, "victim"))
}

// TestReadOnlyFoldersAsUnprivilegedUser re-runs the test binary as user
// nobody: as root every permission check passes and proves nothing.
func TestReadOnlyFoldersAsUnprivilegedUser(t *testing.T) {
	if dir := os.Getenv("RECLAIMER_NONROOT_TREE"); dir != "" {
		res, err := deletion.Delete(context.Background(), dir, "victim", deletion.Options{})
		if err != nil || res.Err() != nil {
			t.Fatalf("%v / %v", err, res.Err())
		}
		gone(t, filepath.Join(dir, "victim"))
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user")
	}
	const nobody = 65534
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	base := filepath.Join(dir, "base")
	victim := filepath.Join(base, "victim")
	write(t, filepath.Join(victim, "ro", "file"), "x")
	write(t, filepath.Join(victim, "ro", "sub", "file"), "x")
	write(t, filepath.Join(victim, "locked", "inner", "file"), "x")
	write(t, filepath.Join(victim, "ro-file"), "x")
	if err := filepath.Walk(base, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	}); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{
		"ro/sub": 0o500, "ro": 0o500, "locked/inner": 0o000, "locked": 0o000, "ro-file": 0o400,
	} {
		if err := os.Chmod(filepath.Join(victim, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary sits in a folder only root may enter: run a copy.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "deletion.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestReadOnlyFoldersAsUnprivilegedUser$", "-test.v")
	cmd.Env = append(os.Environ(), "RECLAIMER_NONROOT_TREE="+base)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("the unprivileged run did not pass:\n%s", out)
	}
	gone(t, victim)
}

func BenchmarkDeleteNodeModules(b *testing.B) {
	shape := testtree.ShapePath()
	if shape == "" {
		b.Skip("../shared/bench/node_modules.shape.tsv.gz not found")
	}
	dir := b.TempDir()
	template := filepath.Join(dir, "template")
	entries := testtree.LayShape(b, shape, template)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if out, err := exec.Command("cp", "-a", template, filepath.Join(dir, "victim")).CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		_ = exec.Command("sync").Run()
		b.StartTimer()
		res, err := deletion.Delete(context.Background(), dir, "victim", deletion.Options{})
		if err != nil || res.Err() != nil {
			b.Fatal(err, res.Err())
		}
	}
	b.ReportMetric(float64(entries)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

var write = testtree.Write
