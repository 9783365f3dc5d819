package dirwalk

import (
	"unsafe"

	"golang.org/x/sys/unix"
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

// getdentsRaw is getdents64 as a raw system call, for the same reason.
func getdentsRaw(fd int, buf []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_GETDENTS64, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}
