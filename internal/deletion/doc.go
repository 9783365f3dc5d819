// Package deletion removes a directory tree beneath a trusted base folder,
// fast and without ever touching anything outside it.
//
// It follows the walker rules of package dirwalk: the target is resolved
// beneath a descriptor of the base with openat2 (or a checked
// component-by-component walk), symbolic links are unlinked and never
// followed, mount points (bind mounts of the same filesystem included) are
// skipped and reported, and every removal is a descriptor-relative unlinkat.
// Directories are removed post-order by a bounded pool of workers.
//
// Delete never stops at one bad entry: it removes everything it can and
// returns per-entry problems in the Result. Entries that vanish while it
// runs are not errors; entries that appear in a directory being removed make
// it read that directory again (a few times, then report). Read-only and
// unreadable directories inside the tree are made writable first. Bytes
// freed count allocated blocks, each hard-linked inode once.
//
// Delete is safe to call concurrently on different trees and idempotent:
// running it again on a tree that was partly removed (a killed process)
// removes the rest.
package deletion
