package trash_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/deletion"
	"github.com/reclaimer/reclaimer/internal/dirwalk"
	"github.com/reclaimer/reclaimer/internal/testtree"
	"github.com/reclaimer/reclaimer/internal/trash"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

// A discarded tree is renamed away at once, purged in the background, and
// the bytes the purger reports freed are the allocated bytes treesize
// measured beforehand.
func TestDiscardDrainFreesMeasuredBytes(t *testing.T) {
	for _, mode := range resolverModes {
		t.Run(mode.name, func(t *testing.T) {
			root := t.TempDir()
			tree := filepath.Join(root, "ws", "node_modules")
			n := testtree.Synthetic(t, tree, 3, 4, 5, 3000)
			writeFile(t, filepath.Join(root, "ws", "keep.txt"), 10000, 1)
			keepFP := testtree.Fingerprint(t, filepath.Join(root, "ws", "keep.txt"))

			before, err := treesize.Measure(context.Background(), root, "ws/node_modules", treesize.Options{})
			if err != nil || before.Err() != nil {
				t.Fatalf("Measure: %v / %v", err, before.Err())
			}
			if before.Entries != int64(n)+1 {
				t.Fatalf("Measure counted %d entries, Synthetic laid %d plus the root", before.Entries, n)
			}

			log := newPurgeLog()
			tr := openTrash(t, root, trash.Options{OnPurged: log.add, Resolver: mode.r})
			name, err := tr.Discard(tree)
			if err != nil {
				t.Fatalf("Discard: %v", err)
			}
			mustNotExist(t, tree)
			if err := drain(t, tr); err != nil {
				t.Fatalf("Drain: %v", err)
			}
			if got := trashNames(t, root); len(got) != 0 {
				t.Errorf("trash holds %v after Drain, want nothing", got)
			}
			mustNotExist(t, filepath.Join(root, trash.DirName, name))
			mustNotExist(t, tree)
			if got := tr.FreedBytes(); got <= 0 || got != before.AllocBytes {
				t.Errorf("FreedBytes = %d, want %d (treesize.Measure's AllocBytes)", got, before.AllocBytes)
			}
			if tr.Pending() != 0 {
				t.Errorf("Pending = %d after Drain", tr.Pending())
			}
			purged := log.waitFor(t, 1)
			if len(purged) != 1 {
				t.Fatalf("OnPurged called %d times, want 1: %+v", len(purged), purged)
			}
			p := purged[0]
			if p.Name != name || p.Origin != tree || p.Err != nil {
				t.Errorf("OnPurged got {Name %q Origin %q Err %v}, want {Name %q Origin %q Err nil}", p.Name, p.Origin, p.Err, name, tree)
			}
			if p.Result.Removed != before.Entries || p.Result.FreedBytes != before.AllocBytes {
				t.Errorf("purge result removed %d entries / freed %d bytes, want %d / %d",
					p.Result.Removed, p.Result.FreedBytes, before.Entries, before.AllocBytes)
			}
			if got := testtree.Fingerprint(t, filepath.Join(root, "ws", "keep.txt")); got != keepFP {
				t.Errorf("sibling file changed:\n%s\nwant\n%s", got, keepFP)
			}
		})
	}
}

// Discard also takes a path relative to the root.
func TestDiscardRelativePath(t *testing.T) {
	root := t.TempDir()
	testtree.Synthetic(t, filepath.Join(root, "a", "b"), 1, 2, 2, 100)
	log := newPurgeLog()
	tr := openTrash(t, root, trash.Options{OnPurged: log.add})
	if _, err := tr.Discard("a/b"); err != nil {
		t.Fatalf("Discard(a/b): %v", err)
	}
	if err := drain(t, tr); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, filepath.Join(root, "a", "b"))
	if _, err := os.Stat(filepath.Join(root, "a")); err != nil {
		t.Errorf("parent of the discarded path is gone: %v", err)
	}
	if p := log.waitFor(t, 1); len(p) != 1 || p[0].Origin != "a/b" {
		t.Errorf("OnPurged got %+v, want one call with Origin a/b", p)
	}
}

// Two hard links to one inode inside the discarded tree free its blocks
// once: FreedBytes must equal treesize's AllocBytes, which counts them once.
func TestDiscardFreedBytesCountsHardLinksOnce(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "ws")
	writeFile(t, filepath.Join(tree, "big"), 1<<20, 3)
	if err := os.Link(filepath.Join(tree, "big"), filepath.Join(tree, "big.link")); err != nil {
		t.Fatal(err)
	}
	mkdirAll(t, filepath.Join(tree, "sub"))
	if err := os.Link(filepath.Join(tree, "big"), filepath.Join(tree, "sub", "big.link2")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tree, "small"), 5000, 4)

	before, err := treesize.Measure(context.Background(), root, "ws", treesize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := newPurgeLog()
	tr := openTrash(t, root, trash.Options{OnPurged: log.add})
	if _, err := tr.Discard(tree); err != nil {
		t.Fatal(err)
	}
	if err := drain(t, tr); err != nil {
		t.Fatal(err)
	}
	if got := trashNames(t, root); len(got) != 0 {
		t.Fatalf("trash holds %v", got)
	}
	if got := tr.FreedBytes(); got != before.AllocBytes {
		t.Errorf("FreedBytes = %d, want %d: the 1 MiB inode behind three hard links was counted %.2f times",
			got, before.AllocBytes, 1+float64(got-before.AllocBytes)/float64(1<<20))
	}
}

