package gitcmd_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// benchRepo: main with n commits since the fork, feat with 5 of its own.
// With touch, main changes the work's files too (the comparison cannot
// stop early).
func benchRepo(b *testing.B, n int, merge, touch bool) (dir, head string) {
	b.Helper()
	dir = filepath.Join(b.TempDir(), "repo")
	write(b, filepath.Join(dir, "lines.txt"), tenLines)
	git(b, filepath.Dir(dir), "init", "-q", "-b", "main", dir)
	git(b, dir, "add", "-A")
	git(b, dir, "commit", "-q", "-m", "base")
	git(b, dir, "checkout", "-q", "-b", "feat")
	for i := 0; i < 5; i++ {
		write(b, filepath.Join(dir, fmt.Sprintf("feat%d.txt", i)), "work\n")
		git(b, dir, "add", "-A")
		git(b, dir, "commit", "-q", "-m", "feat")
	}
	head = trim(git(b, dir, "rev-parse", "HEAD"))
	git(b, dir, "checkout", "-q", "main")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("main%d.txt", i)
		if touch && i < 5 {
			name = fmt.Sprintf("feat%d.txt", i)
		}
		write(b, filepath.Join(dir, name), fmt.Sprintf("more %d\n", i))
		git(b, dir, "add", "-A")
		git(b, dir, "commit", "-q", "-m", "main")
	}
	if merge {
		git(b, dir, "merge", "-q", "--squash", "feat")
		git(b, dir, "commit", "-q", "-m", "squash")
	}
	return dir, head
}

// BenchmarkIntegrated: the cost of telling merged work from unsaved work
// for one worktree, against the one git status every observation of a
// worktree already runs (archive.Inspect).
func BenchmarkIntegrated(b *testing.B) {
	for _, c := range []struct {
		name         string
		merge, touch bool
	}{{"squashed", true, false}, {"not-merged", false, false}, {"not-merged-same-files", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			dir, head := benchRepo(b, 200, c.merge, c.touch)
			opts := gitcmd.IntegrationOptions{Branch: "feat", Scratch: b.TempDir()}
			r := gitcmd.Runner{}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, ok, err := r.Integrated(ctx(b), dir, head, opts); err != nil || ok != c.merge {
					b.Fatalf("ok=%v err=%v", ok, err)
				}
			}
		})
	}
	b.Run("git-status", func(b *testing.B) {
		dir, _ := benchRepo(b, 200, false, false)
		r := gitcmd.Runner{}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := r.Run(ctx(b), dir, "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
