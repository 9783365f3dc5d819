package beneath_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

func resolvers(t *testing.T, f func(t *testing.T, r beneath.Resolver)) {
	t.Run("openat2", func(t *testing.T) {
		if !beneath.HaveOpenat2() {
			t.Skip("kernel has no openat2")
		}
		f(t, beneath.Resolver{})
	})
	t.Run("fallback", func(t *testing.T) { f(t, beneath.Resolver{Fallback: true}) })
}

func TestOpenDirRules(t *testing.T) {
	resolvers(t, func(t *testing.T, r beneath.Resolver) {
		dir := t.TempDir()
		base := filepath.Join(dir, "base")
		for _, d := range []string{"base/a/b", "outside/x"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(filepath.Join(dir, "outside"), filepath.Join(base, "abs-link")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("a", filepath.Join(base, "rel-link")); err != nil {
			t.Fatal(err)
		}
		testtree.BindMount(t, filepath.Join(dir, "outside"), filepath.Join(base, "a", "bound"))
		testtree.MountTmpfs(t, filepath.Join(base, "tmp"), "size=1m")
		if err := os.Mkdir(filepath.Join(base, "tmp", "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		for _, tc := range []struct {
			rel  string
			want error
		}{
			{"a/b", nil},
			{"./a//b/", nil},
			{"", nil},
			{"../outside", beneath.ErrOutside},
			{"a/../../outside", beneath.ErrOutside},
			{"/etc", beneath.ErrOutside},
			{"abs-link", beneath.ErrSymlink},
			{"abs-link/x", beneath.ErrSymlink},
			{"rel-link/b", beneath.ErrSymlink},
			{"a/bound", beneath.ErrMountPoint}, // same filesystem: only the mount id tells
			{"a/bound/x", beneath.ErrMountPoint},
			{"tmp/sub", beneath.ErrMountPoint},
			{"missing", unix.ENOENT},
		} {
			got, err := r.OpenDir(fd, tc.rel)
			if err == nil {
				unix.Close(got)
			}
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("OpenDir(%q) = %v, want %v", tc.rel, err, tc.want)
			}
		}
		for name, want := range map[string]bool{"a": false, "tmp": true} {
			got, err := beneath.IsMountPoint(fd, name)
			if err != nil || got != want {
				t.Errorf("IsMountPoint(%q) = %v, %v; want %v", name, got, err, want)
			}
		}
		afd, err := unix.Open(filepath.Join(base, "a"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(afd)
		if got, err := beneath.IsMountPoint(afd, "bound"); err != nil || !got {
			t.Errorf("bind mount of the same filesystem not seen as a mount point: %v %v", got, err)
		}
	})
}

func TestOpenParent(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	pfd, name, err := beneath.Resolver{}.OpenParent(fd, "a/b")
	if err != nil || name != "b" {
		t.Fatalf("OpenParent = %q, %v", name, err)
	}
	defer unix.Close(pfd)
	var st, want unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(dir, "a"), &want); err != nil {
		t.Fatal(err)
	}
	if st.Ino != want.Ino {
		t.Fatal("OpenParent opened the wrong directory")
	}
	if _, _, err := (beneath.Resolver{}).OpenParent(fd, "."); !errors.Is(err, beneath.ErrOutside) {
		t.Fatalf("OpenParent(\".\") = %v, want ErrOutside", err)
	}
}