// Every refused Discard leaves the root byte for byte as it was.
func TestDiscardRefusalsMoveNothing(t *testing.T) {
	for _, mode := range resolverModes {
		t.Run(mode.name, func(t *testing.T) {
			tmp := t.TempDir()
			root := filepath.Join(tmp, "root")
			outside := filepath.Join(tmp, "outside")
			testtree.Synthetic(t, filepath.Join(root, "dir"), 1, 2, 2, 1000)
			writeFile(t, filepath.Join(outside, "x"), 2000, 5)
			writeFile(t, filepath.Join(outside, "bindsrc", "d", "f"), 3000, 6)
			symlink(t, filepath.Join(root, "dir"), filepath.Join(root, "linkin"))
			symlink(t, "dir", filepath.Join(root, "linkrel"))
			symlink(t, outside, filepath.Join(root, "linkout"))
			symlink(t, "../linkin", filepath.Join(root, "dir", "uplink"))
			testtree.MountTmpfs(t, filepath.Join(root, "tmpmnt"), "size=4m")
			writeFile(t, filepath.Join(root, "tmpmnt", "sub", "f"), 4000, 7)
			testtree.BindMount(t, filepath.Join(outside, "bindsrc"), filepath.Join(root, "bindmnt"))

			tr := openTrash(t, root, trash.Options{Resolver: mode.r})
			rootFP := testtree.Fingerprint(t, root)
			tmpfsFP := testtree.Fingerprint(t, filepath.Join(root, "tmpmnt"))
			outsideFP := testtree.Fingerprint(t, outside)
			if !strings.Contains(rootFP, `"bindmnt/d/f"`) || !strings.Contains(rootFP, `"tmpmnt" `) {
				t.Fatalf("fixture is not as expected:\n%s", rootFP)
			}

			for _, c := range []struct {
				name string
				path string
				want []error // every one must be wrapped; none means any error
			}{
				{"symlink to a dir inside root", filepath.Join(root, "linkin"), []error{beneath.ErrSymlink}},
				{"relative symlink inside root", filepath.Join(root, "linkrel"), []error{beneath.ErrSymlink}},
				{"symlink to outside", filepath.Join(root, "linkout"), []error{beneath.ErrSymlink}},
				{"symlink pointing up", filepath.Join(root, "dir", "uplink"), []error{beneath.ErrSymlink}},
				{"symlink component inside root", filepath.Join(root, "linkin", "d0"), []error{beneath.ErrSymlink}},
				{"symlink component to outside", filepath.Join(root, "linkout", "x"), []error{beneath.ErrSymlink}},
				// Refused, but see TestDiscardSymlinkParentIsErrSymlink for the error.
				{"symlink ending the parent path", filepath.Join(root, "dir", "uplink", "d0"), nil},
				{"symlink inside the parent path", filepath.Join(root, "dir", "uplink", "d0", "f0"), []error{beneath.ErrSymlink}},
				{"absolute path elsewhere", filepath.Join(outside, "x"), []error{beneath.ErrOutside}},
				{"absolute path climbing out", root + "/dir/../../outside/x", []error{beneath.ErrOutside}},
				{"relative ../x", "../outside/x", []error{beneath.ErrOutside}},
				{"prefix-sharing sibling", root + "x", []error{beneath.ErrOutside}},
				{"the root itself", root, nil},
				{"the root with a trailing slash", root + "/", nil},
				{"the root as .", ".", nil},
				{"the trash folder", filepath.Join(root, trash.DirName), nil},
				{"the trash folder, relative", trash.DirName + "/", nil},
				{"tmpfs mount point", filepath.Join(root, "tmpmnt"), []error{trash.ErrCrossDevice, beneath.ErrMountPoint}},
				{"dir inside the tmpfs", filepath.Join(root, "tmpmnt", "sub"), []error{trash.ErrCrossDevice}},
				{"file inside the tmpfs", filepath.Join(root, "tmpmnt", "sub", "f"), []error{trash.ErrCrossDevice}},
				{"bind mount point", filepath.Join(root, "bindmnt"), []error{trash.ErrCrossDevice, beneath.ErrMountPoint}},
				{"dir inside the bind mount", filepath.Join(root, "bindmnt", "d"), []error{trash.ErrCrossDevice, beneath.ErrMountPoint}},
				{"file inside the bind mount", filepath.Join(root, "bindmnt", "d", "f"), []error{trash.ErrCrossDevice, beneath.ErrMountPoint}},
				{"missing path", filepath.Join(root, "nope"), []error{os.ErrNotExist}},
				{"missing parent", filepath.Join(root, "nope", "x"), []error{os.ErrNotExist}},
			} {
				name, err := tr.Discard(c.path)
				if err == nil {
					t.Errorf("%s: Discard(%q) = %q, want an error", c.name, c.path, name)
				}
				for _, want := range c.want {
					if !errors.Is(err, want) {
						t.Errorf("%s: Discard(%q) error %v does not wrap %q", c.name, c.path, err, want)
					}
				}
				if got := trashNames(t, root); len(got) != 0 {
					t.Fatalf("%s: the trash received %v", c.name, got)
				}
				if got := testtree.Fingerprint(t, root); got != rootFP {
					t.Fatalf("%s: root changed:\n%s\nwant\n%s", c.name, got, rootFP)
				}
				if got := testtree.Fingerprint(t, filepath.Join(root, "tmpmnt")); got != tmpfsFP {
					t.Fatalf("%s: tmpfs changed:\n%s\nwant\n%s", c.name, got, tmpfsFP)
				}
				if got := testtree.Fingerprint(t, outside); got != outsideFP {
					t.Fatalf("%s: outside changed:\n%s\nwant\n%s", c.name, got, outsideFP)
				}
			}
			if n := tr.Pending(); n != 0 {
				t.Errorf("Pending = %d after refusals only", n)
			}
			if err := drain(t, tr); err != nil {
				t.Errorf("Drain: %v", err)
			}
		})
	}
}

