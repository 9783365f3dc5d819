package archive

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// keptXattr tells whether an extended attribute is archived: user data
// (user.*), file capabilities (security.capability), trusted.* (seen only
// by root) and POSIX ACLs. Other security.* labels (SELinux, IMA) belong to
// the host's policy, not to the runtime.
func keptXattr(name string) bool {
	return strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "trusted.") ||
		name == "security.capability" || name == "system.posix_acl_access" || name == "system.posix_acl_default"
}

// xattrs reads the kept extended attributes of name in dirfd without
// following a link (through the descriptor's /proc path, so nothing of the
// tree's own path is resolved again). A filesystem without xattrs gives
// none.
func (t *tarWriter) xattrs(dirfd int, name, rel string) map[string][]byte {
	path := "/proc/self/fd/" + strconv.Itoa(dirfd) + "/" + name
	return collectXattrs(func(dest []byte) (int, error) { return unix.Llistxattr(path, dest) },
		func(name string, dest []byte) (int, error) { return unix.Lgetxattr(path, name, dest) })
}

// xattrsFD reads the kept extended attributes of an open file or folder.
func (t *tarWriter) xattrsFD(fd int, rel string) map[string][]byte {
	return collectXattrs(func(dest []byte) (int, error) { return unix.Flistxattr(fd, dest) },
		func(name string, dest []byte) (int, error) { return unix.Fgetxattr(fd, name, dest) })
}

// collectXattrs lists and reads the kept attributes: one system call for a
// file that has none, the common case.
func collectXattrs(list func([]byte) (int, error), get func(string, []byte) (int, error)) map[string][]byte {
	var small [256]byte
	n, err := list(small[:])
	if err == unix.ERANGE {
		if n, err = list(nil); err == nil {
			buf := make([]byte, n)
			n, err = list(buf)
			return pickXattrs(buf[:max(n, 0)], err, get)
		}
	}
	return pickXattrs(small[:max(n, 0)], err, get)
}

func pickXattrs(buf []byte, err error, get func(string, []byte) (int, error)) map[string][]byte {
	n := len(buf)
	if err != nil || n == 0 {
		return nil
	}
	var out map[string][]byte
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if !keptXattr(name) {
			continue
		}
		sz, err := get(name, nil)
		if err != nil {
			continue
		}
		v := make([]byte, sz)
		if sz, err = get(name, v); err != nil {
			continue
		}
		if out == nil {
			out = map[string][]byte{}
		}
		out[name] = v[:sz]
	}
	return out
}

// dataMap returns the data extents of a file with holes ("off+len,...",
// see paxData), "" for a file without any.
func dataMap(fd int, size, blocks int64) (string, error) {
	if size == 0 || blocks*512 >= size {
		return "", nil // fully allocated: no hole worth a map
	}
	var b strings.Builder
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole to the end
		}
		if err != nil {
			if errors.Is(err, unix.EINVAL) {
				return "", nil // no SEEK_DATA here: stored dense
			}
			return "", err
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return "", err
		}
		hole = min(hole, size)
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d+%d", data, hole-data)
		off = hole
	}
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		return "", err
	}
	if b.Len() == 0 {
		return "0+0", nil // all hole
	}
	if b.String() == "0+"+strconv.FormatInt(size, 10) {
		return "", nil
	}
	return b.String(), nil
}

// extent is one data extent of a sparse file.
type extent struct{ off, n int64 }

// parseDataMap reads a paxData value, refusing extents that overlap, go
// backwards or pass size.
func parseDataMap(s string, size int64) ([]extent, error) {
	var out []extent
	end := int64(0)
	for _, part := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(part, "+")
		off, err1 := strconv.ParseInt(a, 10, 64)
		n, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || off < end || n < 0 || off+n > size {
			return nil, fmt.Errorf("bad sparse map %q", s)
		}
		if n > 0 {
			out = append(out, extent{off, n})
		}
		end = off + n
	}
	return out, nil
}
