package busy

import (
	"strings"

	"github.com/reclaimer/reclaimer/internal/mountinfo"
)

// mount is one line of a mountinfo file.
type mount struct {
	dev   string // "major:minor" of the filesystem
	root  string // the directory of that filesystem the mount shows
	point string // where it is mounted, in the reader's view
}

// parseMountinfo reads the mounts of a mountinfo file (proc(5)).
func parseMountinfo(data []byte) []mount {
	var ms []mount
	for _, m := range mountinfo.Parse(data) {
		ms = append(ms, mount{dev: m.Dev, root: m.Root, point: m.Point})
	}
	return ms
}

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
		if within(path, m.point) && (best < 0 || len(m.point) >= len(ms[best].point)) {
			best = i
		}
	}
	if best < 0 {
		return fsKey{}, false
	}
	m := ms[best]
	rest := ""
	if m.point != "/" {
		rest = path[len(m.point):]
	} else if path != "/" {
		rest = path
	}
	return fsKey{m.dev, joinRel(m.root, rest)}, true
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
		if m.dev != k.dev {
			continue
		}
		var alias string
		switch {
		case within(k.path, m.root):
			rest := ""
			if m.root != "/" {
				rest = k.path[len(m.root):]
			} else if k.path != "/" {
				rest = k.path
			}
			alias = joinRel(m.point, rest)
		case within(m.root, k.path):
			alias = m.point
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
		if j == i || !within(path, o.point) {
			continue
		}
		if len(o.point) > len(ms[i].point) || (o.point == ms[i].point && j > i) {
			return true
		}
	}
	return false
}
