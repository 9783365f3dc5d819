package busy

import (
	"strings"
	"testing"
)

// TestBusyFailsClosedBeyondPathMax: a process working in a folder deeper
// than PATH_MAX (its cwd cannot be read as a path) is found by identity
// (device and inode, climbing ".."), and one holding a file that deep,
// which cannot be climbed from, makes the answer unknown: every folder is
// busy, with the reason naming the process.
func TestBusyFailsClosedBeyondPathMax(t *testing.T) {
	t.Run("cwd", func(t *testing.T) {
		root, other := t.TempDir(), t.TempDir()
		c := helper(t, "deep-cwd", root)
		s := scan(t, Options{}, root, other)
		hs := holdersOf(s, root, c.pid())
		if len(hs) == 0 || hs[0].What != "cwd" {
			t.Fatalf("the deep cwd was not found: %+v (reason %q)", s.Holders(root), s.Reason(root))
		}
		if len(holdersOf(s, other, c.pid())) != 0 {
			t.Fatalf("the deep cwd made an unrelated folder busy: %+v", s.Holders(other))
		}
	})
	t.Run("open file", func(t *testing.T) {
		root, other := t.TempDir(), t.TempDir()
		c := helper(t, "deep-file", root)
		s := scan(t, Options{}, root, other)
		if s.Complete() {
			t.Fatal("a descriptor whose path cannot be read counted as read")
		}
		for _, p := range []string{root, other} {
			if !s.Busy(p) || !strings.Contains(s.Reason(p), "unknown") {
				t.Errorf("%s: busy %v, reason %q: want busy with an unknown reason", p, s.Busy(p), s.Reason(p))
			}
		}
		if r := s.Reason(other); !strings.Contains(r, "pid ") {
			t.Errorf("the reason does not name the process %d: %q", c.pid(), r)
		}
	})
}
