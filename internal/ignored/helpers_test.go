package ignored_test

import (
	"context"
	"github.com/reclaimer/reclaimer/internal/testtree"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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

// workspace makes root/rt/workspace and returns root and the workspace.
func workspace(t *testing.T) (root, ws string) {
	t.Helper()
	root = real(t, t.TempDir())
	ws = filepath.Join(root, "rt", "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, ws
}

// initRepo makes dir a repository whose first commit holds files
// (path -> content); other files are written with touch.
func initRepo(t *testing.T, dir string, committed map[string]string, others ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q")
	for p, c := range committed {
		write(t, filepath.Join(dir, p), c)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "init")
	for _, p := range others {
		write(t, filepath.Join(dir, p), "x\n")
	}
}

// The repository helpers every git test package uses.
var (
	git       = testtree.Git
	gitErr    = testtree.GitErr
	write     = testtree.Write
	writeExec = testtree.WriteExec
)
