package busy

import (
	"strings"

	"github.com/reclaimer/reclaimer/internal/mountinfo"
)

// mount is one line of a mountinfo file.
type mount = mountinfo.Mount

// parseMountinfo reads the mounts of a mountinfo file (proc(5)).
func parseMountinfo(data []byte) []mount { return mountinfo.Parse(data) }

// within tells whether path equals dir or lies below it. Both are clean
// and absolute.
func within(path, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || (strings.HasPrefix(path, dir) && path[len(dir)] == '/')
}

// joinRel appends rest (which is "" or starts with "/") to dir.
func joinRel(dir, rest string) string {
	if dir == "/" {
		if rest == "" {
			return "/"
		}
		return rest
	}
	return dir + rest
}

// fsKey names a directory independently of where it is mounted: the
// filesystem and the path inside it.
type fsKey struct {
	dev  string
	path string
}

// keyOf translates an absolute path of the namespace described by ms into
// its filesystem key: the mount with the longest mount point holding path
// (the last one listed when mounts are stacked) and the path below it.
func keyOf(ms []mount, path string) (fsKey, bool) {
	best := -1
	for i, m := range ms {
		if within(path, m.Point) && (best < 0 || len(m.Point) >= len(ms[best].Point)) {
			best = i
		}
	}
	if best < 0 {
		return fsKey{}, false
	}
	m := ms[best]
	rest := ""
	if m.Point != "/" {
		rest = path[len(m.Point):]
	} else if path != "/" {
		rest = path
	}
	return fsKey{m.Dev, joinRel(m.Root, rest)}, true
}

// aliases lists the paths under which the namespace described by ms shows
// the directory k (or parts of it): a mount of k's filesystem whose root
// holds k shows k at mountpoint+rest; a mount whose root lies inside k
// shows a part of k at its mount point. An alias hidden by another mount
// stacked on it or on a folder above it is left out. (A mount below an
// alias is not: paths under it count as inside, which errs on the side of
// busy.)
func aliases(ms []mount, k fsKey) []string {
	var out []string
	for i, m := range ms {
		if m.Dev != k.dev {
			continue
		}
		var alias string
		switch {
		case within(k.path, m.Root):
			rest := ""
			if m.Root != "/" {
				rest = k.path[len(m.Root):]
			} else if k.path != "/" {
				rest = k.path
			}
			alias = joinRel(m.Point, rest)
		case within(m.Root, k.path):
			alias = m.Point
		default:
			continue
		}
		if !hidden(ms, i, alias) {
			out = append(out, alias)
		}
	}
	return out
}

// hidden tells whether path, shown by mount ms[i], is covered by another
// mount: one whose mount point holds path and is deeper than ms[i]'s, or
// the same and listed later (stacked on top).
func hidden(ms []mount, i int, path string) bool {
	for j, o := range ms {
		if j == i || !within(path, o.Point) {
			continue
		}
		if len(o.Point) > len(ms[i].Point) || (o.Point == ms[i].Point && j > i) {
			return true
		}
	}
	return false
}
