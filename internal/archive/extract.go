package archive

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/sink"
)

// ErrUnsafe reports an archive entry that ExtractTar refuses: an absolute
// path, "..", a path through a symbolic link, a duplicate, a hard link to
// something that is not an earlier regular file, a device or fifo.
var ErrUnsafe = errors.New("unsafe archive entry")

// decoderWindow is the largest zstd window a reader accepts, so a hostile
// frame header cannot make it allocate without bound.
const decoderWindow = 64 << 20

func newDecoder(r io.Reader) (*zstd.Decoder, error) {
	return zstd.NewReader(r,
		zstd.WithDecoderConcurrency(min(2, runtime.GOMAXPROCS(0))),
		zstd.WithDecoderMaxWindow(decoderWindow),
		zstd.WithDecoderLowmem(true))
}

func entryType(flag byte) string {
	switch flag {
	case tar.TypeReg: // the reader turns the old TypeRegA into TypeReg
		return TypeFile
	case tar.TypeDir:
		return TypeDir
	case tar.TypeSymlink:
		return TypeSymlink
	case tar.TypeLink:
		return TypeHardlink
	case tar.TypeFifo:
		return TypeFifo
	}
	return fmt.Sprintf("type %q", flag)
}

// VerifyTar reads the .tar.zst at path back, decompressing it whole, and
// checks every entry against want (TarStats.Entries of the write): same
// order, path, type, mode, mtime, size, SHA-256 of the content and link
// target, nothing missing and nothing extra. The zstd frame checksums are
// checked too, to the last byte. Differences wrap ErrMismatch.
func VerifyTar(ctx context.Context, path string, want []TarEntry) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("verify tar: %w", err)
	}
	defer f.Close()
	return verifyTar(ctx, path, f, want)
}

// verifyTar is VerifyTar of a stream; name is for messages.
func verifyTar(ctx context.Context, path string, f io.Reader, want []TarEntry) error {
	dec, err := newDecoder(f)
	if err != nil {
		return fmt.Errorf("verify tar %s: %w", path, err)
	}
	defer dec.Close()
	mismatch := func(format string, args ...any) error {
		return fmt.Errorf("verify tar %s: %s: %w", path, fmt.Sprintf(format, args...), ErrMismatch)
	}
	tr := tar.NewReader(dec)
	buf := make([]byte, copyBuf)
	i := 0
	for ; ; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("verify tar %s: entry %d: %w (%w)", path, i, ErrMismatch, err)
		}
		if i >= len(want) {
			return mismatch("entry %d %q was not written", i, hdr.Name)
		}
		w := want[i]
		got := TarEntry{
			Path:    cleanName(hdr.Name),
			Type:    entryType(hdr.Typeflag),
			Mode:    uint32(hdr.Mode) & 0o7777,
			Link:    hdr.Linkname,
			ModTime: hdr.ModTime,
			UID:     hdr.Uid,
			GID:     hdr.Gid,
			Xattrs:  headerXattrs(hdr),
			Data:    hdr.PAXRecords[paxData],
		}
		if got.Type == TypeFile {
			got.Size = hdr.Size
		}
		if got.Path != w.Path || got.Type != w.Type || got.Mode != w.Mode || got.Link != w.Link ||
			got.Size != w.Size || !got.ModTime.Equal(w.ModTime) || got.UID != w.UID || got.GID != w.GID ||
			got.Data != w.Data || !sameXattrs(got.Xattrs, w.Xattrs) {
			return mismatch("entry %d is %+v, want %+v", i, got, w)
		}
		if got.Type == TypeFile {
			h := sha256.New()
			n, err := sink.CopyContext(ctx, h, tr, buf)
			if err != nil {
				return fmt.Errorf("verify tar %s: %q: %w (%w)", path, w.Path, ErrMismatch, err)
			}
			if n != w.Size || hex.EncodeToString(h.Sum(nil)) != w.SHA256 {
				return mismatch("%q: content differs (%d bytes read)", w.Path, n)
			}
		}
	}
	if i != len(want) {
		return mismatch("%d entries, want %d", i, len(want))
	}
	// Read to the end of the zstd stream so the last frame's checksum is
	// checked and trailing garbage is noticed.
	if _, err := sink.CopyContext(ctx, io.Discard, dec, buf); err != nil {
		return fmt.Errorf("verify tar %s: after the last entry: %w (%w)", path, ErrMismatch, err)
	}
	return nil
}

