package dirwalk_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/dirwalk"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

func open(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestFilesystemKinds: a tmpfs is local and not latency-bound; the test's
// own folder agrees with the mount table's "discard" option.
func TestFilesystemKinds(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "tmpfs")
	testtree.MountTmpfs(t, tmp, "size=1m")
	fd := open(t, tmp)
	if dirwalk.Remote(fd) || dirwalk.LatencyBound(fd) {
		t.Fatal("a tmpfs reads as remote or latency-bound")
	}
	dir := t.TempDir()
	out, err := exec.Command("findmnt", "-no", "OPTIONS,FS-OPTIONS", "-T", dir).Output()
	if err != nil {
		t.Skipf("findmnt: %v", err)
	}
	discard := strings.Contains(","+strings.ReplaceAll(strings.TrimSpace(string(out)), " ", ",")+",", ",discard,")
	if got := dirwalk.LatencyBound(open(t, dir)); got != discard {
		t.Fatalf("LatencyBound(%s) = %v; findmnt says options %q", dir, got, out)
	}
	if dirwalk.Remote(open(t, dir)) {
		t.Fatalf("%s reads as a network filesystem", dir)
	}
}
