package rootcheck

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSystemFoldersAreNeverRoots: "/", the system folders and the home
// folder itself are refused; folders below them are not.
func TestSystemFoldersAreNeverRoots(t *testing.T) {
	t.Setenv("HOME", "/home/me")
	for p, refused := range map[string]bool{
		"/": true, "/etc": true, "/usr": true, "/home": true, "/home/me": true, "/var/lib": true, "/tmp": true,
		"/home/me/runs": false, "/var/lib/agents": false, "/srv/agents": false, "/tmp/x": false,
	} {
		if err := Check(p); (err != nil) != refused {
			t.Errorf("Check(%q) = %v, want refused %v", p, err, refused)
		}
	}
	if Check("relative") == nil || Check("/a/../b") == nil {
		t.Error("a relative or unclean path was accepted")
	}
}

// TestResolveFollowsLinksOfWhatExists: the existing part is resolved, the
// missing rest appended; a dangling link is refused.
func TestResolveFollowsLinksOfWhatExists(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(base, "l")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "none"), filepath.Join(base, "dangling")); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		filepath.Join(base, "l"):               real,
		filepath.Join(base, "l", "new", "sub"): filepath.Join(real, "new", "sub"),
		"/":                                    "/",
	} {
		if got, err := Resolve(in); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, err := Resolve(filepath.Join(base, "dangling", "x")); err == nil {
		t.Errorf("a dangling link resolved to %q", got)
	}
}
