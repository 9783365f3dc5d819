package gitcmd

import (
	"bytes"
	"context"
	"fmt"
	"strings"
)

// Kind is the type of a git status --porcelain=v2 entry.
type Kind byte

// The entry types of git status --porcelain=v2.
const (
	Changed   Kind = '1' // ordinary changed entry
	Renamed   Kind = '2' // renamed or copied
	Unmerged  Kind = 'u'
	Untracked Kind = '?'
	Ignored   Kind = '!'
)

func (k Kind) String() string {
	switch k {
	case Changed:
		return "changed"
	case Renamed:
		return "renamed"
	case Unmerged:
		return "unmerged"
	case Untracked:
		return "untracked"
	case Ignored:
		return "ignored"
	}
	return fmt.Sprintf("Kind(%q)", byte(k))
}

// StatusEntry is one entry of git status --porcelain=v2 -z.
type StatusEntry struct {
	Kind Kind
	// XY is the staged and unstaged state ("M.", ".D", "AA", ...) for
	// Changed, Renamed and Unmerged entries; empty otherwise.
	XY string
	// Sub is the submodule state ("N..." for a non-submodule,
	// "S<c><m><u>" for one); empty for Untracked and Ignored.
	Sub string
	// Path is relative to the top level of the work tree, byte for byte
	// as git has it (no quoting). Directories (an untracked nested
	// repository, an ignored directory with --ignored=matching) end in "/".
	Path string
	// OrigPath is the path in HEAD of a Renamed entry.
	OrigPath string
	// Score is "R<n>" or "C<n>" for a Renamed entry.
	Score string
}

// IsDir reports whether the entry names a directory as a whole.
func (e StatusEntry) IsDir() bool { return strings.HasSuffix(e.Path, "/") }

// StatusPorcelainV2 runs git status --porcelain=v2 -z --untracked-files=all
// --ignore-submodules=dirty in dir, with --ignored=matching when ignored is
// true, and parses the result.
//
// --ignore-submodules=dirty keeps git from running git status inside each
// submodule (with the submodule's own, unprobed config): a submodule whose
// checked-out commit differs from the recorded one is reported, one with
// only uncommitted changes inside is not. Run StatusPorcelainV2 in the
// submodule itself to see those.
//
// Paths are relative to git's top level, which the repository config can
// move (core.worktree): check IsRepo(dir) first.
//
// Tracked files whose stat data changed are hashed, which is when clean
// filters would run; the Runner neutralises configured drivers (see the
// package documentation for the residual race).
func (r Runner) StatusPorcelainV2(ctx context.Context, dir string, ignored bool) ([]StatusEntry, error) {
	args := []string{"status", "--porcelain=v2", "-z", "--untracked-files=all", "--ignore-submodules=dirty"}
	if ignored {
		args = append(args, "--ignored=matching")
	} else {
		args = append(args, "--ignored=no")
	}
	out, err := r.Run(ctx, dir, args...)
	if err != nil {
		return nil, fmt.Errorf("read status of %s: %w", dir, err)
	}
	es, err := ParseStatusV2(out)
	if err != nil {
		return nil, fmt.Errorf("read status of %s: %w", dir, err)
	}
	return es, nil
}

// ParseStatusV2 parses git status --porcelain=v2 -z output. Header lines
// ("# ...") are skipped.
func ParseStatusV2(out []byte) ([]StatusEntry, error) {
	var es []StatusEntry
	recs := bytes.Split(out, []byte{0})
	if n := len(recs); n > 0 && len(recs[n-1]) == 0 {
		recs = recs[:n-1]
	}
	for i := 0; i < len(recs); i++ {
		rec := string(recs[i])
		if len(rec) < 2 || rec[1] != ' ' {
			if len(rec) > 0 && rec[0] == '#' {
				continue
			}
			return nil, fmt.Errorf("parse status: malformed entry %q", rec)
		}
		var e StatusEntry
		switch Kind(rec[0]) {
		case Changed:
			f := strings.SplitN(rec, " ", 9)
			if len(f) != 9 {
				return nil, fmt.Errorf("parse status: malformed entry %q", rec)
			}
			e = StatusEntry{Kind: Changed, XY: f[1], Sub: f[2], Path: f[8]}
		case Renamed:
			f := strings.SplitN(rec, " ", 10)
			if len(f) != 10 || i+1 >= len(recs) {
				return nil, fmt.Errorf("parse status: malformed entry %q", rec)
			}
			i++
			e = StatusEntry{Kind: Renamed, XY: f[1], Sub: f[2], Score: f[8], Path: f[9], OrigPath: string(recs[i])}
		case Unmerged:
			f := strings.SplitN(rec, " ", 11)
			if len(f) != 11 {
				return nil, fmt.Errorf("parse status: malformed entry %q", rec)
			}
			e = StatusEntry{Kind: Unmerged, XY: f[1], Sub: f[2], Path: f[10]}
		case Untracked, Ignored:
			e = StatusEntry{Kind: Kind(rec[0]), Path: rec[2:]}
		case '#':
			continue
		default:
			return nil, fmt.Errorf("parse status: unknown entry %q", rec)
		}
		if e.Path == "" {
			return nil, fmt.Errorf("parse status: entry without a path %q", rec)
		}
		es = append(es, e)
	}
	return es, nil
}
