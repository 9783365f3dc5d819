package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/reclaimer/reclaimer/internal/testtree"
)

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func write(tb testing.TB, path string, data string, mode os.FileMode) {
	tb.Helper()
	must(tb, os.MkdirAll(filepath.Dir(path), 0o755))
	must(tb, os.WriteFile(path, []byte(data), mode))
	must(tb, os.Chmod(path, mode))
}

// randomFile writes size pseudo-random (incompressible) bytes.
func randomFile(tb testing.TB, path string, size int64, seed uint64) {
	tb.Helper()
	f, err := os.Create(path)
	must(tb, err)
	r := rand.NewChaCha8([32]byte{byte(seed)})
	_, err = io.CopyN(f, r, size)
	must(tb, err)
	must(tb, f.Close())
}

// layTree builds the tree the tar tests archive and returns the paths
// (relative) that must not appear in the archive.
func layTree(t *testing.T, root string, big int64) {
	t.Helper()
	must(t, os.MkdirAll(root, 0o755))
	write(t, filepath.Join(root, "src/main.go"), "package main\n", 0o644)
	write(t, filepath.Join(root, "src/run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	write(t, filepath.Join(root, "secret/key"), "s3cret", 0o600)
	must(t, os.Chmod(filepath.Join(root, "secret"), 0o700))
	write(t, filepath.Join(root, "bad\xff\xfe name.txt"), "not utf-8 name", 0o644)
	long := strings.Repeat("n", 255)
	write(t, filepath.Join(root, "deep", strings.Repeat("d", 200), long), "long name", 0o644)
	must(t, os.MkdirAll(filepath.Join(root, "empty"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "empty-private"), 0o700))
	must(t, os.Chmod(filepath.Join(root, "empty-private"), 0o700))
	must(t, os.Symlink("src/main.go", filepath.Join(root, "rel-link")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(root, "abs-link")))
	must(t, os.Symlink("does/not/exist", filepath.Join(root, "dangling")))
	must(t, os.Symlink("../../outside", filepath.Join(root, "src/outside-link")))
	must(t, os.Symlink("../secret", filepath.Join(root, "src/dir-link")))
	write(t, filepath.Join(root, "hard1"), "shared inode", 0o644)
	must(t, os.Link(filepath.Join(root, "hard1"), filepath.Join(root, "hard2")))
	write(t, filepath.Join(root, "node_modules/pkg/index.js"), "module.exports = 1\n", 0o644)
	write(t, filepath.Join(root, "src/node_modules/x.js"), "x\n", 0o644)
	if big > 0 {
		randomFile(t, filepath.Join(root, "big.bin"), big, 1)
	}
	must(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	l, err := net.Listen("unix", filepath.Join(root, "sock"))
	must(t, err)
	t.Cleanup(func() { l.Close() })
	// A fixed, sub-second mtime on one file and one directory.
	mt := time.Date(2021, 3, 4, 5, 6, 7, 891011121, time.UTC)
	must(t, os.Chtimes(filepath.Join(root, "src/main.go"), mt, mt))
	must(t, os.Chtimes(filepath.Join(root, "empty"), mt, mt))
}

func excludeNodeModules(rel string, isDir bool) bool {
	return isDir && (rel == "node_modules" || strings.HasSuffix(rel, "/node_modules"))
}

// dropLines removes fingerprint lines of the paths under any prefix.
func dropLines(fp string, prefixes ...string) string {
	var out []string
	for _, line := range strings.Split(fp, "\n") {
		keep := true
		for _, p := range prefixes {
			q := fmt.Sprintf("%q", p)
			q = q[:len(q)-1]
			if strings.HasPrefix(line, q+`"`) || strings.HasPrefix(line, q+`/`) {
				keep = false
			}
		}
		if keep {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func TestTarRoundTrip(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	src := filepath.Join(base, "src")
	layTree(t, src, 50<<20)
	// A tmpfs and a bind mount of the same filesystem below the root:
	// both are skipped and reported.
	testtree.MountTmpfs(t, filepath.Join(src, "tmpfs"), "size=1m")
	write(t, filepath.Join(src, "tmpfs/inside"), "on another fs", 0o644)
	bindSrc := filepath.Join(base, "bindsrc")
	write(t, filepath.Join(bindSrc, "f"), "bound", 0o644)
	testtree.BindMount(t, bindSrc, filepath.Join(src, "bound"))
	// mtime of the root is set last, after everything inside changed it.
	rootTime := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	must(t, os.Chtimes(src, rootTime, rootTime))

	out := filepath.Join(base, "ws.tar.zst")
	obj, st, err := WriteTarFile(ctx, src, out, TarOptions{Exclude: excludeNodeModules})
	must(t, err)

	if st.Files != 7 || st.Hardlinks != 1 || st.Symlinks != 5 {
		t.Errorf("stats: %d files, %d hard links, %d symlinks; want 7, 1, 5", st.Files, st.Hardlinks, st.Symlinks)
	}
	// dirs: src secret deep deep/ddd empty empty-private
	if st.Dirs != 6 {
		t.Errorf("stats: %d dirs, want 6", st.Dirs)
	}
	if st.Bytes < 50<<20 {
		t.Errorf("stats: %d bytes, want at least 50 MiB", st.Bytes)
	}
	wantSkipped := map[string]string{"sock": SkipSpecial, "tmpfs": SkipMountPoint, "bound": SkipMountPoint}
	if len(st.Skipped) != len(wantSkipped) {
		t.Errorf("skipped %v, want %v", st.Skipped, wantSkipped)
	}
	for _, s := range st.Skipped {
		if wantSkipped[s.Path] != s.Reason {
			t.Errorf("skipped %q for %q, want %q", s.Path, s.Reason, wantSkipped[s.Path])
		}
	}
	if strings.Join(st.Excluded, ",") != "node_modules,src/node_modules" {
		t.Errorf("excluded %q", st.Excluded)
	}
	fi, err := os.Stat(out)
	must(t, err)
	if obj.Bytes != fi.Size() || obj.Kind != KindTar || obj.Path != out {
		t.Errorf("object %+v, file has %d bytes", obj, fi.Size())
	}
	must(t, obj.Verify(ctx))
	if leftovers, _ := filepath.Glob(filepath.Join(base, ".ws.tar.zst.tmp-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	must(t, VerifyTar(ctx, out, st.Entries))

	dest := filepath.Join(base, "restored")
	must(t, ExtractTar(ctx, out, dest))

	want := dropLines(testtree.Fingerprint(t, src), "node_modules", "src/node_modules", "sock", "tmpfs", "bound")
	got := testtree.Fingerprint(t, dest)
	if got != want {
		t.Errorf("restored tree differs\n got:\n%s\nwant:\n%s", got, want)
	}
	for _, p := range []string{"node_modules", "src/node_modules", "sock", "tmpfs", "bound"} {
		if _, err := os.Lstat(filepath.Join(dest, p)); !os.IsNotExist(err) {
			t.Errorf("%s restored (err %v), want absent", p, err)
		}
	}
	// Hard links come back as hard links.
	var a, b syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(dest, "hard1"), &a))
	must(t, syscall.Stat(filepath.Join(dest, "hard2"), &b))
	if a.Ino != b.Ino {
		t.Errorf("hard1 and hard2 restored as separate files")
	}
	// Modes and mtimes, nanoseconds included.
	for _, c := range []struct {
		path  string
		mode  os.FileMode
		mtime time.Time
	}{
		{"src/main.go", 0o644, time.Date(2021, 3, 4, 5, 6, 7, 891011121, time.UTC)},
		{"empty", 0o755, time.Date(2021, 3, 4, 5, 6, 7, 891011121, time.UTC)},
		{".", 0o755, rootTime},
		{"secret", 0o700, time.Time{}},
		{"secret/key", 0o600, time.Time{}},
		{"src/run.sh", 0o755, time.Time{}},
	} {
		fi, err := os.Lstat(filepath.Join(dest, c.path))
		must(t, err)
		if fi.Mode().Perm() != c.mode {
			t.Errorf("%s: mode %o, want %o", c.path, fi.Mode().Perm(), c.mode)
		}
		if !c.mtime.IsZero() && !fi.ModTime().Equal(c.mtime) {
			t.Errorf("%s: mtime %v, want %v", c.path, fi.ModTime(), c.mtime)
		}
	}
	srcLink, err := os.Lstat(filepath.Join(src, "dangling"))
	must(t, err)
	dstLink, err := os.Lstat(filepath.Join(dest, "dangling"))
	must(t, err)
	if !dstLink.ModTime().Equal(srcLink.ModTime()) {
		t.Errorf("symlink mtime %v, want %v", dstLink.ModTime(), srcLink.ModTime())
	}

	// Extracting again into a non-empty folder is refused.
	if err := ExtractTar(ctx, out, dest); !errors.Is(err, os.ErrExist) {
		t.Errorf("extract into a non-empty folder: %v, want ErrExist", err)
	}
}

// The archive is readable by GNU tar too, non-UTF-8 names included.
func TestTarReadableByGNUTar(t *testing.T) {
	if _, err := os.Stat("/usr/bin/tar"); err != nil {
		t.Skip("no GNU tar")
	}
	ctx := context.Background()
	base := t.TempDir()
	src := filepath.Join(base, "src")
	must(t, os.MkdirAll(src, 0o755))
	write(t, filepath.Join(src, "bad\xff.txt"), "x", 0o644)
	must(t, os.Symlink("t\xfe", filepath.Join(src, "l")))
	var buf bytes.Buffer
	_, err := WriteTar(ctx, src, &buf, TarOptions{})
	must(t, err)
	dec, err := zstd.NewReader(&buf)
	must(t, err)
	raw := filepath.Join(base, "x.tar")
	f, err := os.Create(raw)
	must(t, err)
	_, err = io.Copy(f, dec)
	must(t, err)
	must(t, f.Close())
	dest := filepath.Join(base, "gnu")
	must(t, os.Mkdir(dest, 0o755))
	cmd := exec.Command("/usr/bin/tar", "-xf", raw, "-C", dest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	if data, err := os.ReadFile(filepath.Join(dest, "bad\xff.txt")); err != nil || string(data) != "x" {
		t.Errorf("GNU tar extracted %q, %v", data, err)
	}
	if target, err := os.Readlink(filepath.Join(dest, "l")); err != nil || target != "t\xfe" {
		t.Errorf("GNU tar link %q, %v", target, err)
	}
}

// memWriter samples the heap while the archive streams through it.
type memWriter struct {
	n, next int64
	peak    uint64
}

func (m *memWriter) Write(p []byte) (int, error) {
	m.n += int64(len(p))
	if m.n >= m.next {
		m.next = m.n + 1<<20
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		m.peak = max(m.peak, ms.HeapInuse)
	}
	return len(p), nil
}

func TestTarMemoryBounded(t *testing.T) {
	src := t.TempDir()
	const size = 50 << 20
	randomFile(t, filepath.Join(src, "big.bin"), size, 2)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline := ms.HeapInuse
	w := &memWriter{}
	st, err := WriteTar(context.Background(), src, w, TarOptions{})
	must(t, err)
	if st.Bytes != size || w.n < size {
		t.Fatalf("stored %d bytes, wrote %d, want %d", st.Bytes, w.n, size)
	}
	grew := int64(w.peak) - int64(baseline)
	t.Logf("heap in use grew by %.1f MiB while streaming a %d MiB file", float64(grew)/(1<<20), size>>20)
	if grew > 24<<20 {
		t.Errorf("heap in use grew by %d MiB; want well below the file's %d MiB", grew>>20, size>>20)
	}
}

func TestVerifyTarCatchesCorruption(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	src := filepath.Join(base, "src")
	layTree(t, src, 3<<20)
	out := filepath.Join(base, "a.tar.zst")
	obj, st, err := WriteTarFile(ctx, src, out, TarOptions{})
	must(t, err)
	must(t, VerifyTar(ctx, out, st.Entries))
	orig, err := os.ReadFile(out)
	must(t, err)

	flipped := bytes.Clone(orig)
	flipped[len(flipped)/2] ^= 0x40
	bad := filepath.Join(base, "flipped.tar.zst")
	must(t, os.WriteFile(bad, flipped, 0o644))
	if err := VerifyTar(ctx, bad, st.Entries); !errors.Is(err, ErrMismatch) {
		t.Errorf("flipped byte: VerifyTar = %v, want ErrMismatch", err)
	}
	if err := (Object{Path: bad, Bytes: obj.Bytes, SHA256: obj.SHA256}).Verify(ctx); !errors.Is(err, ErrMismatch) {
		t.Errorf("flipped byte: Object.Verify = %v, want ErrMismatch", err)
	}
	if err := ExtractTar(ctx, bad, filepath.Join(base, "x1")); err == nil {
		t.Errorf("flipped byte: ExtractTar succeeded")
	}

	for _, n := range []int{len(orig) / 2, len(orig) - 4, len(orig) - 1} {
		cut := filepath.Join(base, fmt.Sprintf("cut%d.tar.zst", n))
		must(t, os.WriteFile(cut, orig[:n], 0o644))
		if err := VerifyTar(ctx, cut, st.Entries); !errors.Is(err, ErrMismatch) {
			t.Errorf("truncated to %d of %d bytes: VerifyTar = %v, want ErrMismatch", n, len(orig), err)
		}
	}

	// A manifest that disagrees with a sound archive fails too.
	changed := append([]TarEntry(nil), st.Entries...)
	for i := range changed {
		if changed[i].Path == "secret/key" {
			changed[i].Mode = 0o644
		}
	}
	if err := VerifyTar(ctx, out, changed); !errors.Is(err, ErrMismatch) {
		t.Errorf("changed mode: VerifyTar = %v, want ErrMismatch", err)
	}
	if err := VerifyTar(ctx, out, st.Entries[:len(st.Entries)-1]); !errors.Is(err, ErrMismatch) {
		t.Errorf("entry missing from manifest: VerifyTar = %v, want ErrMismatch", err)
	}
	if err := VerifyTar(ctx, out, append(st.Entries, TarEntry{Path: "extra", Type: TypeDir})); !errors.Is(err, ErrMismatch) {
		t.Errorf("entry missing from archive: VerifyTar = %v, want ErrMismatch", err)
	}
}

// hostile writes a .tar.zst with the given headers (and bodies for files).
func hostile(t *testing.T, path string, hdrs []*tar.Header) {
	t.Helper()
	f, err := os.Create(path)
	must(t, err)
	enc, err := zstd.NewWriter(f)
	must(t, err)
	tw := tar.NewWriter(enc)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len("pwned"))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		must(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte("pwned"))
			must(t, err)
		}
	}
	must(t, tw.Close())
	must(t, enc.Close())
	must(t, f.Close())
}

func TestExtractTarRefusesHostileArchives(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	must(t, os.Mkdir(outside, 0o755))
	cases := []struct {
		name string
		hdrs []*tar.Header
	}{
		{"dotdot", []*tar.Header{{Name: "../outside/x", Typeflag: tar.TypeReg}}},
		{"dotdot-inner", []*tar.Header{{Name: "a/../../outside/x", Typeflag: tar.TypeReg}}},
		{"absolute", []*tar.Header{{Name: outside + "/x", Typeflag: tar.TypeReg}}},
		{"through-symlink", []*tar.Header{
			{Name: "link", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "link/x", Typeflag: tar.TypeReg},
		}},
		{"through-relative-symlink", []*tar.Header{
			{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755},
			{Name: "d/link", Typeflag: tar.TypeSymlink, Linkname: "../../outside"},
			{Name: "d/link/x", Typeflag: tar.TypeReg},
		}},
		{"symlink-then-dir", []*tar.Header{
			{Name: "link", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "link/", Typeflag: tar.TypeDir, Mode: 0o755},
			{Name: "link/x", Typeflag: tar.TypeReg},
		}},
		{"hardlink-outside", []*tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "../outside/x"}}},
		{"hardlink-absolute", []*tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}}},
		{"hardlink-to-symlink", []*tar.Header{
			{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
			{Name: "h", Typeflag: tar.TypeLink, Linkname: "link"},
		}},
		{"duplicate", []*tar.Header{
			{Name: "f", Typeflag: tar.TypeReg},
			{Name: "f", Typeflag: tar.TypeSymlink, Linkname: outside},
		}},
		{"device", []*tar.Header{{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			arch := filepath.Join(base, c.name+".tar.zst")
			hostile(t, arch, c.hdrs)
			dest := filepath.Join(base, "dest-"+c.name)
			err := ExtractTar(ctx, arch, dest)
			if !errors.Is(err, ErrUnsafe) {
				t.Errorf("ExtractTar = %v, want ErrUnsafe", err)
			}
			if names, _ := os.ReadDir(outside); len(names) > 0 {
				t.Errorf("wrote outside dest: %v", names)
			}
			if _, err := os.Lstat(filepath.Join(base, "x")); err == nil {
				t.Errorf("wrote %s", filepath.Join(base, "x"))
			}
		})
	}
}

// BenchmarkWriteTarFile measures archiving throughput over a tree of
// source-like files (MB/s of file content).
func BenchmarkWriteTarFile(b *testing.B) {
	src := b.TempDir()
	total := laySourceTree(b, src, 2000)
	out := filepath.Join(b.TempDir(), "bench.tar.zst")
	for _, level := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression} {
		b.Run(level.String(), func(b *testing.B) {
			b.SetBytes(total)
			var obj Object
			cpu0 := cpuTime()
			for b.Loop() {
				var err error
				obj, _, err = WriteTarFile(context.Background(), src, out, TarOptions{Level: level})
				must(b, err)
			}
			// Throughput per CPU second: comparable on a busy machine,
			// where wall-clock MB/s depends on the neighbours.
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(total)*float64(b.N)/1e6/cpu.Seconds(), "MB/cpu-s")
			b.ReportMetric(float64(total)/float64(obj.Bytes), "ratio")
		})
	}
}

// cpuTime is the user and system time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// laySourceTree writes n files of 1-40 KB of Go-like text in a few dozen
// folders and returns their total size.
func laySourceTree(tb testing.TB, root string, n int) int64 {
	tb.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("func return if err != nil { } package import type struct string int error ctx context.Context fmt.Errorf range for := var const defer go chan select case default switch map slice append len make new")
	var total int64
	var sb strings.Builder
	for i := range n {
		sb.Reset()
		size := 1000 + r.IntN(40000)
		for sb.Len() < size {
			sb.WriteString(strings.Repeat("\t", r.IntN(4)))
			for range 3 + r.IntN(8) {
				sb.WriteString(words[r.IntN(len(words))])
				sb.WriteByte(' ')
			}
			fmt.Fprintf(&sb, "x%d\n", r.IntN(1000))
		}
		p := filepath.Join(root, fmt.Sprintf("pkg%02d/sub%d/file%04d.go", i%37, i%5, i))
		write(tb, p, sb.String(), 0o644)
		total += int64(sb.Len())
	}
	return total
}