// A symbolic link that ends the parent path of a deeper path ("dir/link"
// of "dir/link/x") is reported as ErrSymlink, as the package contract says
// for any component, in both resolver modes.
func TestDiscardSymlinkParentIsErrSymlink(t *testing.T) {
	for _, mode := range resolverModes {
		t.Run(mode.name, func(t *testing.T) {
			root := t.TempDir()
			testtree.Synthetic(t, filepath.Join(root, "dir"), 1, 2, 1, 10)
			symlink(t, "d0", filepath.Join(root, "dir", "link"))
			symlink(t, filepath.Join(root, "dir"), filepath.Join(root, "top"))
			tr := openTrash(t, root, trash.Options{Resolver: mode.r})
			fp := testtree.Fingerprint(t, root)
			for _, rel := range []string{"top/d0", "dir/link/f0", "dir/d1/../link/f0"} {
				_, err := tr.Discard(filepath.Join(root, rel))
				if !errors.Is(err, beneath.ErrSymlink) {
					t.Errorf("Discard(%s) = %v, want an error wrapping ErrSymlink", rel, err)
				}
			}
			if got := testtree.Fingerprint(t, root); got != fp {
				t.Errorf("root changed:\n%s\nwant\n%s", got, fp)
			}
		})
	}
}

// A trash whose root was given as a relative path must still accept the
// absolute spelling of a path inside it.
func TestDiscardAbsolutePathWithRelativeRoot(t *testing.T) {
	tmp := t.TempDir()
	t.Chdir(tmp)
	writeFile(t, filepath.Join(tmp, "root", "ws", "f"), 100, 1)
	tr := openTrash(t, "root", trash.Options{})
	if _, err := tr.Discard(filepath.Join(tmp, "root", "ws")); err != nil {
		t.Fatalf("Discard of an absolute path inside the relative root %q: %v", tr.Root(), err)
	}
	if err := drain(t, tr); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, filepath.Join(tmp, "root", "ws"))
}

// Open refuses a trash folder that is a symbolic link or a mount point, and
// never purges what it holds.
func TestOpenRefusesUnsafeTrashFolder(t *testing.T) {
	for _, mode := range resolverModes {
		t.Run(mode.name+"/symlink", func(t *testing.T) {
			tmp := t.TempDir()
			root := filepath.Join(tmp, "root")
			outside := filepath.Join(tmp, "outside")
			testtree.Synthetic(t, outside, 1, 2, 3, 500)
			fp := testtree.Fingerprint(t, outside)
			symlink(t, outside, filepath.Join(root, trash.DirName))
			tr, err := trash.Open(root, trash.Options{Resolver: mode.r})
			if err == nil {
				_ = tr.Close()
				t.Fatal("Open accepted a trash folder that is a symbolic link")
			}
			if !errors.Is(err, beneath.ErrSymlink) {
				t.Errorf("Open error %v does not wrap ErrSymlink", err)
			}
			if got := testtree.Fingerprint(t, outside); got != fp {
				t.Errorf("the link's target changed:\n%s\nwant\n%s", got, fp)
			}
		})
		t.Run(mode.name+"/bind mount", func(t *testing.T) {
			tmp := t.TempDir()
			root := filepath.Join(tmp, "root")
			outside := filepath.Join(tmp, "outside")
			testtree.Synthetic(t, outside, 1, 2, 3, 500)
			fp := testtree.Fingerprint(t, outside)
			testtree.BindMount(t, outside, filepath.Join(root, trash.DirName))
			tr, err := trash.Open(root, trash.Options{Resolver: mode.r})
			if err == nil {
				_ = tr.Close()
				t.Fatal("Open accepted a trash folder that is a bind mount")
			}
			if !errors.Is(err, beneath.ErrMountPoint) {
				t.Errorf("Open error %v does not wrap ErrMountPoint", err)
			}
			if got := testtree.Fingerprint(t, outside); got != fp {
				t.Errorf("the mount's source changed:\n%s\nwant\n%s", got, fp)
			}
		})
	}
}

