package testtree

import (
	"syscall"
	"testing"
)

// devOf returns the device of path without following a link. Fingerprint
// uses it only to stop at mount points of other filesystems; tests that
// need bind mounts of the same filesystem check them directly.
func devOf(tb testing.TB, path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		tb.Fatal(err)
	}
	return st.Dev
}
