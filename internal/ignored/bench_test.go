package ignored_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/ignored"
	"github.com/reclaimer/reclaimer/internal/testtree"
	"github.com/reclaimer/reclaimer/internal/treesize"
)

// BenchmarkSelectNodeModules selects the dependencies of a repository
// holding the recorded node_modules shape: Select walks the whole folder
// for a .git (and secrets, for unknown names) before taking it. Measured
// next to what a plan already spends on that folder (treesize, which sizes
// it) and git status --ignored alone, the rest of Select, in the same run.
func BenchmarkSelectNodeModules(b *testing.B) {
	shape := testtree.ShapePath()
	if shape == "" {
		b.Skip("../shared/bench/node_modules.shape.tsv.gz not found")
	}
	root := testtree.Real(b, b.TempDir())
	ws := filepath.Join(root, "rt", "ws")
	testtree.NewRepo(b, ws)
	testtree.LayShape(b, shape, ws)
	ctx := context.Background()
	b.Run("select", func(b *testing.B) {
		for b.Loop() {
			got, err := ignored.Select(ctx, gitcmd.Runner{}, ws, ignored.Options{Root: root})
			if err != nil || len(got) != 1 {
				b.Fatal(got, err)
			}
		}
	})
	b.Run("treesize", func(b *testing.B) {
		for b.Loop() {
			if _, err := treesize.Measure(ctx, ws, "node_modules", treesize.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("git-status-ignored", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("git", "status", "--porcelain=v2", "-z", "--ignored=matching", "--untracked-files=all")
			cmd.Dir = ws
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
