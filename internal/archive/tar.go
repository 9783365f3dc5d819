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
	"path/filepath"
	"runtime"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/sink"
)

// Entry types of a TarEntry.
const (
	TypeFile     = "file"
	TypeDir      = "dir"
	TypeSymlink  = "symlink"
	TypeHardlink = "hardlink" // Link names the earlier entry it shares data with
	TypeFifo     = "fifo"
)

// PAX records of what plain tar headers cannot say.
const (
	// paxXattr prefixes an extended attribute (as GNU tar and bsdtar
	// write them).
	paxXattr = "SCHILY.xattr."
	// paxData lists the data extents of a sparse file ("off+len,..."):
	// what is not listed is a hole. The entry's content is the whole file,
	// holes as zeros (they compress to nothing), so any tar reader gets the
	// right bytes; ExtractTar writes only the extents and so restores the
	// holes.
	paxData = "RECLAIMER.data"
)

// TarEntry is one entry of a tar archive as written: the manifest that
// VerifyTar checks the archive against.
type TarEntry struct {
	Path    string    `json:"path"` // slash-separated, relative to the root; "." is the root
	Type    string    `json:"type"`
	Mode    uint32    `json:"mode"` // permission bits with setuid, setgid, sticky
	Size    int64     `json:"size,omitempty"`
	SHA256  string    `json:"sha256,omitempty"` // hex, regular files only
	Link    string    `json:"link,omitempty"`   // symlink target or hard link's first path
	ModTime time.Time `json:"mtime"`
	UID     int       `json:"uid"`
	GID     int       `json:"gid"`
	// Xattrs are the extended attributes kept (user.*, security.capability,
	// trusted.*, POSIX ACLs).
	Xattrs map[string][]byte `json:"xattrs,omitempty"`
	// Data is the sparse map of a file with holes (see paxData).
	Data string `json:"data,omitempty"`
}

// Skipped is an entry WriteTar left out, and why.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Reasons for Skipped.
const (
	SkipMountPoint = "mount point"
	SkipSpecial    = "socket or device"
)

// TarOptions tune WriteTar.
type TarOptions struct {
	// Exclude, when set, leaves out the entry at rel (slash-separated,
	// relative to the root) and, for a directory, everything below it.
	Exclude func(rel string, isDir bool) bool
	// Level is the zstd level; zero means zstd.SpeedDefault.
	Level zstd.EncoderLevel
}

// TarStats tells what WriteTar stored.
type TarStats struct {
	Files, Dirs, Symlinks, Hardlinks, Fifos int
	// Bytes is the content of the regular files stored (uncompressed).
	Bytes int64
	// Entries is the manifest of the archive, in archive order.
	Entries []TarEntry
	// Skipped are mount points and special files, not stored.
	Skipped []Skipped
	// Excluded are the paths TarOptions.Exclude left out.
	Excluded []string
}

// encoderWindow bounds the zstd window, and so the encoder's memory.
const encoderWindow = 4 << 20

func newEncoder(w io.Writer, level zstd.EncoderLevel) (*zstd.Encoder, error) {
	if level == 0 {
		level = zstd.SpeedDefault
	}
	return zstd.NewWriter(w,
		zstd.WithEncoderLevel(level),
		zstd.WithWindowSize(encoderWindow),
		zstd.WithEncoderConcurrency(min(2, runtime.GOMAXPROCS(0))),
		zstd.WithEncoderCRC(true))
}

// WriteTar writes the tree at root as a zstd-compressed PAX tar to w,
// streaming: memory does not grow with the size of the files, only with
// the number of entries (the manifest in TarStats). Symbolic links are
// stored as links and never followed; mount points below root are skipped
// and reported, as are sockets and devices. Hard links within the tree are
// stored as tar hard links to the first path seen. Everything a restore
// needs to be exact goes in PAX records: owner and group, mode, modification
// and access times, extended attributes (user.*, security.capability,
// trusted.*, POSIX ACLs), the holes of sparse files, and FIFOs.
//
// A file that shrinks while it is read fails the whole call: an archive is
// only worth something complete.
func WriteTar(ctx context.Context, root string, w io.Writer, opts TarOptions) (TarStats, error) {
	enc, err := newEncoder(w, opts.Level)
	if err != nil {
		return TarStats{}, fmt.Errorf("write tar: %w", err)
	}
	tw := &tarWriter{
		ctx:   ctx,
		tw:    tar.NewWriter(enc),
		opts:  opts,
		buf:   make([]byte, copyBuf),
		links: map[fileID]string{},
	}
	st, err := tw.run(root)
	if err == nil {
		err = tw.tw.Close()
	}
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return st, fmt.Errorf("write tar of %s: %w", root, err)
	}
	return st, nil
}

