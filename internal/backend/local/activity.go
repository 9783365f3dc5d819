package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/activity"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// ActivityResult is the newest change found among a runtime's own files.
type ActivityResult struct {
	Newest     time.Time
	NewestPath string
	Files      int
}

// isRepo tells cheaply whether dir, or a direct child, is a git checkout:
// only then is git asked which folders are ignored (a process per run
// folder per pass would be the cost of every plan).
func isRepo(dir string) bool {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstatat(fd, ".git", &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return true
	}
	// Raw getdents: this runs for every run folder on every pass, where
	// os.ReadDir's poller registration alone doubled the cost.
	buf := dirBufs.Get().(*[]byte)
	defer dirBufs.Put(buf)
	for {
		n, err := unix.Getdents(fd, *buf)
		if err != nil || n <= 0 {
			return false
		}
		for b := (*buf)[:n]; len(b) > 0; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if typ != unix.DT_DIR || name[0] == '.' {
				continue
			}
			if unix.Fstatat(fd, string(name)+"/.git", &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				return true
			}
		}
	}
}

var dirBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// Activity finds the newest modification among the runtime's own files:
// its folder without .git and the git-ignored dependency folders, plus its
// git admin files (HEAD, index, logs).
func Activity(ctx context.Context, git gitcmd.Runner, rt backend.Runtime) ActivityResult {
	skip := map[string]bool{}
	if isRepo(rt.Path) || anyRepo(rt.Workspaces) {
		deps, _ := Dependencies(ctx, git, rt, nil, nil) // the built-in rule: activity is not a policy key
		for _, d := range deps {
			if rel, err := filepath.Rel(rt.Path, d.Path); err == nil {
				skip[rel] = true
			}
		}
	}
	res, err := activity.Newest(ctx, rt.Path, activity.Options{
		Skip: func(rel string, isDir bool) bool {
			return isDir && (filepath.Base(rel) == ".git" || skip[rel])
		},
	})
	if err != nil && res.Newest.IsZero() {
		return ActivityResult{}
	}
	return ActivityResult{Newest: res.Newest, NewestPath: res.NewestPath, Files: res.Files}
}

func anyRepo(dirs []string) bool {
	for _, d := range dirs {
		if isRepo(d) {
			return true
		}
	}
	return false
}
