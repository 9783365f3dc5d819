package rundir

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
)

// A probe tells whether a run folder is bare: nothing in it the caches
// step could select. That is: no entry of the run folder, its home or its
// workspaces is named like a core dump, and the home holds none of the
// cache folders. Reading those folders costs about five system calls
// each; the probe cache makes a second pass cost one statx per folder.
//
// The cache remembers, across passes and processes, the bare run folders
// with the change time and inode ("stamp") of each folder the probe read.
// Creating, removing or renaming an entry changes a folder's ctime, and
// unlike mtime a ctime cannot be set back by a user; so a folder whose
// stamps are the same now still holds the same entries. A home or
// workspace one level down that was absent is still absent while the
// run folder's stamp is the same (creating it would change it), so the
// common bare run folder costs exactly one statx.
//
// Like git's index, it guards against a change within the clock's
// resolution of the read: only stamps at least probeSettle older than the
// read are remembered. A missing, stale or damaged cache only costs the
// reads it would have saved, and a wrong "bare" could only make a plan
// select less, never act on anything.
const probeMagic = "reclaimer-rundir-probe-v2\n"

// probeSettle is how much older than the read a folder's ctime must be to
// be remembered: well above any filesystem's timestamp granularity.
// Tests shorten it.
var probeSettle = 2 * time.Second

// stamp identifies one state of a folder's entries; zero means absent.
type stamp struct {
	ctimeSec  int64
	ctimeNsec uint32
	ino       uint64
}

func (s stamp) time() time.Time { return time.Unix(s.ctimeSec, int64(s.ctimeNsec)) }

// probeRun is the probing of one full listing.
type probeRun struct {
	b      *Backend
	subs   []string           // home first (if set), then workspaces, cleaned
	home   bool               // subs[0] is the home
	known  map[string][]stamp // the cache as loaded
	readAt time.Time
	bare   []bool    // per listed name
	stamps [][]stamp // per listed name: run folder, then each sub
	path   string    // the cache file; "" without ProbeDir
}

func (b *Backend) startProbes(n int) *probeRun {
	r := &probeRun{b: b, readAt: time.Now(), bare: make([]bool, n), stamps: make([][]stamp, n),
		path: b.probeCachePath()}
	if b.Home != "" {
		r.subs, r.home = append(r.subs, filepath.Clean(b.Home)), true
	}
	for _, w := range b.Workspaces {
		r.subs = append(r.subs, filepath.Clean(w))
	}
	r.known = loadProbes(r.path, 1+len(r.subs))
	return r
}

// probe decides whether listed folder i (name, whose stamp is st) is
// bare, from the cache when its stamps are unchanged, else by reading.
// Probes of different i run concurrently.
func (r *probeRun) probe(rootFD, i int, name string, st stamp, buf []byte) {
	if st == (stamp{}) {
		return // no usable stamp: not bare, the full selection runs
	}
	stamps := make([]stamp, 1+len(r.subs))
	stamps[0] = st
	cached := r.known[name]
	hit := cached != nil && cached[0] == st
	for j, sub := range r.subs {
		if hit && cached[j+1] == (stamp{}) && !strings.Contains(sub, "/") {
			continue // still absent: making it would have changed the run folder
		}
		s, ok := subStamp(rootFD, name+"/"+sub)
		if !ok {
			return // a link or a file where a folder belongs: leave it to the full selection
		}
		stamps[j+1] = s
		hit = hit && s == cached[j+1]
	}
	if !hit && !r.read(rootFD, name, stamps, buf) {
		return
	}
	r.bare[i], r.stamps[i] = true, stamps
}

// subStamp stats a home or workspace: its stamp, zero when it does not
// exist, and false when it exists but is not a plain folder.
func subStamp(rootFD int, rel string) (stamp, bool) {
	var stx unix.Statx_t
	err := unix.Statx(rootFD, rel, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE|unix.STATX_CTIME|unix.STATX_INO, &stx)
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return stamp{}, true
	case err != nil || uint32(stx.Mode)&unix.S_IFMT != unix.S_IFDIR ||
		stx.Mask&(unix.STATX_CTIME|unix.STATX_INO) != unix.STATX_CTIME|unix.STATX_INO:
		return stamp{}, false
	}
	return stamp{ctimeSec: stx.Ctime.Sec, ctimeNsec: stx.Ctime.Nsec, ino: stx.Ino}, true
}

// read reads the run folder and each present sub, in full: the stamps
// were taken before, so a change during the read shows as a newer stamp
// next time.
func (r *probeRun) read(rootFD int, name string, stamps []stamp, buf []byte) bool {
	if !r.readOne(rootFD, name, false, buf) {
		return false
	}
	for j, sub := range r.subs {
		if stamps[j+1] != (stamp{}) && !r.readOne(rootFD, name+"/"+sub, r.home && j == 0, buf) {
			return false
		}
	}
	return true
}

