package beneath

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	// ErrSymlink reports a symbolic link where a real file or directory was
	// required. Links are never followed.
	ErrSymlink = errors.New("is a symbolic link")
	// ErrMountPoint reports that resolving the path would cross into another
	// mount.
	ErrMountPoint = errors.New("is on another mount")
	// ErrOutside reports a path that is absolute or climbs with "..".
	ErrOutside = errors.New("leaves the base directory")
)

// Resolver opens paths beneath a base descriptor. The zero value uses
// openat2 when the kernel has it.
type Resolver struct {
	// Fallback forces the component-by-component walk even where openat2
	// works, so both paths can be tested on one kernel.
	Fallback bool
}

const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS |
	unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS

var (
	probeOnce    sync.Once
	haveOpenat2  bool
	haveStatxMnt bool
)

func probe() {
	probeOnce.Do(func() {
		fd, err := unix.Openat2(unix.AT_FDCWD, ".", &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: resolveFlags,
		})
		if err == nil {
			unix.Close(fd)
			haveOpenat2 = true
		}
		var st unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, "/", 0, unix.STATX_MNT_ID, &st); err == nil && st.Mask&unix.STATX_MNT_ID != 0 {
			haveStatxMnt = true
		}
	})
}

// HaveOpenat2 tells whether the kernel resolves paths with openat2.
func HaveOpenat2() bool { probe(); return haveOpenat2 }

func (r Resolver) useOpenat2() bool { return !r.Fallback && HaveOpenat2() }

// Split checks a relative path and returns its components. An empty path or
// "." yields no components (the base itself).
func Split(rel string) ([]string, error) {
	if strings.HasPrefix(rel, "/") {
		return nil, fmt.Errorf("resolve %q: %w", rel, ErrOutside)
	}
	var parts []string
	for _, p := range strings.Split(rel, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			return nil, fmt.Errorf("resolve %q: %w", rel, ErrOutside)
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// OpenDir opens the directory rel beneath dirfd for reading. Every component
// must be a real directory on dirfd's mount.
func (r Resolver) OpenDir(dirfd int, rel string) (int, error) {
	parts, err := Split(rel)
	if err != nil {
		return -1, err
	}
	if len(parts) == 0 {
		fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, fmt.Errorf("open %q: %w", rel, err)
		}
		return fd, nil
	}
	if r.useOpenat2() {
		fd, err := openat2Dir(dirfd, strings.Join(parts, "/"))
		if err != nil {
			return -1, r.classify(dirfd, parts, err)
		}
		return fd, nil
	}
	return r.walk(dirfd, parts)
}

// OpenChild opens one directory entry, name (no slash), of dirfd as a
// directory. It is the hot path of the tree walkers.
func (r Resolver) OpenChild(dirfd int, name string) (int, error) {
	if r.useOpenat2() {
		fd, err := openat2Dir(dirfd, name)
		if err != nil {
			return -1, r.classify(dirfd, []string{name}, err)
		}
		return fd, nil
	}
	return r.walk(dirfd, []string{name})
}

func openat2Dir(dirfd int, rel string) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: resolveFlags,
		})
		if err == unix.EINTR || err == unix.EAGAIN {
			// EAGAIN: a concurrent rename or mount raced the lookup; the
			// kernel asks for a retry.
			continue
		}
		return fd, err
	}
}

// walk opens parts one at a time with O_NOFOLLOW and compares mount ids.
func (r Resolver) walk(dirfd int, parts []string) (int, error) {
	cur := dirfd
	curMnt, err := MountID(dirfd)
	if err != nil {
		return -1, err
	}
	for i, p := range parts {
		fd, err := unix.Openat(cur, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			err = r.classify(cur, parts[i:i+1], err)
			if cur != dirfd {
				unix.Close(cur)
			}
			if len(parts) > 1 {
				err = fmt.Errorf("resolve %q: %w", strings.Join(parts, "/"), err)
			}
			return -1, err
		}
		mnt, err := MountID(fd)
		if err == nil && mnt != curMnt {
			err = fmt.Errorf("open %q: %w", strings.Join(parts[:i+1], "/"), ErrMountPoint)
		}
		if cur != dirfd {
			unix.Close(cur)
		}
		if err != nil {
			unix.Close(fd)
			return -1, err
		}
		cur = fd
	}
	return cur, nil
}

// classify turns the kernel's errors into this package's, looking at the
// offending entry without following it.
func (r Resolver) classify(dirfd int, parts []string, err error) error {
	rel := strings.Join(parts, "/")
	switch err {
	case unix.EXDEV:
		// Split rejected every lexical escape, so EXDEV is a mount crossing.
		return fmt.Errorf("open %q: %w", rel, ErrMountPoint)
	case unix.ELOOP, unix.ENOTDIR:
		if len(parts) == 1 {
			var st unix.Stat_t
			if unix.Fstatat(dirfd, parts[0], &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return fmt.Errorf("open %q: %w", rel, ErrSymlink)
			}
		} else if !r.Fallback {
			// openat2 does not say which component failed: walk them
			// one by one to tell a link from a file in the way.
			fd, werr := Resolver{Fallback: true}.walk(dirfd, parts)
			if werr == nil {
				unix.Close(fd) // replaced meanwhile; report what openat2 saw
			} else if errors.Is(werr, ErrSymlink) || errors.Is(werr, ErrMountPoint) {
				return werr
			}
		}
	}
	return fmt.Errorf("open %q: %w", rel, err)
}

// MountID returns the id of the mount holding fd. Where statx cannot tell
// (kernels before 5.8), it returns the device number, which still separates
// different filesystems.
func MountID(fd int) (uint64, error) {
	probe()
	if haveStatxMnt {
		var st unix.Statx_t
		if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &st); err != nil {
			return 0, fmt.Errorf("statx mount id: %w", err)
		}
		return st.Mnt_id, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("stat mount id: %w", err)
	}
	return st.Dev, nil
}

// IsMountPoint tells whether name in dirfd is the root of a mount other
// than dirfd's, without following a symbolic link.
func IsMountPoint(dirfd int, name string) (bool, error) {
	probe()
	parent, err := MountID(dirfd)
	if err != nil {
		return false, err
	}
	if haveStatxMnt {
		var st unix.Statx_t
		if err := unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st); err != nil {
			return false, fmt.Errorf("statx %q: %w", name, err)
		}
		return st.Mnt_id != parent, nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, fmt.Errorf("stat %q: %w", name, err)
	}
	return st.Dev != parent, nil
}

// OpenParent opens the directory holding rel beneath dirfd and returns it
// with the last component's name. rel must name something below the base.
func (r Resolver) OpenParent(dirfd int, rel string) (fd int, name string, err error) {
	parts, err := Split(rel)
	if err != nil {
		return -1, "", err
	}
	if len(parts) == 0 {
		return -1, "", fmt.Errorf("resolve %q: names the base itself: %w", rel, ErrOutside)
	}
	fd, err = r.OpenDir(dirfd, strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return -1, "", err
	}
	return fd, parts[len(parts)-1], nil
}
