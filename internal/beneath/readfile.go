package beneath

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrNotRegular is returned by ReadFile for something that is not a
// regular file: a folder, a FIFO, a device, a socket.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned by ReadFile for a file larger than asked.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads the regular file rel beneath dirfd, at most max bytes: the
// small files an agent can plant (a .git file, a manifest, a marker) are
// read without following a link on the way or at the end, without crossing
// a mount, and without blocking on a FIFO (it is opened non-blocking and
// refused). A file larger than max is ErrTooLarge; a missing one wraps
// os.ErrNotExist.
func (r Resolver) ReadFile(dirfd int, rel string, max int64) ([]byte, error) {
	pfd, name, err := r.OpenParent(dirfd, rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	switch {
	case err == unix.ELOOP:
		return nil, fmt.Errorf("read %q: %w", rel, ErrSymlink)
	case err != nil:
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %q: %s: %w", rel, fi.Mode().Type(), ErrNotRegular)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", rel, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("read %q: more than %d bytes: %w", rel, max, ErrTooLarge)
	}
	return data, nil
}

// ReadFileAt is ReadFile of an absolute path: beneath the folder holding
// it, which is opened without following a link at its last component.
func ReadFileAt(path string, max int64) ([]byte, error) {
	dir, name := filepath.Dir(path), filepath.Base(path)
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dfd)
	return Resolver{}.ReadFile(dfd, name, max)
}