// WriteTarFile writes the tree at root to path as a .tar.zst, through a
// temporary file beside path that is fsynced and then renamed into place.
func WriteTarFile(ctx context.Context, root, path string, opts TarOptions) (Object, TarStats, error) {
	var st TarStats
	obj, err := writeAtomic(ctx, path, func(w io.Writer) error {
		var err error
		st, err = WriteTar(ctx, root, w, opts)
		return err
	})
	if err != nil {
		return Object{}, st, fmt.Errorf("write tar file %s: %w", path, err)
	}
	obj.Kind = KindTar
	obj.Root = root
	return obj, st, nil
}

type fileID struct{ dev, ino uint64 }

type tarWriter struct {
	ctx     context.Context
	tw      *tar.Writer
	opts    TarOptions
	buf     []byte
	links   map[fileID]string
	st      TarStats
	rootMnt uint64
	useMnt  bool
}

func (t *tarWriter) run(root string) (TarStats, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return t.st, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(fd)
	var sx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_MNT_ID, &sx); err != nil {
		return t.st, fmt.Errorf("statx %s: %w", root, err)
	}
	t.useMnt = sx.Mask&unix.STATX_MNT_ID != 0
	t.rootMnt = mountOf(&sx, t.useMnt)
	if err := t.header(".", &sx, TypeDir, "", t.xattrsFD(fd, "."), ""); err != nil {
		return t.st, err
	}
	err = t.dir(fd, "")
	return t.st, err
}

func mountOf(sx *unix.Statx_t, useMnt bool) uint64 {
	if useMnt {
		return sx.Mnt_id
	}
	return unix.Mkdev(sx.Dev_major, sx.Dev_minor)
}

// dir stores the entries of the open directory fd, whose path is rel.
func (t *tarWriter) dir(fd int, rel string) error {
	names, err := readNames(fd)
	if err != nil {
		return fmt.Errorf("read dir %q: %w", rel, err)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		child := name
		if rel != "" {
			child = rel + "/" + name
		}
		if err := t.entry(fd, name, child); err != nil {
			return err
		}
	}
	return nil
}

// readNames lists a directory without following or stat-ing anything.
func readNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	return f.Readdirnames(-1)
}

func (t *tarWriter) entry(dirfd int, name, rel string) error {
	var sx unix.Statx_t
	if err := unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_MNT_ID, &sx); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone since the listing
		}
		return fmt.Errorf("statx %q: %w", rel, err)
	}
	mode := uint32(sx.Mode) & unix.S_IFMT
	isDir := mode == unix.S_IFDIR
	if t.opts.Exclude != nil && t.opts.Exclude(rel, isDir) {
		t.st.Excluded = append(t.st.Excluded, rel)
		return nil
	}
	if (isDir || mode == unix.S_IFREG) && mountOf(&sx, t.useMnt) != t.rootMnt {
		t.st.Skipped = append(t.st.Skipped, Skipped{Path: rel, Reason: SkipMountPoint})
		return nil
	}
	switch mode {
	case unix.S_IFDIR:
		fd, err := beneath.Resolver{}.OpenChild(dirfd, name)
		if errors.Is(err, beneath.ErrMountPoint) {
			t.st.Skipped = append(t.st.Skipped, Skipped{Path: rel, Reason: SkipMountPoint})
			return nil
		}
		if err != nil {
			return fmt.Errorf("open dir %q: %w", rel, err)
		}
		defer unix.Close(fd)
		if err := t.header(rel, &sx, TypeDir, "", t.xattrsFD(fd, rel), ""); err != nil {
			return err
		}
		t.st.Dirs++
		return t.dir(fd, rel)
	case unix.S_IFLNK:
		target, err := readlinkat(dirfd, name)
		if err != nil {
			return fmt.Errorf("readlink %q: %w", rel, err)
		}
		t.st.Symlinks++
		return t.header(rel, &sx, TypeSymlink, target, t.xattrs(dirfd, name, rel), "")
	case unix.S_IFREG:
		return t.file(dirfd, name, rel, &sx)
	case unix.S_IFIFO:
		t.st.Fifos++
		return t.header(rel, &sx, TypeFifo, "", t.xattrs(dirfd, name, rel), "")
	default:
		t.st.Skipped = append(t.st.Skipped, Skipped{Path: rel, Reason: SkipSpecial})
		return nil
	}
}

