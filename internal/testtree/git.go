package testtree

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
	Write(t, path, content)
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
