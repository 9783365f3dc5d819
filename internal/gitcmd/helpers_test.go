package gitcmd_test

import (
	"context"
	"github.com/reclaimer/reclaimer/internal/testtree"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newRepo makes a repository with one commit holding README.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q")
	write(t, filepath.Join(dir, "README"), "hello\n")
	git(t, dir, "add", "README")
	git(t, dir, "commit", "-q", "-m", "init")
	return dir
}

// real resolves symbolic links in a test path (t.TempDir may sit below one).
func real(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// markers lists the marker files a trap left in dir.
func markers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// The repository helpers every git test package uses.
var (
	git       = testtree.Git
	gitErr    = testtree.GitErr
	write     = testtree.Write
	writeExec = testtree.WriteExec
)
