// Package beneath opens files and directories relative to a trusted base
// directory without ever leaving it: no symbolic link is followed (not even
// one pointing back inside), no ".." or absolute path is accepted, and no
// mount point is crossed, bind mounts of the same filesystem included.
//
// The kernel does the checks where it can: openat2(2) with RESOLVE_BENEATH,
// RESOLVE_NO_SYMLINKS, RESOLVE_NO_XDEV and RESOLVE_NO_MAGICLINKS resolves the
// whole path atomically. On kernels without openat2 (before 5.6) the path is
// walked one component at a time with O_NOFOLLOW, and each directory's mount
// id (statx STATX_MNT_ID) is compared with its parent's; st_dev alone would
// miss a bind mount of the same filesystem.
//
// Errors: ErrSymlink when a component is a symbolic link, ErrMountPoint when
// a component is on another mount, ErrOutside for a path that would leave the
// base lexically; any other error is the system's, wrapped with the path.
//
// All functions are safe for concurrent use; they hold no state besides a
// once-probed flag saying whether openat2 works.
package beneath