// Whatever an earlier process left in the trash is purged by the next Open.
func TestOpenPurgesLeftovers(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, trash.DirName)
	n := testtree.Synthetic(t, filepath.Join(dir, "1700000000000000000-00112233aabbccdd"), 2, 3, 4, 2500)
	writeFile(t, filepath.Join(dir, "stray-file"), 7000, 2)
	symlink(t, root, filepath.Join(dir, "stray-link"))
	// A half-deleted entry with a read-only directory and an unreadable one.
	writeFile(t, filepath.Join(dir, "half", "ro", "f"), 100, 3)
	writeFile(t, filepath.Join(dir, "half", "noread", "g"), 100, 3)
	if err := os.Chmod(filepath.Join(dir, "half", "ro"), 0o500); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "half", "noread"), 0); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "keep", "k"), 300, 4)
	keepFP := testtree.Fingerprint(t, filepath.Join(root, "keep"))

	var want int64
	for _, name := range []string{"1700000000000000000-00112233aabbccdd", "stray-file", "stray-link", "half"} {
		m, err := treesize.Measure(context.Background(), dir, name, treesize.Options{})
		if err != nil || m.Err() != nil {
			t.Fatalf("Measure %s: %v / %v", name, err, m.Err())
		}
		want += m.AllocBytes
	}
	if got := testtree.CountEntries(t, dir); got != n+1+1+1+5 {
		t.Fatalf("fixture has %d entries in the trash", got)
	}

	log := newPurgeLog()
	tr := openTrash(t, root, trash.Options{OnPurged: log.add})
	if err := drain(t, tr); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if got := trashNames(t, root); len(got) != 0 {
		t.Errorf("trash holds %v after Drain", got)
	}
	if got := tr.FreedBytes(); got != want {
		t.Errorf("FreedBytes = %d, want %d", got, want)
	}
	purged := log.waitFor(t, 4)
	if len(purged) != 4 {
		t.Errorf("OnPurged called %d times, want 4", len(purged))
	}
	for _, p := range purged {
		if p.Origin != "" || p.Err != nil {
			t.Errorf("leftover %s purged with Origin %q, Err %v; want no origin and no error", p.Name, p.Origin, p.Err)
		}
	}
	if got := testtree.Fingerprint(t, filepath.Join(root, "keep")); got != keepFP {
		t.Errorf("folder beside the trash changed:\n%s\nwant\n%s", got, keepFP)
	}
	if _, err := os.Stat(root); err != nil {
		t.Errorf("the root behind a leftover symlink was touched: %v", err)
	}
}

// A bind mount of an outside folder inside a trash entry is left alone: its
// source survives byte for byte, the entry stays, and Drain names it.
func TestPurgeLeavesBindMountInTrash(t *testing.T) {
	t.Run("leftover", func(t *testing.T) {
		tmp := t.TempDir()
		root := filepath.Join(tmp, "root")
		outside := filepath.Join(tmp, "outside")
		testtree.Synthetic(t, outside, 2, 2, 3, 1500)
		symlink(t, "../../..", filepath.Join(outside, "up"))
		outsideFP := testtree.Fingerprint(t, outside)

		dir := filepath.Join(root, trash.DirName)
		entry := "1700000000000000001-0000000000000001"
		testtree.Synthetic(t, filepath.Join(dir, entry), 1, 3, 3, 800)
		testtree.BindMount(t, outside, filepath.Join(dir, entry, "d1", "ws", "mnt"))
		testtree.Synthetic(t, filepath.Join(dir, "other"), 1, 2, 2, 800)

		log := newPurgeLog()
		tr := openTrash(t, root, trash.Options{OnPurged: log.add})
		err := drain(t, tr)
		checkMountSurvived(t, err, entry, root, outside, outsideFP, log, 2)
		if got := trashNames(t, root); strings.Join(got, ",") != entry {
			t.Errorf("trash holds %v, want only %s", got, entry)
		}
	})
	t.Run("discarded", func(t *testing.T) {
		tmp := t.TempDir()
		root := filepath.Join(tmp, "root")
		outside := filepath.Join(tmp, "outside")
		testtree.Synthetic(t, outside, 2, 2, 3, 1500)
		outsideFP := testtree.Fingerprint(t, outside)

		ws := filepath.Join(root, "ws")
		testtree.Synthetic(t, ws, 1, 3, 3, 800)
		testtree.BindMount(t, outside, filepath.Join(ws, "d1", "checkout"))

		log := newPurgeLog()
		tr := openTrash(t, root, trash.Options{OnPurged: log.add})
		entry, err := tr.Discard(ws)
		if err != nil {
			// Refusing a tree that holds a mount is also safe.
			t.Logf("Discard refused a tree holding a bind mount: %v", err)
			if got := testtree.Fingerprint(t, outside); got != outsideFP {
				t.Errorf("outside changed:\n%s\nwant\n%s", got, outsideFP)
			}
			return
		}
		// The mount moved with its parent; undo it at its new place.
		moved := filepath.Join(root, trash.DirName, entry, "d1", "checkout")
		t.Cleanup(func() { _ = unix.Unmount(moved, unix.MNT_DETACH) })
		err = drain(t, tr)
		checkMountSurvived(t, err, entry, root, outside, outsideFP, log, 1)
		if p := log.waitFor(t, 1); len(p) == 1 && p[0].Origin != ws {
			t.Errorf("OnPurged Origin = %q, want %q", p[0].Origin, ws)
		}
	})
}

