package mountinfo

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// Mount is one line of a mountinfo file.
type Mount struct {
	Dev   string // "major:minor" of the filesystem
	Root  string // the directory of that filesystem the mount shows
	Point string // where it is mounted, in the reader's view
}

// Parse reads the mounts of a mountinfo file. Lines that do not parse are
// left out.
func Parse(data []byte) []Mount {
	var ms []Mount
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		// id parent major:minor root mountpoint options... - fstype ...
		f := bytes.Fields(line)
		if len(f) < 5 {
			continue
		}
		ms = append(ms, Mount{Dev: string(f[2]), Root: Unescape(string(f[3])), Point: Unescape(string(f[4]))})
	}
	return ms
}

// Unescape undoes the \ooo escapes mountinfo uses for space, tab, newline
// and backslash.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// PointsBelow lists the mount points of ms strictly below dir (clean,
// absolute).
func PointsBelow(ms []Mount, dir string) []string {
	var out []string
	prefix := dir + "/"
	if dir == "/" {
		prefix = "/"
	}
	for _, m := range ms {
		if m.Point != dir && strings.HasPrefix(m.Point, prefix) {
			out = append(out, m.Point)
		}
	}
	return out
}

// Below lists the mount points strictly below dir in the calling process's
// mount namespace. An unreadable mountinfo is an error: a caller about to
// rename dir must not guess.
func Below(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	return PointsBelow(Parse(data), dir), nil
}
