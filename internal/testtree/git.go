package testtree

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// GitEnv is an isolated but unhardened environment for setting up test
// repositories (and for the positive controls that prove a trap is armed):
// no system or global configuration, a fixed identity, an empty HOME.
func GitEnv(t testing.TB) []string {
	t.Helper()
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"LANG=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
	}
}

// Git runs plain git in dir with GitEnv and fails the test on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := GitErr(t, dir, args...)
	if err != nil {
		t.Fatalf("git %q in %s: %v\n%s", args, dir, err, out)
	}
	return out
}

// GitErr is Git that returns the error instead of failing.
func GitErr(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	full := append([]string{"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"}, args...)
	cmd := exec.Command("git", full...)
	cmd.Dir = dir
	cmd.Env = GitEnv(t)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Write writes content to path, creating its folders.
func Write(t testing.TB, path, content string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.WriteFile(path, []byte(content), 0o644))
}

// WriteExec is Write with the executable bits set.
func WriteExec(t testing.TB, path, content string) {
	t.Helper()
	// The file is written by a child process (cp), never through a
	// descriptor of this one: a fork by a parallel test would inherit
	// such a descriptor until its exec, and running the file meanwhile
	// fails with "text file busy" (ETXTBSY, golang/go#22315).
	staged := path + ".staged"
	Write(t, staged, content)
	if out, err := exec.Command("cp", staged, path).CombinedOutput(); err != nil {
		t.Fatalf("write %s: %v: %s", path, err, out)
	}
	must(t, os.Remove(staged))
	must(t, os.Chmod(path, 0o755))
}

// CoreDump writes a minimal ELF core file (the header a core dump starts
// with, which the caches step checks) at path.
func CoreDump(t testing.TB, path string) {
	t.Helper()
	h := make([]byte, 64<<10)
	copy(h, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1})
	binary.LittleEndian.PutUint16(h[16:], 4) // ET_CORE
	binary.LittleEndian.PutUint16(h[18:], 0x3e)
	binary.LittleEndian.PutUint32(h[20:], 1)
	binary.LittleEndian.PutUint16(h[52:], 64)
	binary.LittleEndian.PutUint16(h[54:], 56)
	binary.LittleEndian.PutUint16(h[58:], 64)
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.WriteFile(path, h, 0o600))
}

// NewRepo makes a repository at dir with one commit of src/main.go and a
// .gitignore for the usual dependency folders and secrets
// (node_modules/, .venv/, .env, dist/), and returns dir.
func NewRepo(t testing.TB, dir string) string {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	Git(t, dir, "init", "-q", "-b", "main")
	Write(t, filepath.Join(dir, ".gitignore"), "node_modules/\n.venv/\n.env\ndist/\n")
	Write(t, filepath.Join(dir, "src", "main.go"), "package main\n")
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

// Age sets the access and modification times of everything under each
// path to when (links themselves are skipped, never followed).
func Age(t testing.TB, when time.Time, paths ...string) {
	t.Helper()
	for _, root := range paths {
		err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.Mode()&os.ModeSymlink != 0 {
				return err
			}
			return os.Chtimes(p, when, when)
		})
		must(t, err)
	}
}

// Real resolves symbolic links in a test path (t.TempDir may sit below
// one), so it compares equal to paths git prints.
func Real(t testing.TB, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	must(t, err)
	return r
}

// Context is a context for one test's git calls, canceled when it ends.
func Context(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// Names lists the entries of dir (the marker files a trap left there).
func Names(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	must(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// Lines splits a command's output into its lines.
func Lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