// ExtractTar extracts the .tar.zst at path into dest, which must not exist
// or be an empty directory. It refuses (ErrUnsafe) absolute paths, "..",
// paths through symbolic links (links are created last, and every path is
// resolved beneath dest without following any link), duplicates, hard
// links to anything but an earlier regular file of the archive, and
// devices and sockets. It restores exactly what WriteTar kept: modes (less
// setuid and setgid on files: never grant a privilege from an archive),
// modification and access times, FIFOs, the holes of sparse files, and,
// when running as root, owner and group and every kept extended attribute
// (file capabilities are set after the owner, which would clear them).
// Not as root, ownership stays the restorer's and attributes the kernel
// refuses for lack of privilege (trusted.*, security.capability) are left
// out; any other failure to restore one fails the extraction. On error dest
// may hold part of the tree, never anything outside it.
func ExtractTar(ctx context.Context, path, dest string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("extract tar: %w", err)
	}
	defer f.Close()
	if err := extractTar(ctx, f, dest); err != nil {
		return fmt.Errorf("extract tar %s into %s: %w", path, dest, err)
	}
	return nil
}

type pendingLink struct {
	rel, target string
	ts          []unix.Timespec
	own         owner
}

type pendingDir struct {
	rel  string
	mode uint32
	ts   []unix.Timespec
	own  owner
}

// owner is who an entry belongs to and its extended attributes, applied
// after the entry is made.
type owner struct {
	uid, gid int
	xattrs   map[string][]byte
}

