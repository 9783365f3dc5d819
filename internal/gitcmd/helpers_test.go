package gitcmd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/testtree"
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

// The helpers shared with other test packages.
var (
	real    = testtree.Real
	ctx     = testtree.Context
	markers = testtree.Names
	lines   = testtree.Lines
)

// The repository helpers every git test package uses.
var (
	git       = testtree.Git
	gitErr    = testtree.GitErr
	write     = testtree.Write
	writeExec = testtree.WriteExec
)
