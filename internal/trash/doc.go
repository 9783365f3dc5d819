// Package trash is the only way reclaimer starts deleting stored files: a
// tree is first renamed into a trash folder on the same filesystem (one
// atomic rename, microseconds, safe to do under a runtime's lock), and a
// background purger then deletes it with package deletion.
//
// The trash folder lives inside the managed root it serves, so the rename
// never crosses filesystems. Discard refuses, and deletes nothing, when the
// path is a symbolic link, has a symbolic link among its components, is a
// mount point, lives on another mount, or lies outside the root (EXDEV,
// EBUSY and friends come back as errors).
//
// Crash safety: an entry is either still at its old place or whole in the
// trash; a purge killed midway leaves a partly deleted entry that the next
// Open purges again, so repeated starts converge on an empty trash. Entries
// are named by time and a random suffix and are never reused.
//
// A Trash is safe for concurrent use. Close stops the purger after the
// entry in progress (a later Open finishes the rest).
package trash
