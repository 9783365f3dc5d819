package testtree

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// ShapePath returns the path of the recorded node_modules shape, looking
// upwards from the working directory for shared/bench, or "" if absent.
func ShapePath() string {
	dir, _ := os.Getwd()
	for {
		p := filepath.Join(dir, "..", "shared", "bench", "node_modules.shape.tsv.gz")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// LayShape recreates the tree recorded in shape under dest, as mktree does
// (file contents are zeros). It returns the number of entries laid.
func LayShape(tb testing.TB, shape, dest string) int {
	tb.Helper()
	f, err := os.Open(shape)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(shape, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			tb.Fatal(err)
		}
		r = gz
	}
	type dirMode struct {
		path string
		mode os.FileMode
	}
	var dirs []dirMode
	zeros := make([]byte, 1<<20)
	n := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "\t")
		if len(parts) < 4 {
			continue
		}
		size, _ := strconv.ParseInt(parts[1], 10, 64)
		mode, _ := strconv.ParseUint(parts[2], 8, 32)
		path := filepath.Join(dest, parts[3])
		switch parts[0] {
		case "d":
			must(tb, os.MkdirAll(path, 0o755))
			dirs = append(dirs, dirMode{path, os.FileMode(mode)})
		case "l":
			must(tb, os.MkdirAll(filepath.Dir(path), 0o755))
			must(tb, os.Symlink(parts[4], path))
		case "f":
			must(tb, os.MkdirAll(filepath.Dir(path), 0o755))
			out, err := os.Create(path)
			must(tb, err)
			for left := size; left > 0; {
				k := min(left, int64(len(zeros)))
				_, err := out.Write(zeros[:k])
				must(tb, err)
				left -= k
			}
			must(tb, out.Close())
			must(tb, os.Chmod(path, os.FileMode(mode)))
		}
		n++
	}
	must(tb, sc.Err())
	for i := len(dirs) - 1; i >= 0; i-- {
		must(tb, os.Chmod(dirs[i].path, dirs[i].mode|0o700))
	}
	return n
}

// Synthetic lays out a tree of width^depth leaf directories, each holding
// files files of fileSize bytes, and returns the number of entries below
// root (root itself excluded).
func Synthetic(tb testing.TB, root string, depth, width, files, fileSize int) int {
	tb.Helper()
	must(tb, os.MkdirAll(root, 0o755))
	data := make([]byte, fileSize)
	n := 0
	var lay func(dir string, d int)
	lay = func(dir string, d int) {
		for i := 0; i < files; i++ {
			must(tb, os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), data, 0o644))
			n++
		}
		if d == 0 {
			return
		}
		for i := 0; i < width; i++ {
			sub := filepath.Join(dir, "d"+strconv.Itoa(i))
			must(tb, os.Mkdir(sub, 0o755))
			n++
			lay(sub, d-1)
		}
	}
	lay(root, depth)
	return n
}

// Fingerprint describes every entry under root (root included) without
// following links: type, permission bits, size, link target and a SHA-256
// of regular files. Two equal fingerprints mean the trees are the same byte
// for byte. Mount points below root are described but not entered.
func Fingerprint(tb testing.TB, root string) string {
	tb.Helper()
	var lines []string
	rootDev := devOf(tb, root)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%q %s %o", rel, info.Mode().Type(), info.Mode().Perm())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			line += " -> " + strconv.Quote(target)
		case info.Mode().IsRegular():
			line += fmt.Sprintf(" %d %s", info.Size(), hashFile(tb, path))
		case info.IsDir() && path != root && devOf(tb, path) != rootDev:
			lines = append(lines, line+" (mount)")
			return filepath.SkipDir
		}
		lines = append(lines, line)
		return nil
	})
	must(tb, err)
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func hashFile(tb testing.TB, path string) string {
	f, err := os.Open(path)
	must(tb, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	must(tb, err)
	return hex.EncodeToString(h.Sum(nil))
}

// CountEntries counts the entries under root, root excluded, without
// following links or entering other filesystems.
func CountEntries(tb testing.TB, root string) int {
	tb.Helper()
	n := -1
	err := filepath.WalkDir(root, func(string, fs.DirEntry, error) error { n++; return nil })
	if os.IsNotExist(err) {
		return 0
	}
	must(tb, err)
	return n
}

// OpenFDs counts this process's open descriptors.
func OpenFDs(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	must(tb, err)
	return len(ents) - 1 // the one ReadDir used
}

func must(tb testing.TB, err error) {
	if err != nil {
		_, file, line, _ := runtime.Caller(1)
		tb.Fatalf("%s:%d: %v", filepath.Base(file), line, err)
	}
}
