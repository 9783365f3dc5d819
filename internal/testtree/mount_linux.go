package testtree

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// MountTmpfs mounts a small tmpfs on dir (created if needed) and unmounts
// it when the test ends. It skips the test where the machine refuses.
func MountTmpfs(tb testing.TB, dir string, options string) {
	tb.Helper()
	must(tb, os.MkdirAll(dir, 0o755))
	if options == "" {
		options = "size=16m"
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, options); err != nil {
		tb.Skipf("mounting a tmpfs on %s was refused (%v); this test needs root and mount rights", dir, err)
	}
	tb.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
}

// BindMount binds src onto dst (created if needed) and undoes it when the
// test ends. It skips the test where the machine refuses.
func BindMount(tb testing.TB, src, dst string) {
	tb.Helper()
	st, err := os.Stat(src)
	must(tb, err)
	if st.IsDir() {
		must(tb, os.MkdirAll(dst, 0o755))
	} else if _, err := os.Lstat(dst); os.IsNotExist(err) {
		must(tb, os.WriteFile(dst, nil, 0o644))
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		tb.Skipf("bind mount %s on %s was refused (%v); this test needs root and mount rights", src, dst, err)
	}
	tb.Cleanup(func() { _ = unix.Unmount(dst, unix.MNT_DETACH) })
}
