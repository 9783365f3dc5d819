package ignored_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/testtree"
)

// The helpers shared with other test packages.
var (
	real    = testtree.Real
	ctx     = testtree.Context
	markers = testtree.Names
	lines   = testtree.Lines
)

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
