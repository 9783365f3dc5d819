package ignored

import (
	"path"
	"strings"
)

// negation is an anchored "!pattern" line of an ignore file, split into
// components relative to the top of the repository.
type negation struct {
	comps []string
}

// parseNegations returns the anchored negation patterns of one ignore file
// whose directory is base ("" for the top level and info/exclude). It
// follows git's syntax: "#" comments, a leading "\" escaping "!" or "#",
// trailing spaces trimmed unless escaped, "\r\n" line ends, a trailing "/"
// meaning "directories only", and a pattern with a "/" at the start or in
// the middle being relative to base. Unanchored negations (no "/" but a
// trailing one, e.g. "!.gitkeep") may match at any depth, so they would
// reach into every directory; they are not returned (see doc.go).
func parseNegations(base string, data []byte) []negation {
	var out []negation
	var baseComps []string
	if base != "" {
		baseComps = strings.Split(base, "/")
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if !strings.HasPrefix(line, "!") {
			continue // comments, escaped "\!", positive patterns
		}
		p := trimTrailingSpaces(line[1:])
		p = strings.TrimRight(p, "/")
		if !strings.Contains(p, "/") {
			continue
		}
		p = strings.TrimLeft(p, "/")
		comps := append([]string(nil), baseComps...)
		for _, c := range strings.Split(p, "/") {
			if c != "" {
				comps = append(comps, c)
			}
		}
		if len(comps) > 0 {
			out = append(out, negation{comps: comps})
		}
	}
	return out
}

// trimTrailingSpaces drops trailing spaces that are not escaped with "\".
func trimTrailingSpaces(s string) string {
	for strings.HasSuffix(s, " ") && !strings.HasSuffix(s, "\\ ") {
		s = s[:len(s)-1]
	}
	return s
}

// reachesInside reports whether the negation could name something strictly
// inside the directory whose repository-relative components are dir. It
// errs on the side of "yes": "**", a malformed glob, or a match of every
// component of dir with pattern left over.
func (n negation) reachesInside(dir []string) bool {
	for i, p := range n.comps {
		if i >= len(dir) || p == "**" {
			return true
		}
		ok, err := path.Match(strings.ReplaceAll(p, "[!", "[^"), dir[i])
		if err != nil {
			return true
		}
		if !ok {
			return false
		}
	}
	return false // the pattern names dir itself or one of its parents
}
