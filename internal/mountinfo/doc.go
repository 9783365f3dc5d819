// Package mountinfo reads mountinfo files (proc(5)): which filesystems are
// mounted where in a mount namespace. Parse is pure; Below reads the
// calling process's own /proc/self/mountinfo. Safe for concurrent use.
package mountinfo
