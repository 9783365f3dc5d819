package gitcmd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNonRegular is wrapped by the *Error of a command refused or killed
// because git would read configuration or ignore rules from something that
// is not a regular file: a FIFO blocks git until its timeout (an agent
// could add minutes to every pass), a device could be read forever.
var ErrNonRegular = errors.New("git would read a file that is not a regular file")

// maxIncludes bounds how deep config includes are followed.
const maxIncludes = 10

// checkReadFiles refuses, before git starts, a repository that would make
// git read configuration or ignore rules from a non-regular file: the
// .git file, config, config.worktree, every include.path and
// includeIf.*.path they name (followed as git does), info/exclude,
// info/attributes, and the top level's .gitignore and .gitattributes. Each
// must be a regular file or absent. Deeper .gitignore files are git's to
// find while it walks; watchFIFO catches those. A dir without a
// repository above it passes: git will say so itself.
func checkReadFiles(dir string) error {
	if dir == "" {
		return nil
	}
	top, gitdir, ok := findGitDir(dir)
	if !ok {
		return nil
	}
	if err := regularOrAbsent(filepath.Join(top, ".git")); err != nil {
		return err
	}
	common := gitdir
	if b, err := readSmall(filepath.Join(gitdir, "commondir")); err == nil {
		c := strings.TrimSpace(b)
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitdir, c)
		}
		common = filepath.Clean(c)
	}
	files := []string{
		filepath.Join(top, ".gitignore"), filepath.Join(top, ".gitattributes"),
		filepath.Join(common, "info", "exclude"), filepath.Join(common, "info", "attributes"),
		filepath.Join(gitdir, "commondir"), filepath.Join(gitdir, "HEAD"),
	}
	for _, f := range files {
		if err := regularOrAbsent(f); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, cfg := range []string{filepath.Join(common, "config"), filepath.Join(gitdir, "config.worktree"), filepath.Join(common, "config.worktree")} {
		if err := checkConfig(cfg, 0, seen); err != nil {
			return err
		}
	}
	return nil
}

// findGitDir walks up from dir to the first folder holding a .git entry,
// as git's discovery does, and returns it and its git folder.
func findGitDir(dir string) (top, gitdir string, ok bool) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", "", false
	}
	for {
		p := filepath.Join(d, ".git")
		if fi, err := os.Lstat(p); err == nil {
			if fi.IsDir() {
				return d, p, true
			}
			if !fi.Mode().IsRegular() {
				return d, p, true // refused by the caller's check
			}
			b, err := readSmall(p)
			if err != nil {
				return "", "", false
			}
			g, found := strings.CutPrefix(strings.TrimSpace(b), "gitdir: ")
			if !found {
				return "", "", false
			}
			if !filepath.IsAbs(g) {
				g = filepath.Join(d, g)
			}
			return d, filepath.Clean(g), true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", "", false
		}
		d = parent
	}
}

// checkConfig refuses a non-regular config file and follows its includes.
func checkConfig(path string, depth int, seen map[string]bool) error {
	if seen[path] {
		return nil
	}
	seen[path] = true
	if err := regularOrAbsent(path); err != nil {
		return err
	}
	if depth >= maxIncludes {
		return nil
	}
	f, err := openRegular(path)
	if err != nil {
		return nil // absent, or refused above
	}
	defer f.Close()
	for _, inc := range includePaths(io.LimitReader(f, 1<<20)) {
		if strings.HasPrefix(inc, "~") {
			continue // HOME is /nonexistent for git
		}
		if !filepath.IsAbs(inc) {
			inc = filepath.Join(filepath.Dir(path), inc)
		}
		if err := checkConfig(filepath.Clean(inc), depth+1, seen); err != nil {
			return err
		}
	}
	return nil
}

// includePaths reads the path values of [include] and [includeIf "..."]
// sections of a git config file.
func includePaths(r io.Reader) []string {
	var out []string
	in := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				in = false
				continue
			}
			name := strings.ToLower(strings.TrimSpace(line[1:end]))
			in = name == "include" || strings.HasPrefix(name, "includeif ") || strings.HasPrefix(name, "includeif\"")
			line = strings.TrimSpace(line[end+1:])
			if line == "" {
				continue
			}
		}
		if !in {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(key), "path") {
			continue
		}
		value = strings.TrimSpace(value)
		if i := strings.IndexAny(value, "#;"); i >= 0 && !strings.HasPrefix(value, "\"") {
			value = strings.TrimSpace(value[:i])
		}
		value = strings.Trim(value, "\"")
		if value != "" {
			out = append(out, value)
		}
	}
	return out
}

// regularOrAbsent refuses a path that exists and is not a regular file
// (a link is followed, as git follows it).
func regularOrAbsent(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return nil // absent (or unreadable: git will say)
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		return fmt.Errorf("%w: %s is a %s", ErrNonRegular, p, kind(fi.Mode()))
	}
	if fi.IsDir() && filepath.Base(p) != ".git" {
		return fmt.Errorf("%w: %s is a folder", ErrNonRegular, p)
	}
	return nil
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// openRegular opens p without blocking, only if it is a regular file.
func openRegular(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s", ErrNonRegular, p)
	}
	return f, nil
}

func readSmall(p string) (string, error) {
	f, err := openRegular(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	return string(b), err
}

// watchFIFO checks a running git, from half a second on, for being blocked
// on a named FIFO (opening one, or reading one an agent holds open for
// writing) and kills it with ErrNonRegular: whatever .gitignore or
// included config deep in the tree checkReadFiles could not see, one agent
// then costs a pass half a second per git call, not the whole timeout.
// The returned function stops the watch.
func watchFIFO(pid int, kill func(error)) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if what := blockedOnFIFO(pid); what != "" {
				kill(fmt.Errorf("%w: git blocked on %s", ErrNonRegular, what))
				return
			}
			t.Reset(250 * time.Millisecond)
		}
	}()
	return func() { close(done) }
}

// blockedOnFIFO tells what named FIFO process pid is blocked on, "" when
// none: waiting in open for a writer (wchan wait_for_partner), or in a read
// of a descriptor whose target is a path (an anonymous pipe, like git's own
// stdin, has none).
func blockedOnFIFO(pid int) string {
	proc := "/proc/" + strconv.Itoa(pid)
	w, err := os.ReadFile(proc + "/wchan")
	if err != nil {
		return ""
	}
	wchan := string(w)
	switch {
	case wchan == "wait_for_partner":
		return "opening a FIFO"
	case strings.Contains(wchan, "pipe_read") || strings.Contains(wchan, "pipe_wait"):
		sc, err := os.ReadFile(proc + "/syscall")
		if err != nil {
			return ""
		}
		f := strings.Fields(string(sc))
		if len(f) < 2 || f[0] != strconv.Itoa(unix.SYS_READ) {
			return ""
		}
		fd, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 32)
		if err != nil {
			return ""
		}
		target, err := os.Readlink(proc + "/fd/" + strconv.FormatUint(fd, 10))
		if err != nil || !strings.HasPrefix(target, "/") {
			return ""
		}
		return "reading the FIFO " + target
	}
	return ""
}