// readOne tells whether folder rel (beneath the root, no links) has no
// core-dump-like entry and, for the home, none of the cache folders.
func (r *probeRun) readOne(rootFD int, rel string, home bool, buf []byte) bool {
	fd, err := beneath.Resolver{}.OpenDir(rootFD, rel)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	clean := true
	err = readNames(fd, buf, func(entry []byte, _ byte) {
		if clean && (coreLike(entry) || home && r.cacheLeads(entry)) {
			clean = false
		}
	})
	return err == nil && clean
}

// cacheLeads tells whether entry is the first component of a cache folder.
func (r *probeRun) cacheLeads(entry []byte) bool {
	for _, d := range r.b.CacheDirs {
		first, _, _ := strings.Cut(filepath.Clean(d), "/")
		if first == string(entry) || first == "." || first == ".." {
			return true
		}
	}
	return false
}

// finish publishes the bare set for ReclaimFiles and saves the cache when
// it changed.
func (r *probeRun) finish(names []string) {
	bare := make(map[string]struct{}, len(names))
	cutoff := r.readAt.Add(-probeSettle)
	settledAt := func(i int) bool {
		return r.bare[i] && !slices.ContainsFunc(r.stamps[i], func(s stamp) bool { return !s.time().Before(cutoff) && s != (stamp{}) })
	}
	// Most passes change nothing: then the cache as loaded is the cache to
	// keep, and no second map of every folder is built.
	same, settled := true, 0
	for i, isBare := range r.bare {
		if !isBare {
			continue
		}
		bare[names[i]] = struct{}{}
		if settledAt(i) {
			settled++
			same = same && slices.Equal(r.known[names[i]], r.stamps[i])
		}
	}
	r.b.mu.Lock()
	r.b.bare = bare
	r.b.mu.Unlock()
	if same && settled == len(r.known) {
		return
	}
	keep := make(map[string][]stamp, settled)
	for i := range r.bare {
		if settledAt(i) {
			keep[names[i]] = r.stamps[i]
		}
	}
	// Only a cost saving: a cache that cannot be written is simply not
	// used.
	_ = saveProbes(r.path, keep, 1+len(r.subs))
}

// coreLike tells whether a file name could be a core dump: "core" or
// "core.<digits>" (its content is checked only when it is).
func coreLike(name []byte) bool {
	rest, ok := bytes.CutPrefix(name, []byte("core"))
	if !ok {
		return false
	}
	if len(rest) == 0 {
		return true
	}
	if rest[0] != '.' || len(rest) == 1 {
		return false
	}
	for _, c := range rest[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// probeCachePath is where the cache of this root and layout lives: the
// layout is part of the name because what is bare depends on it.
func (b *Backend) probeCachePath() string {
	if b.ProbeDir == "" {
		return ""
	}
	key := strings.Join(append([]string{b.Root, b.Home, strings.Join(b.Workspaces, "\x01")}, b.CacheDirs...), "\x00")
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(b.ProbeDir, "rundir-"+hex.EncodeToString(sum[:12])+".probe")
}

const stampSize = 20

// loadProbes reads the cache, each entry a name and n stamps; any problem
// yields an empty cache.
func loadProbes(path string, n int) map[string][]stamp {
	probes := map[string][]stamp{}
	if path == "" {
		return probes
	}
	data, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(data, []byte(probeMagic)) {
		return probes
	}
	data = data[len(probeMagic):]
	for len(data) > 0 {
		if len(data) < 2 {
			return map[string][]stamp{}
		}
		l := int(binary.LittleEndian.Uint16(data))
		if len(data) < 2+l+n*stampSize {
			return map[string][]stamp{}
		}
		name := string(data[2 : 2+l])
		data = data[2+l:]
		stamps := make([]stamp, n)
		for j := range stamps {
			stamps[j] = stamp{
				ctimeSec:  int64(binary.LittleEndian.Uint64(data)),
				ctimeNsec: binary.LittleEndian.Uint32(data[8:]),
				ino:       binary.LittleEndian.Uint64(data[12:]),
			}
			data = data[stampSize:]
		}
		probes[name] = stamps
	}
	return probes
}

// saveProbes replaces the cache atomically (a crash leaves the old one or
// the new one, never a mix).
func saveProbes(path string, probes map[string][]stamp, n int) error {
	if path == "" {
		return nil
	}
	buf := make([]byte, 0, len(probeMagic)+len(probes)*(16+n*stampSize))
	buf = append(buf, probeMagic...)
	for name, stamps := range probes {
		buf = binary.LittleEndian.AppendUint16(buf, uint16(len(name)))
		buf = append(buf, name...)
		for _, s := range stamps {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(s.ctimeSec))
			buf = binary.LittleEndian.AppendUint32(buf, s.ctimeNsec)
			buf = binary.LittleEndian.AppendUint64(buf, s.ino)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
