package dirwalk

import (
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
)

// Lstatat is fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW) issued as a raw
// system call: it does not tell the Go scheduler it is entering the kernel.
//
// Why: walking a tree is millions of inode lookups that each take a few
// microseconds. Through the ordinary path, the scheduler's monitor takes
// the processor away from calls that run past its 20 µs tick and hands it
// to another thread, and the futex wake-ups of those hand-offs cost more
// than the lookups (measured: 9,000 futex calls for 24,000 stats of one
// tree). A metadata lookup on a local filesystem cannot block for long;
// callers use the ordinary calls on network and FUSE filesystems (see
// Options.PlainSyscalls) and for anything that writes.
func Lstatat(dirfd int, name string, st *unix.Stat_t) error {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	_, _, e := unix.RawSyscall6(unix.SYS_NEWFSTATAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
		uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// lstatatPtr is Lstatat on a NUL-terminated name already in memory.
func lstatatPtr(dirfd int, name *byte, st *unix.Stat_t) error {
	_, _, e := unix.RawSyscall6(unix.SYS_NEWFSTATAT, uintptr(dirfd), uintptr(unsafe.Pointer(name)),
		uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// getdentsRaw is getdents64 as a raw system call, for the same reason.
func getdentsRaw(fd int, buf []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_GETDENTS64, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// maxDirent is the largest linux_dirent64 record: a 19-byte header, a
// 255-byte name, its NUL, padded to 8 bytes.
const maxDirent = 280

// Filesystem magic numbers (statfs f_type) of local filesystems whose
// getdents fills the caller's buffer until the directory ends.
const (
	magicExt4  = 0xEF53
	magicXFS   = 0x58465342
	magicBtrfs = 0x9123683E
	magicTmpfs = 0x01021994
)

func fillsDirBuffer(fd int) bool {
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil {
		return false
	}
	switch uint32(st.Type) {
	case magicExt4, magicXFS, magicBtrfs, magicTmpfs:
		return true
	}
	return false
}

// LatencyBound tells whether the filesystem holding fd makes each removal
// wait on the device or the network (mounted with "discard", or a network
// or FUSE filesystem): there, many calls in flight overlap the waits, while
// on a filesystem whose removals are pure CPU work more workers than cores
// only add lock contention in the kernel.
func LatencyBound(fd int) bool {
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) == nil {
		switch uint32(st.Type) {
		case 0x6969 /* nfs */, 0xFF534D42 /* cifs */, 0xFE534D42 /* smb2 */, 0x65735546 /* fuse */, 0x01021997 /* 9p */, 0x00C36400 /* ceph */ :
			return true
		}
	}
	id, err := beneath.MountID(fd)
	if err != nil {
		return false
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	want := strconv.FormatUint(id, 10) + " "
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, want) {
			continue
		}
		// Mount options are field 6; super options follow " - fstype source ".
		for _, opt := range strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == ',' }) {
			if opt == "discard" {
				return true
			}
		}
		return false
	}
	return false
}
