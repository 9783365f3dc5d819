// Package activity finds when a runtime's files last changed: the newest
// modification time among the runtime's own files, outside ignored folders,
// and of its git admin files (HEAD, index, logs/HEAD, ORIG_HEAD of the
// worktree's own git directory). The engine takes the latest of this and
// the activity recorded in the ledger.
//
// # What counts
//
//   - Every entry below the root, the root included: files, directories
//     (a deleted or renamed file shows only in its directory's mtime),
//     symbolic links by their own lstat mtime (never followed), and special
//     files. Modification time, not change time: ctime moves on chmod,
//     chown, link count changes and backups that touch nothing, mtime is
//     what writing does.
//   - Not a directory for which Options.Skip says so (dependency folders,
//     ".git"), nor anything in it, nor its own mtime.
//   - Not a mount point below the root, nor anything on it (bind mounts of
//     the same filesystem included: the statx mount id is compared, and
//     directories are opened with openat2 RESOLVE_NO_XDEV). It is reported
//     in Result.Skipped.
//   - The git admin files of the worktree: where root/.git is a file
//     ("gitdir: PATH", a linked worktree) the files in PATH, where it is a
//     directory the files in it. A commit, checkout, reset, rebase or a
//     git status that refreshes the index moves one of them. ORIG_HEAD is
//     included (reset, rebase and merge write it); FETCH_HEAD is not (a
//     background fetch is not the runtime's activity). The reclaimer's own
//     git calls use --no-optional-locks and so never write the index.
//
// A file with an mtime in the future (a skewed clock, touch -d) keeps the
// runtime looking active; that errs on the side of keeping data.
//
// # Which call when
//
// NewestAfter is what the engine needs most: "did anything change after T?"
// (T the recorded activity, or now minus the retention). It stops at the
// first entry newer than T, so an active runtime costs a handful of stat
// calls. With nothing newer it walks everything and its result equals
// Newest's. Use Newest when the exact newest time is wanted (status, a
// first observation).
//
// # Cost and what is cached
//
// No sound cache can skip a subtree: a directory's mtime changes when an
// entry is added, removed or renamed, not when a file deep inside is
// written, and timestamp granularity lets two changes share one value. So
// every pass stats every entry, as fast as the machine allows: directories
// are read by a bounded pool of workers with large getdents buffers, big
// directories are split among workers, each entry costs one statx(2) on the
// name inside the getdents buffer, with no allocation unless Skip is set or
// the entry is a directory or a new newest.
//
// A Cache (optional, shared by calls, safe for concurrent use) keeps two
// things per root, neither of which can make a result wrong:
//   - the git directory a root/.git file points to, keyed by the file's
//     identity (device, inode, size, mtime, ctime); a rewritten file is read
//     again;
//   - where the newest entry was last found: NewestAfter looks in that
//     directory first, after the git admin files, since an agent tends to
//     keep working where it last did. This changes only the order, never
//     the answer.
//
// # Contract
//
// A Result is a moment's truth: a file can change the instant after it was
// read. Callers re-check under their runtime lock. Newest and NewestAfter
// are safe for concurrent use; Options.Skip is called from several
// goroutines at once. Entries that vanish during the walk are not errors;
// entries that cannot be read are listed in Result.Failed and the walk
// goes on. The functions fail only when the root cannot be opened (it is a
// symbolic link, missing, not a directory) or the context ends.
package activity
