package sink

import "golang.org/x/sys/unix"

// noFollow: an object is never read through a symbolic link.
const noFollow = unix.O_NOFOLLOW