func checkMountSurvived(t *testing.T, drainErr error, entry, root, outside, outsideFP string, log *purgeLog, calls int) {
	t.Helper()
	if drainErr == nil {
		t.Errorf("Drain returned nil although entry %s could not be emptied", entry)
	} else if !strings.Contains(drainErr.Error(), entry) {
		t.Errorf("Drain error does not name entry %s: %v", entry, drainErr)
	}
	if got := testtree.Fingerprint(t, outside); got != outsideFP {
		t.Errorf("the bind mount's source changed:\n%s\nwant\n%s", got, outsideFP)
	}
	mnt := filepath.Join(root, trash.DirName, entry, "d1")
	ents, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatalf("the entry's directory holding the mount is gone: %v", err)
	}
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %v, want only the mount point (everything else purged)", mnt, names)
	}
	var failed []trash.Purged
	for _, p := range log.waitFor(t, calls) {
		if p.Err != nil {
			failed = append(failed, p)
		}
	}
	if len(failed) != 1 || failed[0].Name != entry || failed[0].Result.SkippedCount != 1 {
		t.Errorf("OnPurged failures = %+v, want one for %s with one skipped mount point", failed, entry)
	}
}

// Links inside a discarded tree are unlinked, never followed.
func TestPurgeDoesNotFollowSymlinks(t *testing.T) {
	for _, mode := range resolverModes {
		t.Run(mode.name, func(t *testing.T) {
			tmp := t.TempDir()
			root := filepath.Join(tmp, "root")
			outside := filepath.Join(tmp, "outside")
			testtree.Synthetic(t, outside, 2, 2, 2, 700)
			writeFile(t, filepath.Join(outside, "secret.env"), 64, 9)
			sib := filepath.Join(root, "sibling")
			testtree.Synthetic(t, sib, 1, 2, 2, 900)
			outsideFP := testtree.Fingerprint(t, outside)
			sibFP := testtree.Fingerprint(t, sib)

			ws := filepath.Join(root, "ws")
			testtree.Synthetic(t, ws, 2, 2, 1, 100)
			symlink(t, outside, filepath.Join(ws, "abs-dir"))
			symlink(t, filepath.Join(outside, "secret.env"), filepath.Join(ws, "d0", "abs-file"))
			symlink(t, "../../../outside", filepath.Join(ws, "d0", "rel-dir"))
			symlink(t, "../../../../outside/d1/f0", filepath.Join(ws, "d0", "d1", "rel-file"))
			symlink(t, sib, filepath.Join(ws, "d1", "abs-sibling"))
			symlink(t, "../../sibling", filepath.Join(ws, "d1", "rel-sibling"))
			symlink(t, "../sibling/d0", filepath.Join(ws, "rel-sibling-dir"))
			symlink(t, "/", filepath.Join(ws, "slash"))
			symlink(t, "missing", filepath.Join(ws, "dangling"))
			symlink(t, "loop", filepath.Join(ws, "loop"))

			tr := openTrash(t, root, trash.Options{Resolver: mode.r})
			if _, err := tr.Discard(ws); err != nil {
				t.Fatal(err)
			}
			if err := drain(t, tr); err != nil {
				t.Fatalf("Drain: %v", err)
			}
			if got := trashNames(t, root); len(got) != 0 {
				t.Errorf("trash holds %v", got)
			}
			if got := testtree.Fingerprint(t, outside); got != outsideFP {
				t.Errorf("outside changed:\n%s\nwant\n%s", got, outsideFP)
			}
			if got := testtree.Fingerprint(t, sib); got != sibFP {
				t.Errorf("sibling changed:\n%s\nwant\n%s", got, sibFP)
			}
		})
	}
}

// 8 goroutines discard 50 distinct paths each; everything is purged.
func TestConcurrentDiscard(t *testing.T) {
	const goroutines, each = 8, 50
	root := t.TempDir()
	var want int64
	for g := 0; g < goroutines; g++ {
		for i := 0; i < each; i++ {
			p := filepath.Join(root, "g"+strconv.Itoa(g), "p"+strconv.Itoa(i))
			if i%5 == 0 {
				writeFile(t, p, 100*i, byte(g)) // some plain files
			} else {
				testtree.Synthetic(t, p, 1, 2, 2, 64*i)
			}
			m, err := treesize.Measure(context.Background(), root, fmt.Sprintf("g%d/p%d", g, i), treesize.Options{})
			if err != nil {
				t.Fatal(err)
			}
			want += m.AllocBytes
		}
	}
	log := newPurgeLog()
	tr := openTrash(t, root, trash.Options{OnPurged: log.add})
	names := make([][]string, goroutines)
	errs := make([][]error, goroutines)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				name, err := tr.Discard(filepath.Join(root, "g"+strconv.Itoa(g), "p"+strconv.Itoa(i)))
				names[g] = append(names[g], name)
				errs[g] = append(errs[g], err)
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for g := range names {
		for i, name := range names[g] {
			if errs[g][i] != nil {
				t.Errorf("Discard g%d/p%d: %v", g, i, errs[g][i])
			}
			if seen[name] {
				t.Errorf("entry name %q given twice", name)
			}
			seen[name] = true
		}
	}
	if err := drain(t, tr); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if got := trashNames(t, root); len(got) != 0 {
		t.Errorf("trash holds %d entries after Drain", len(got))
	}
	for g := 0; g < goroutines; g++ {
		if got := testtree.CountEntries(t, filepath.Join(root, "g"+strconv.Itoa(g))); got != 0 {
			t.Errorf("g%d still holds %d entries", g, got)
		}
	}
	purged := log.waitFor(t, goroutines*each)
	if len(purged) != goroutines*each {
		t.Errorf("OnPurged called %d times, want %d", len(purged), goroutines*each)
	}
	origins := map[string]bool{}
	for _, p := range purged {
		if p.Err != nil || !seen[p.Name] {
			t.Errorf("purged %+v", p)
		}
		origins[p.Origin] = true
	}
	if len(origins) != goroutines*each {
		t.Errorf("%d distinct origins reported, want %d", len(origins), goroutines*each)
	}
	if got := tr.FreedBytes(); got != want {
		t.Errorf("FreedBytes = %d, want %d", got, want)
	}
}