func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

func (t *tarWriter) file(dirfd int, name, rel string, sx *unix.Statx_t) error {
	id := fileID{unix.Mkdev(sx.Dev_major, sx.Dev_minor), sx.Ino}
	if sx.Nlink > 1 {
		if first, ok := t.links[id]; ok {
			t.st.Hardlinks++
			return t.header(rel, sx, TypeHardlink, first, nil, "")
		}
	}
	// O_NONBLOCK: a fifo swapped in after the statx must not block us.
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("open %q: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var fs unix.Stat_t
	if err := unix.Fstat(fd, &fs); err != nil {
		return fmt.Errorf("stat %q: %w", rel, err)
	}
	if fs.Mode&unix.S_IFMT != unix.S_IFREG || fs.Ino != sx.Ino || fs.Dev != id.dev {
		return fmt.Errorf("archive %q: replaced while archiving", rel)
	}
	sx.Size = uint64(fs.Size)
	data, err := dataMap(fd, fs.Size, fs.Blocks)
	if err != nil {
		return fmt.Errorf("archive %q: map holes: %w", rel, err)
	}
	if err := t.header(rel, sx, TypeFile, "", t.xattrsFD(fd, rel), data); err != nil {
		return err
	}
	h := sha256.New()
	n, err := sink.CopyContext(t.ctx, io.MultiWriter(t.tw, h), io.LimitReader(f, fs.Size), t.buf)
	if err != nil {
		return fmt.Errorf("archive %q: %w", rel, err)
	}
	if n != fs.Size {
		return fmt.Errorf("archive %q: shrank from %d to %d bytes while archiving", rel, fs.Size, n)
	}
	e := &t.st.Entries[len(t.st.Entries)-1]
	e.SHA256 = hex.EncodeToString(h.Sum(nil))
	t.st.Files++
	t.st.Bytes += n
	if sx.Nlink > 1 {
		t.links[id] = rel
	}
	return nil
}

// header writes the tar header of one entry and records it in the
// manifest.
func (t *tarWriter) header(rel string, sx *unix.Statx_t, typ, link string, xattrs map[string][]byte, data string) error {
	e := TarEntry{
		Path:    rel,
		Type:    typ,
		Mode:    uint32(sx.Mode) & 0o7777,
		Link:    link,
		ModTime: time.Unix(sx.Mtime.Sec, int64(sx.Mtime.Nsec)),
		UID:     int(sx.Uid),
		GID:     int(sx.Gid),
		Xattrs:  xattrs,
		Data:    data,
	}
	hdr := &tar.Header{
		Name:       rel,
		Mode:       int64(e.Mode),
		Uid:        int(sx.Uid),
		Gid:        int(sx.Gid),
		ModTime:    e.ModTime,
		AccessTime: time.Unix(sx.Atime.Sec, int64(sx.Atime.Nsec)),
		Format:     tar.FormatPAX,
		PAXRecords: map[string]string{},
	}
	for k, v := range xattrs {
		hdr.PAXRecords[paxXattr+k] = string(v)
	}
	if data != "" {
		hdr.PAXRecords[paxData] = data
	}
	switch typ {
	case TypeDir:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case TypeSymlink:
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = link
	case TypeHardlink:
		hdr.Typeflag = tar.TypeLink
		hdr.Linkname = link
	case TypeFile:
		hdr.Typeflag = tar.TypeReg
		hdr.Size = int64(sx.Size)
		e.Size = hdr.Size
	case TypeFifo:
		hdr.Typeflag = tar.TypeFifo
	}
	if !utf8.ValidString(hdr.Name) || !utf8.ValidString(hdr.Linkname) {
		// Tell other readers (GNU tar, bsdtar) not to translate the
		// names: they are raw bytes, as the filesystem has them.
		hdr.PAXRecords["hdrcharset"] = "BINARY"
	}
	if err := t.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write header %q: %w", rel, err)
	}
	t.st.Entries = append(t.st.Entries, e)
	return nil
}

// cleanName turns a tar name into the manifest's form: no trailing slash,
// "." for the root.
func cleanName(name string) string {
	for len(name) > 1 && name[len(name)-1] == '/' {
		name = name[:len(name)-1]
	}
	if name == "./" || name == "" {
		return "."
	}
	return filepath.ToSlash(name)
}