func extractTar(ctx context.Context, f io.Reader, dest string) error {
	if err := os.Mkdir(dest, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	destfd, err := unix.Open(dest, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dest, err)
	}
	defer unix.Close(destfd)
	if names, err := readNames(destfd); err != nil {
		return err
	} else if len(names) > 0 {
		return fmt.Errorf("%s is not empty: %w", dest, os.ErrExist)
	}
	dec, err := newDecoder(f)
	if err != nil {
		return err
	}
	defer dec.Close()
	tr := tar.NewReader(dec)
	var (
		res   beneath.Resolver
		buf   = make([]byte, copyBuf)
		seen  = map[string]string{} // rel -> type
		links []pendingLink
		dirs  []pendingDir
	)
	unsafe := func(name, why string) error {
		return fmt.Errorf("entry %q: %s: %w", name, why, ErrUnsafe)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, tar.ErrInsecurePath) {
			return unsafe(hdr.Name, err.Error())
		}
		if err != nil {
			return err
		}
		if strings.HasPrefix(hdr.Name, "/") {
			return unsafe(hdr.Name, "absolute path")
		}
		parts, err := beneath.Split(hdr.Name)
		if err != nil {
			return unsafe(hdr.Name, "leaves the destination")
		}
		rel := strings.Join(parts, "/")
		typ := entryType(hdr.Typeflag)
		atime := hdr.AccessTime
		if atime.IsZero() {
			atime = hdr.ModTime
		}
		ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
		mode := uint32(hdr.Mode) & 0o7777
		own := owner{uid: hdr.Uid, gid: hdr.Gid, xattrs: headerXattrs(hdr)}
		if rel == "" {
			if typ != TypeDir {
				return unsafe(hdr.Name, "the root must be a directory")
			}
			dirs = append(dirs, pendingDir{rel: "", mode: mode, ts: ts, own: own})
			continue
		}
		if _, dup := seen[rel]; dup {
			return unsafe(hdr.Name, "appears twice")
		}
		for i := range len(rel) {
			if rel[i] != '/' {
				continue
			}
			if t, ok := seen[rel[:i]]; ok && t != TypeDir {
				return unsafe(hdr.Name, "goes through "+t+" "+rel[:i])
			}
		}
		seen[rel] = typ
		if typ == TypeSymlink {
			// Created after everything else: nothing can be written
			// through a link this archive made.
			links = append(links, pendingLink{rel: rel, target: hdr.Linkname, ts: ts, own: own})
			continue
		}
		pfd, base, err := res.OpenParent(destfd, rel)
		if err != nil {
			if errors.Is(err, beneath.ErrSymlink) || errors.Is(err, beneath.ErrOutside) || errors.Is(err, beneath.ErrMountPoint) {
				return unsafe(hdr.Name, err.Error())
			}
			return fmt.Errorf("entry %q: parent: %w", hdr.Name, err)
		}
		switch typ {
		case TypeDir:
			err = unix.Mkdirat(pfd, base, 0o700)
			dirs = append(dirs, pendingDir{rel: rel, mode: mode, ts: ts, own: own})
		case TypeFile:
			var data []extent
			if m, ok := hdr.PAXRecords[paxData]; ok {
				if data, err = parseDataMap(m, hdr.Size); err != nil {
					unix.Close(pfd)
					return unsafe(hdr.Name, err.Error())
				}
			}
			err = extractFile(ctx, pfd, base, tr, hdr.Size, mode&^(unix.S_ISUID|unix.S_ISGID), ts, buf, own, data, hdr.PAXRecords[paxData] != "")
		case TypeFifo:
			err = unix.Mkfifoat(pfd, base, 0o600)
			if err == nil {
				err = finish(pfd, base, own, mode, ts)
			}
		case TypeHardlink:
			target, terr := beneath.Split(hdr.Linkname)
			trel := strings.Join(target, "/")
			if terr != nil || seen[trel] != TypeFile {
				unix.Close(pfd)
				return unsafe(hdr.Name, fmt.Sprintf("hard link to %q, not an earlier file of the archive", hdr.Linkname))
			}
			seen[rel] = TypeFile
			var ofd int
			var obase string
			ofd, obase, err = res.OpenParent(destfd, trel)
			if err == nil {
				err = unix.Linkat(ofd, obase, pfd, base, 0)
				unix.Close(ofd)
			}
		default:
			unix.Close(pfd)
			return unsafe(hdr.Name, "not a file, directory or link ("+typ+")")
		}
		unix.Close(pfd)
		if err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	for _, l := range links {
		pfd, base, err := res.OpenParent(destfd, l.rel)
		if err != nil {
			return unsafe(l.rel, err.Error())
		}
		err = unix.Symlinkat(l.target, pfd, base)
		if err == nil {
			err = l.own.apply(pfd, base, true)
		}
		if err == nil {
			err = unix.UtimesNanoAt(pfd, base, l.ts, unix.AT_SYMLINK_NOFOLLOW)
		}
		unix.Close(pfd)
		if err != nil {
			return fmt.Errorf("symlink %q: %w", l.rel, err)
		}
	}
	// Deepest first (reverse of archive order), so a read-only directory
	// is closed only after its children, and mtimes stay as set.
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		fd, err := res.OpenDir(destfd, d.rel)
		if err != nil {
			return fmt.Errorf("dir %q: %w", d.rel, err)
		}
		err = d.own.apply(fd, "", false)
		if err == nil {
			err = unix.Fchmod(fd, d.mode)
		}
		unix.Close(fd)
		if err == nil {
			err = setTimes(res, destfd, d.rel, d.ts)
		}
		if err != nil {
			return fmt.Errorf("dir %q: %w", d.rel, err)
		}
	}
	// Read to the end so a corrupt tail is reported.
	_, err = sink.CopyContext(ctx, io.Discard, dec, buf)
	return err
}