// When Drain returns, the OnPurged callbacks of the entries it waited for
// have run: a caller that journals outcomes from OnPurged and then drains
// before exiting must not lose the last outcome. The callback here takes a
// few milliseconds (it measures a small tree), ample time for a Drain that
// does not wait for it to return first.
func TestDrainWaitsForOnPurged(t *testing.T) {
	root := t.TempDir()
	scratch := t.TempDir()
	testtree.Synthetic(t, scratch, 2, 6, 20, 0)
	writeFile(t, filepath.Join(root, "ws", "f"), 100, 1)
	var returned sync.WaitGroup
	var mu sync.Mutex
	calls := 0
	returned.Add(1)
	tr := openTrash(t, root, trash.Options{OnPurged: func(p trash.Purged) {
		defer returned.Done()
		if _, err := treesize.Measure(context.Background(), scratch, "", treesize.Options{}); err != nil {
			t.Errorf("Measure in OnPurged: %v", err)
		}
		mu.Lock()
		calls++
		mu.Unlock()
	}})
	if _, err := tr.Discard(filepath.Join(root, "ws")); err != nil {
		t.Fatal(err)
	}
	if err := drain(t, tr); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := calls
	mu.Unlock()
	if got != 1 {
		t.Errorf("Drain returned before the OnPurged call of the entry it waited for had finished (%d calls done)", got)
	}
	returned.Wait() // do not end the test under a running callback
}

// Drain then Close is the natural shutdown sequence; the OnPurged call of
// an entry whose purge finished before Drain returned must still happen.
// Today Drain returns before the callback runs, and Close cancels the
// context that the purger checks before calling it, so the callback of the
// last entry can be lost. The window is small: the test tries up to 1,000
// times and stops at the first lost callback. It is probabilistic on the
// current code (under -race it fails in most runs, without -race rarely)
// and cannot fail on an implementation where Drain waits for OnPurged.
func TestCloseAfterDrainKeepsOnPurged(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 1000; i++ {
		path := filepath.Join(root, "ws"+strconv.Itoa(i))
		writeFile(t, path, 10, 1)
		var mu sync.Mutex
		var calls []trash.Purged
		tr, err := trash.Open(root, trash.Options{OnPurged: func(p trash.Purged) {
			mu.Lock()
			calls = append(calls, p)
			mu.Unlock()
		}})
		if err != nil {
			t.Fatal(err)
		}
		name, err := tr.Discard(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := drain(t, tr); err != nil {
			t.Fatal(err)
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		mustNotExist(t, filepath.Join(root, trash.DirName, name))
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n != 1 {
			t.Fatalf("attempt %d: entry %s was purged, Drain returned nil, then Close; OnPurged was called %d times, want 1", i, name, n)
		}
	}
}

// Discard after Close is refused and moves nothing.
func TestDiscardAfterClose(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "ws", "f"), 100, 1)
	tr, err := trash.Open(root, trash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := tr.Discard(filepath.Join(root, "ws")); !errors.Is(err, trash.ErrClosed) {
		t.Errorf("Discard after Close: %v, want ErrClosed", err)
	}
	if _, err := os.Stat(filepath.Join(root, "ws", "f")); err != nil {
		t.Errorf("Discard after Close moved something: %v", err)
	}
}

// bigEntryDiscarded discards a tree of about 9,400 entries and returns once
// the purger has removed its first file, with the tree's entry count and
// allocated bytes measured before.
func bigEntryDiscarded(t *testing.T, root string, opts trash.Options) (*trash.Trash, string, int, int64) {
	t.Helper()
	big := filepath.Join(root, "big")
	n := testtree.Synthetic(t, big, 3, 8, 15, 1)
	m, err := treesize.Measure(context.Background(), root, "big", treesize.Options{})
	if err != nil || m.Entries != int64(n)+1 {
		t.Fatalf("Measure: %+v, %v", m.Size, err)
	}
	w := newWatcher(t)
	w.add(t, big, "big") // the watch follows the directory into the trash
	tr := openTrash(t, root, opts)
	name, err := tr.Discard(big)
	if err != nil {
		t.Fatal(err)
	}
	w.wait(t, time.Now().Add(time.Minute), -1)
	return tr, name, n, m.AllocBytes
}

// Close interrupts the purge of a large entry, the purger stops for good,
// and a later Open finishes the job.
func TestCloseWhilePurging(t *testing.T) {
	root := t.TempDir()
	tr, name, n, alloc := bigEntryDiscarded(t, root, trash.Options{})
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	entry := filepath.Join(root, trash.DirName, name)
	left := testtree.CountEntries(t, entry)
	if left <= 0 || left >= n {
		t.Fatalf("after Close the entry holds %d of %d entries; want it interrupted midway", left, n)
	}
	if again := testtree.CountEntries(t, entry); again != left {
		t.Errorf("purge went on after Close returned: %d entries, then %d", left, again)
	}

	log := newPurgeLog()
	tr2 := openTrash(t, root, trash.Options{OnPurged: log.add})
	if err := drain(t, tr2); err != nil {
		t.Fatalf("Drain after reopening: %v", err)
	}
	if got := trashNames(t, root); len(got) != 0 {
		t.Errorf("trash holds %v after the second Open's Drain", got)
	}
	if p := log.waitFor(t, 1); len(p) != 1 || p[0].Name != name || p[0].Result.Removed != int64(left)+1 {
		t.Errorf("second purge reported %+v, want entry %s with %d entries removed", p, name, left+1)
	}
	// The interrupted purge and the one after restart together freed the
	// tree exactly once.
	if first, second := tr.FreedBytes(), tr2.FreedBytes(); first+second != alloc {
		t.Errorf("freed %d before Close and %d after reopening, sum %d; want the tree's %d", first, second, first+second, alloc)
	}
}

// Drain must not report success while an entry it waited for was left in
// the trash because Close interrupted its purge.
func TestDrainAfterCloseReportsUnpurgedEntry(t *testing.T) {
	root := t.TempDir()
	tr, name, _, _ := bigEntryDiscarded(t, root, trash.Options{})
	waiting := make(chan error, 1)
	go func() { waiting <- tr.Drain(context.Background()) }()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, trash.DirName, name)); err != nil {
		t.Fatalf("entry %s is gone, so Close did not interrupt it: %v", name, err)
	}
	if err := <-waiting; !errors.Is(err, trash.ErrClosed) {
		t.Errorf("Drain waiting while Close interrupted entry %s returned %v, want an error wrapping ErrClosed", name, err)
	}
	if err := tr.Drain(context.Background()); !errors.Is(err, trash.ErrClosed) {
		t.Errorf("Drain after Close, with entry %s still in the trash, returned %v, want an error wrapping ErrClosed", name, err)
	}
}

