package trash_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/testtree"
	"github.com/reclaimer/reclaimer/internal/trash"
)

// TestFolderHoldingAMountIsNotRenamedWhole: a folder with a mount point
// anywhere below it (a bind mount of an outside folder, a tmpfs, deep or
// shallow) is refused with ErrHoldsMount and nothing moves: the mount stays
// where it was and the trash stays empty.
func TestFolderHoldingAMountIsNotRenamedWhole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		below string
		tmpfs bool
	}{
		{"bind mount one level down", "checkout", false},
		{"bind mount deep down", "a/b/c/d/checkout", false},
		{"tmpfs deep down", "x/y/scratch", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			root := filepath.Join(tmp, "root")
			outside := filepath.Join(tmp, "outside")
			testtree.Write(t, filepath.Join(outside, "mine.txt"), "keep\n")
			run := filepath.Join(root, "run")
			testtree.Write(t, filepath.Join(run, "f"), "x")
			mnt := filepath.Join(run, tc.below)
			if tc.tmpfs {
				testtree.MountTmpfs(t, mnt, "size=1m")
				testtree.Write(t, filepath.Join(mnt, "mine.txt"), "keep\n")
			} else {
				testtree.BindMount(t, outside, mnt)
			}
			tr := openTrash(t, root, trash.Options{})
			if _, err := tr.Discard(run); !errors.Is(err, trash.ErrHoldsMount) {
				t.Fatalf("Discard = %v, want ErrHoldsMount", err)
			}
			if _, err := os.Stat(filepath.Join(mnt, "mine.txt")); err != nil {
				t.Fatalf("the mount's file is not where it was: %v", err)
			}
			if got := trashNames(t, root); len(got) != 0 {
				t.Fatalf("trash holds %v, want nothing", got)
			}
		})
	}
}
