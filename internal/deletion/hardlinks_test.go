package deletion_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"

	"github.com/reclaimer/reclaimer/internal/deletion"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

// TestFileCountsOnlyWhenAllItsLinksGo, a property: for any set of files,
// each with some hard links inside the tree and some outside (a pnpm store),
// the tree's measured size and the bytes its deletion frees both count a
// file exactly when all its links are inside, and the two agree.
func TestFileCountsOnlyWhenAllItsLinksGo(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		base := t.TempDir()
		tree, store := filepath.Join(base, "tree"), filepath.Join(base, "store")
		for _, d := range []string{tree, filepath.Join(tree, "sub"), store} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				rt.Fatal(err)
			}
		}
		var inside, shared int64 // allocated bytes of files wholly inside, and of shared ones
		n := rapid.IntRange(1, 6).Draw(rt, "files")
		for i := range n {
			in := rapid.IntRange(1, 3).Draw(rt, fmt.Sprintf("in%d", i))
			out := rapid.IntRange(0, 2).Draw(rt, fmt.Sprintf("out%d", i))
			size := rapid.IntRange(1, 5).Draw(rt, fmt.Sprintf("size%d", i)) * 8192
			first := filepath.Join(tree, fmt.Sprintf("f%d", i))
			if err := os.WriteFile(first, make([]byte, size), 0o644); err != nil {
				rt.Fatal(err)
			}
			for j := 1; j < in; j++ {
				dir := tree
				if j%2 == 1 {
					dir = filepath.Join(tree, "sub")
				}
				if err := os.Link(first, filepath.Join(dir, fmt.Sprintf("f%d-%d", i, j))); err != nil {
					rt.Fatal(err)
				}
			}
			for j := range out {
				if err := os.Link(first, filepath.Join(store, fmt.Sprintf("f%d-%d", i, j))); err != nil {
					rt.Fatal(err)
				}
			}
			var st unix.Stat_t
			if err := unix.Lstat(first, &st); err != nil {
				rt.Fatal(err)
			}
			if out == 0 {
				inside += st.Blocks * 512
			} else {
				shared += st.Blocks * 512
			}
		}
		var dirs int64
		for _, d := range []string{tree, filepath.Join(tree, "sub")} {
			var st unix.Stat_t
			if err := unix.Lstat(d, &st); err != nil {
				rt.Fatal(err)
			}
			dirs += st.Blocks * 512
		}
		m, err := treesize.Measure(context.Background(), base, "tree", treesize.Options{})
		if err != nil {
			rt.Fatal(err)
		}
		if m.AllocBytes != inside+dirs || m.SharedBytes != shared {
			rt.Fatalf("measured %d (shared %d), want %d (shared %d)", m.AllocBytes, m.SharedBytes, inside+dirs, shared)
		}
		res, err := deletion.Delete(context.Background(), base, "tree", deletion.Options{})
		if err != nil {
			rt.Fatal(err)
		}
		if res.FreedBytes != m.AllocBytes {
			rt.Fatalf("deletion freed %d, the measure said %d", res.FreedBytes, m.AllocBytes)
		}
		if _, err := os.Stat(tree); !os.IsNotExist(err) {
			rt.Fatalf("tree still there: %v", err)
		}
	})
}