const helperEnv = "RECLAIMER_TRASH_HELPER"

// TestHelperPurgeProcess is the child process of TestKillMidPurgeConverges:
// it opens the trash of the root named by $RECLAIMER_TRASH_HELPER and
// purges it.
func TestHelperPurgeProcess(t *testing.T) {
	root := os.Getenv(helperEnv)
	if root == "" {
		t.Skip("helper process of TestKillMidPurgeConverges; runs only with " + helperEnv + " set")
	}
	tr, err := trash.Open(root, trash.Options{Deletion: deletion.Options{Walk: dirwalk.Options{Workers: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}

// A purging process killed with SIGKILL in the middle of an entry leaves a
// trash that the next Open empties, without touching anything outside it.
func TestKillMidPurgeConverges(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("inside the helper process")
	}
	tmp := t.TempDir()
	root := filepath.Join(tmp, "root")
	keep := filepath.Join(root, "keep")
	outside := filepath.Join(tmp, "outside")
	testtree.Synthetic(t, keep, 2, 3, 3, 600)
	testtree.Synthetic(t, outside, 1, 2, 2, 600)
	keepFP := testtree.Fingerprint(t, keep)
	outsideFP := testtree.Fingerprint(t, outside)

	dir := filepath.Join(root, trash.DirName)
	const entries = 6
	sizes := map[string]int{}
	for i := 0; i < entries; i++ {
		name := fmt.Sprintf("17000000000000000%02d-%016x", i, i)
		sizes[name] = testtree.Synthetic(t, filepath.Join(dir, name), 2, 10, 25, 64)
		symlink(t, keep, filepath.Join(dir, name, "d3", "abs-keep"))
		symlink(t, "../../../keep", filepath.Join(dir, name, "d4", "rel-keep"))
		symlink(t, outside, filepath.Join(dir, name, "d5", "d5", "outside"))
		sizes[name] += 3
	}
	symlink(t, keep, filepath.Join(dir, "link-to-keep"))
	symlink(t, "../keep", filepath.Join(dir, "rel-link-to-keep"))
	initial := len(trashNames(t, root))

	w := newWatcher(t)
	w.add(t, dir, "")
	for name := range sizes {
		w.add(t, filepath.Join(dir, name), name)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPurgeProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+root)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("pidfd_open: %v", err)
	}
	defer unix.Close(pidfd)

	// Kill the child as soon as one whole entry tree is gone and it has
	// deleted 10 files in the top folder of another one.
	removed := map[string]bool{}
	deleted := map[string]int{}
	var killedIn string
	deadline := time.Now().Add(2 * time.Minute)
	for killedIn == "" {
		evs, exited := w.wait(t, deadline, pidfd)
		for _, ev := range evs {
			if ev.mask&unix.IN_DELETE == 0 || killedIn != "" {
				continue
			}
			if ev.watch == "" {
				if sizes[ev.name] > 0 {
					removed[ev.name] = true
				}
				continue
			}
			deleted[ev.watch]++
			if len(removed) > 0 && !removed[ev.watch] && deleted[ev.watch] >= 10 {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatalf("kill: %v", err)
				}
				killedIn = ev.watch
			}
		}
		if exited && killedIn == "" {
			_ = cmd.Wait()
			t.Fatalf("helper exited before it could be killed midway (removed %d of %d entries):\n%s", len(removed), initial, out.String())
		}
	}
	err = cmd.Wait()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper was not killed by SIGKILL (wait: %v):\n%s", err, out.String())
	}

	left := trashNames(t, root)
	if len(left) == 0 || len(left) >= initial {
		t.Fatalf("after the kill the trash holds %d of %d entries; want some purged and some left", len(left), initial)
	}
	if got := testtree.CountEntries(t, filepath.Join(dir, killedIn)); got >= sizes[killedIn] {
		t.Errorf("entry %s being purged at the kill still holds %d of %d entries", killedIn, got, sizes[killedIn])
	} else {
		t.Logf("killed with %d of %d top-level entries left, %s at %d of %d entries", len(left), initial, killedIn, got, sizes[killedIn])
	}
	if got := testtree.Fingerprint(t, keep); got != keepFP {
		t.Fatalf("keep changed while purging:\n%s\nwant\n%s", got, keepFP)
	}

	tr := openTrash(t, root, trash.Options{})
	if err := drain(t, tr); err != nil {
		t.Fatalf("Drain after restart: %v", err)
	}
	if got := trashNames(t, root); len(got) != 0 {
		t.Errorf("trash holds %v after restart and Drain", got)
	}
	if got := testtree.Fingerprint(t, keep); got != keepFP {
		t.Errorf("keep changed:\n%s\nwant\n%s", got, keepFP)
	}
	if got := testtree.Fingerprint(t, outside); got != outsideFP {
		t.Errorf("outside changed:\n%s\nwant\n%s", got, outsideFP)
	}
}

