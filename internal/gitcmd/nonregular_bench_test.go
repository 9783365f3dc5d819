package gitcmd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkCheckReadFiles is what every git call pays before git starts
// for the non-regular file check, next to one git rev-parse of the same
// repository in the same run.
func BenchmarkCheckReadFiles(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "repo")
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		b.Fatal(err, string(out))
	}
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("node_modules/\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if err := checkReadFiles(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("git-rev-parse", func(b *testing.B) {
		r := Runner{}
		for b.Loop() {
			if _, err := r.Run(context.Background(), dir, "rev-parse", "--git-dir"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
