package rundir

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The probe cache remembers, across passes and processes, which run
// folders were bare (see isBare) and the change time and inode of each
// when it was read. A folder whose change time and inode are the same
// now is still bare: creating, removing or renaming an entry changes a
// folder's ctime, and unlike mtime a ctime cannot be set back by a user.
// So a second pass over 100,000 unchanged run folders costs one statx
// each instead of five system calls.
//
// Like git's index, it guards against a change within the clock's
// resolution of the read: only folders whose ctime was at least
// probeSettle older than the read are remembered. A missing, stale or
// damaged cache only costs the reads it would have saved.
const probeMagic = "reclaimer-rundir-probe-v1\n"

// probeSettle is how much older than the read a folder's ctime must be to
// be remembered: well above any filesystem's timestamp granularity.
// Tests shorten it.
var probeSettle = 2 * time.Second

// stamp identifies one state of a folder's entries.
type stamp struct {
	ctimeSec  int64
	ctimeNsec uint32
	ino       uint64
}

func (s stamp) time() time.Time { return time.Unix(s.ctimeSec, int64(s.ctimeNsec)) }

// probeCachePath is where the cache of this root and layout lives: the
// layout is part of the name because what is bare depends on it.
func (b *Backend) probeCachePath() string {
	if b.CacheDir == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(b.Root + "\x00" + b.Home + "\x00" + strings.Join(b.Workspaces, "\x00")))
	return filepath.Join(b.CacheDir, "rundir-"+hex.EncodeToString(sum[:12])+".probe")
}

// loadProbes reads the cache; any problem yields an empty one.
func loadProbes(path string) map[string]stamp {
	probes := map[string]stamp{}
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
			return map[string]stamp{}
		}
		n := int(binary.LittleEndian.Uint16(data))
		if len(data) < 2+n+20 {
			return map[string]stamp{}
		}
		name := string(data[2 : 2+n])
		rest := data[2+n:]
		probes[name] = stamp{
			ctimeSec:  int64(binary.LittleEndian.Uint64(rest)),
			ctimeNsec: binary.LittleEndian.Uint32(rest[8:]),
			ino:       binary.LittleEndian.Uint64(rest[12:]),
		}
		data = rest[20:]
	}
	return probes
}

// saveProbes replaces the cache atomically (a crash leaves the old one or
// the new one, never a mix).
func saveProbes(path string, probes map[string]stamp) error {
	if path == "" {
		return nil
	}
	buf := make([]byte, 0, len(probeMagic)+len(probes)*40)
	buf = append(buf, probeMagic...)
	for name, s := range probes {
		buf = binary.LittleEndian.AppendUint16(buf, uint16(len(name)))
		buf = append(buf, name...)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(s.ctimeSec))
		buf = binary.LittleEndian.AppendUint32(buf, s.ctimeNsec)
		buf = binary.LittleEndian.AppendUint64(buf, s.ino)
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
