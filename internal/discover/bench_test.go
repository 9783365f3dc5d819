package discover_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/discover"
)

// BenchmarkDiscover: a home holding 2,000 Codex worktrees of one
// repository, laid out as git lays them out (the worktree's .git file and
// the admin folder naming it back; discovery runs no git).
func BenchmarkDiscover(b *testing.B) {
	const n = 2000
	home := b.TempDir()
	common := filepath.Join(home, "src", "app", ".git")
	for i := 0; i < n; i++ {
		wt := filepath.Join(home, ".codex", "worktrees", fmt.Sprintf("%04x", i), "app")
		admin := filepath.Join(common, "worktrees", fmt.Sprintf("app%d", i))
		for _, f := range []struct{ path, content string }{
			{filepath.Join(wt, ".git"), "gitdir: " + admin + "\n"},
			{filepath.Join(wt, "main.go"), "package main\n"},
			{filepath.Join(admin, "gitdir"), filepath.Join(wt, ".git") + "\n"},
			{filepath.Join(admin, "HEAD"), "ref: refs/heads/codex/" + fmt.Sprint(i) + "\n"},
		} {
			if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(f.path, []byte(f.content), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	opts := discover.Options{Homes: []discover.Home{{User: "u", Dir: home}}, WorktreeRoots: []string{filepath.Join(home, "tmp")}}
	b.Run("discover", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r, err := discover.Discover(context.Background(), opts)
			if err != nil {
				b.Fatal(err)
			}
			if len(r.Sources) != 1 || len(r.Sources[0].Found) != n {
				b.Fatalf("found %d sources", len(r.Sources))
			}
		}
	})
	// The baseline: find listing the same .git files (no proof, no reads).
	b.Run("find", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			out, err := exec.Command("find", filepath.Join(home, ".codex", "worktrees"), "-maxdepth", "3", "-name", ".git").Output()
			if err != nil || bytes.Count(out, []byte("\n")) != n {
				b.Fatalf("find: %v", err)
			}
		}
	})
}