func extractFile(ctx context.Context, pfd int, base string, r io.Reader, size int64, mode uint32, ts []unix.Timespec, buf []byte, own owner, data []extent, sparse bool) error {
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	if sparse {
		err = writeSparse(ctx, f, r, size, data, buf)
	} else {
		var n int64
		n, err = sink.CopyContext(ctx, f, r, buf)
		if err == nil && n != size {
			err = fmt.Errorf("%d bytes, want %d: %w", n, size, io.ErrUnexpectedEOF)
		}
	}
	if err != nil {
		return err
	}
	if err := own.apply(fd, "", false); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// setTimes sets the mtime of rel beneath destfd ("" is destfd itself)
// without following a link.
func setTimes(res beneath.Resolver, destfd int, rel string, ts []unix.Timespec) error {
	if rel == "" {
		return unix.UtimesNanoAt(destfd, ".", ts, 0)
	}
	pfd, base, err := res.OpenParent(destfd, rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// writeSparse writes only the data extents of a file from r (which holds
// the whole content, holes as zeros), then sets its size: the holes come
// back as holes. Bytes between extents must be zeros.
func writeSparse(ctx context.Context, f *os.File, r io.Reader, size int64, data []extent, buf []byte) error {
	pos := int64(0)
	skipZeros := func(n int64) error {
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := io.ReadFull(r, buf[:k]); err != nil {
				return err
			}
			for _, c := range buf[:k] {
				if c != 0 {
					return fmt.Errorf("data in a hole of the sparse map: %w", ErrUnsafe)
				}
			}
			n -= k
		}
		return nil
	}
	for _, e := range data {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := skipZeros(e.off - pos); err != nil {
			return err
		}
		if _, err := f.Seek(e.off, io.SeekStart); err != nil {
			return err
		}
		n, err := sink.CopyContext(ctx, f, io.LimitReader(r, e.n), buf)
		if err != nil {
			return err
		}
		if n != e.n {
			return io.ErrUnexpectedEOF
		}
		pos = e.off + e.n
	}
	if err := skipZeros(size - pos); err != nil {
		return err
	}
	return f.Truncate(size)
}

// finish gives a new FIFO its owner, attributes, mode and times.
func finish(pfd int, base string, own owner, mode uint32, ts []unix.Timespec) error {
	if err := own.apply(pfd, base, true); err != nil {
		return err
	}
	if err := unix.Fchmodat(pfd, base, mode&^(unix.S_ISUID|unix.S_ISGID), 0); err != nil {
		return err
	}
	return unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// headerXattrs reads the extended attributes of a tar header.
func headerXattrs(hdr *tar.Header) map[string][]byte {
	var out map[string][]byte
	for k, v := range hdr.PAXRecords {
		if name, ok := strings.CutPrefix(k, paxXattr); ok && keptXattr(name) {
			if out == nil {
				out = map[string][]byte{}
			}
			out[name] = []byte(v)
		}
	}
	return out
}

func sameXattrs(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || string(w) != string(v) {
			return false
		}
	}
	return true
}

var isRoot = os.Geteuid() == 0

// apply sets the owner (as root) and then the extended attributes of fd
// itself (base "") or of base in fd, without following a link. Ownership
// goes first: chown clears file capabilities.
func (o owner) apply(fd int, base string, noFollow bool) error {
	path := "/proc/self/fd/" + strconv.Itoa(fd)
	if base != "" {
		path += "/" + base
	}
	if isRoot {
		var err error
		if base == "" {
			err = unix.Fchown(fd, o.uid, o.gid)
		} else {
			err = unix.Fchownat(fd, base, o.uid, o.gid, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	for name, v := range o.xattrs {
		var err error
		if noFollow {
			err = unix.Lsetxattr(path, name, v, 0)
		} else {
			err = unix.Setxattr(path, name, v, 0)
		}
		if err != nil && !isRoot && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)) {
			continue // a privilege this restorer does not have
		}
		if err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}
