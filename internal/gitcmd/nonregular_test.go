package gitcmd_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// TestGitNeverReadsNonRegularFiles: a FIFO wherever git reads configuration
// or ignore rules (the top .gitignore, info/exclude, .gitattributes, a
// config include.path or includeIf path, a .gitignore deep in the tree,
// one an agent holds open for writing so reads block) makes every git call
// fail with ErrNonRegular, long before its timeout, instead of blocking.
func TestGitNeverReadsNonRegularFiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plant  func(t *testing.T, repo string) string // returns the FIFO's path
		writer bool                                   // hold the FIFO open for writing
	}{
		{"top .gitignore", func(t *testing.T, repo string) string { return filepath.Join(repo, ".gitignore") }, false},
		{"info/exclude", func(t *testing.T, repo string) string {
			os.Remove(filepath.Join(repo, ".git", "info", "exclude"))
			return filepath.Join(repo, ".git", "info", "exclude")
		}, false},
		{".gitattributes", func(t *testing.T, repo string) string { return filepath.Join(repo, ".gitattributes") }, false},
		{"include.path", func(t *testing.T, repo string) string {
			fifo := filepath.Join(filepath.Dir(repo), "included")
			appendConfig(t, repo, "[include]\n\tpath = "+fifo+"\n")
			return fifo
		}, false},
		{"includeIf path, relative", func(t *testing.T, repo string) string {
			appendConfig(t, repo, "[includeIf \"gitdir:/\"]\n\tpath = extra.cfg\n")
			return filepath.Join(repo, ".git", "extra.cfg")
		}, false},
		{"deep .gitignore", func(t *testing.T, repo string) string {
			d := filepath.Join(repo, "a", "b", "c")
			write(t, filepath.Join(d, "f"), "x")
			return filepath.Join(d, ".gitignore")
		}, false},
		{"include.path held open by a writer, so reads block", func(t *testing.T, repo string) string {
			fifo := filepath.Join(filepath.Dir(repo), "included")
			appendConfig(t, repo, "[include]\n\tpath = "+fifo+"\n")
			return fifo
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := newRepo(t)
			fifo := tc.plant(t, repo)
			if err := unix.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.writer {
				w, err := os.OpenFile(fifo, os.O_RDWR, 0) // a writer that never writes
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { w.Close() })
			}
			r := gitcmd.Runner{Timeout: 2 * time.Minute}
			_, err := r.StatusPorcelainV2(ctx(t), repo, true)
			if !errors.Is(err, gitcmd.ErrNonRegular) {
				t.Fatalf("status with a FIFO at %s: %v, want ErrNonRegular", fifo, err)
			}
		})
	}
}

func appendConfig(t *testing.T, repo, text string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(repo, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