// A Discard already under way when Close runs must either finish into its
// own trash or fail with ErrClosed. It must never use the descriptors
// Close released: another Trash opened meanwhile gets the same numbers,
// and the late rename would then move files of (or into) another root.
//
// The fallback resolver walks the 1,500 components of the path one at a
// time, which keeps Discard busy for milliseconds after its closed check;
// an inotify watch on a directory early in the path tells the test that
// the walk has begun, and Close runs right then.
func TestDiscardRacingCloseStaysInItsRoot(t *testing.T) {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "root")
	other := filepath.Join(tmp, "other")
	deep := strings.Repeat("d/", 1500)
	mkdirAll(t, filepath.Join(root, deep))
	mkdirAll(t, other)
	for it := 0; it < 5; it++ {
		victim := filepath.Join(root, deep, "v"+strconv.Itoa(it))
		writeFile(t, victim, 10, 1)
		w := newWatcher(t)
		wd, err := unix.InotifyAddWatch(w.fd, filepath.Join(root, strings.Repeat("d/", 50)), unix.IN_OPEN)
		if err != nil {
			t.Fatal(err)
		}
		w.wds[int32(wd)] = "d50"

		// The purger may delete the entry as soon as Discard queued it,
		// before Close: an entry this trash's purger worked on landed in
		// it too (its report may carry Close's cancellation even when the
		// one unlink was done).
		var purgedMu sync.Mutex
		purged := map[string]bool{}
		tr, err := trash.Open(root, trash.Options{Resolver: beneath.Resolver{Fallback: true},
			OnPurged: func(p trash.Purged) {
				purgedMu.Lock()
				purged[p.Name] = true
				purgedMu.Unlock()
			}})
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			name string
			err  error
		}
		done := make(chan result, 1)
		go func() {
			name, err := tr.Discard(victim)
			done <- result{name, err}
		}()
		w.wait(t, time.Now().Add(time.Minute), -1) // the walk is past d50
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		tr2, err := trash.Open(other, trash.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res := <-done
		if err := tr2.Close(); err != nil {
			t.Fatal(err)
		}
		var failed bool
		switch {
		case res.err == nil:
			purgedMu.Lock()
			gone := purged[res.name]
			purgedMu.Unlock()
			if _, err := os.Lstat(filepath.Join(root, trash.DirName, res.name)); err != nil && !gone {
				t.Errorf("iteration %d: Discard racing Close returned entry %q, which is not in its trash: %v", it, res.name, err)
				failed = true
			}
		case !errors.Is(res.err, trash.ErrClosed):
			// Print the error without the 3,000-character path.
			msg := res.err.Error()
			if i := strings.LastIndex(msg, ": "); i >= 0 {
				msg = msg[i+2:]
			}
			t.Errorf("iteration %d: Discard racing Close failed with %q, want success or ErrClosed", it, msg)
			failed = true
		}
		if got := trashNames(t, other); len(got) != 0 {
			t.Errorf("iteration %d: the trash of another root, opened after Close, received %v from the late Discard", it, got)
			failed = true
		}
		if failed {
			return
		}
	}
}
