package rootcheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrSystem reports a root that is "/" or a system folder.
var ErrSystem = errors.New("a system folder cannot be a managed root")

// system are folders no agent runtime lives in directly: managing one would
// put the whole system in reach. A folder below one (/var/lib/agents,
// /home/me/runs) is fine.
var system = map[string]bool{
	"/": true, "/bin": true, "/boot": true, "/dev": true, "/etc": true, "/home": true,
	"/lib": true, "/lib32": true, "/lib64": true, "/libx32": true, "/lost+found": true,
	"/media": true, "/mnt": true, "/opt": true, "/proc": true, "/root": true, "/run": true,
	"/sbin": true, "/srv": true, "/sys": true, "/tmp": true, "/usr": true, "/var": true,
	"/var/lib": true, "/var/tmp": true, "/var/log": true, "/usr/local": true,
}

// Check refuses a clean absolute path that is "/" or a system folder, or
// that is the user's home folder itself (its children are fine).
func Check(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("%q is not a clean absolute path", p)
	}
	if system[p] {
		return fmt.Errorf("%s: %w", p, ErrSystem)
	}
	if home := os.Getenv("HOME"); home != "" && filepath.Clean(home) == p {
		return fmt.Errorf("%s is the home folder: %w", p, ErrSystem)
	}
	return nil
}

// Resolve returns the clean absolute path p leads to: the longest part of
// it that exists with every symbolic link resolved, then the rest as
// written (a root may be created later). A ".." in the rest is refused:
// it would climb out of what was resolved.
func Resolve(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("resolve %q: not an absolute path", p)
	}
	p = filepath.Clean(p)
	head, rest := p, ""
	for {
		real, err := filepath.EvalSymlinks(head)
		if err == nil {
			out := filepath.Join(real, rest)
			if rest != "" && strings.Contains("/"+rest+"/", "/../") {
				return "", fmt.Errorf("resolve %q: \"..\" after a missing folder", p)
			}
			return out, nil
		}
		if !errors.Is(err, os.ErrNotExist) || head == "/" {
			return "", fmt.Errorf("resolve %q: %w", p, err)
		}
		// A dangling link counts as existing: refuse, it could be aimed
		// anywhere once its target appears.
		if fi, lerr := os.Lstat(head); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("resolve %q: %s is a link to a missing target", p, head)
		}
		rest = filepath.Join(filepath.Base(head), rest)
		head = filepath.Dir(head)
	}
}

// Within reports whether clean absolute path p is dir or lies inside it.
func Within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
