// Package archive writes, verifies and restores what a runtime holds that
// a user could want back, before the runtime is removed (DESIGN §4: archive
// → verify by reading back → only then remove).
//
// # Export to a sink
//
// ExportWorktree and ExportFolders are what backends call: they write an
// archive's objects into a sink.Sink (a local folder or an S3 bucket),
// named Request.Base + "." + ext ("<backend>/<runtime>/<time>.bundle",
// ".patch", ".<folder>.tar.zst"), read every object back from the sink
// (size, SHA-256, and for a tar every entry), then store the Manifest as
// Base.manifest.json and read it back too. On any error the objects stored
// so far are removed again and the runtime was never written to. A tar
// streams from the folder through zstd into the sink (an io.Pipe): nothing
// is staged locally; a bundle and a patch are written by git into a
// private staging folder first (git writes files) and then streamed.
// RestoreFolders and RestoreWorktreeFrom read archives back from a sink,
// checking every object before writing anything. ExportFolders and
// RestoreFolders take any set of named folders: run folders and a
// container's mounted home and workspace alike.
//
// # What survives
//
// A git worktree survives as a git bundle (WriteBundle) of its branch and a
// snapshot ref (SnapshotWorktree):
//
//   - commits: the branch's whole history, self-contained (the bundle has
//     no prerequisites), so commits on no remote survive;
//   - uncommitted work: a snapshot commit shaped like a git stash entry
//     (tree = the working tree as `git add -A` stages it; first parent
//     HEAD; second parent a commit of the user's index), so staged and
//     unstaged changes, deletions, untracked files (in new folders, with
//     non-UTF-8 names, symbolic links, executable bits) come back apart;
//   - not kept by the snapshot: ignored files (.env, node_modules: the rule
//     is "save uncommitted and untracked, not ignored, work"), untracked
//     nested repositories (listed in Snapshot.Nested; archive the folder
//     as a tar to keep them), changes inside submodules, mtimes.
//
// A folder survives as a .tar.zst (WriteTarFile): regular files with
// modes, mtimes (nanoseconds, PAX) and raw-byte names (non-UTF-8 names are
// marked hdrcharset=BINARY), empty folders, symbolic links as links (never
// followed; targets kept verbatim, absolute, dangling or pointing outside
// alike), hard links within the tree as tar hard links to the first path.
// Not stored, and reported in TarStats.Skipped: mount points below the
// root (statx mount id, so bind mounts of the same filesystem count) and
// sockets, devices and fifos. Ownership is recorded but not restored.
//
// # Nothing is touched that the user owns
//
// SnapshotWorktree runs git on a copy of the worktree's index
// (GIT_INDEX_FILE in a private temporary folder) and writes only objects
// and its own ref under refs/reclaimer/: the user's branch, index and
// working tree stay as they were, byte for byte. Snapshot commits carry a
// fixed identity (reclaimer <reclaimer@localhost>) passed in the
// environment. All git runs go through gitcmd.Runner, which keeps the
// repository's hooks, fsmonitor, filter drivers and other configured
// programs from running. Inspect, the cheap check used on every pass, writes
// nothing at all (one git status, one git rev-list).
//
// # Verification
//
// WriteBundle runs git bundle verify and checks the bundle's header holds
// every ref and needs nothing. WriteTar records a manifest (TarEntry: path,
// type, mode, mtime, size, SHA-256, link target) while it writes;
// VerifyTar decompresses the archive whole and checks every entry against
// it, and the zstd frame checksums to the last byte, so corruption and
// truncation fail (ErrMismatch). Object.Verify re-hashes a written file.
//
// # Streaming
//
// Memory does not grow with the size of what is archived: file data moves
// through one 256 KiB buffer, the zstd encoder has a 4 MiB window and at
// most two concurrent blocks, readers accept windows up to 64 MiB. The tar
// manifest grows with the number of entries (about 150 bytes each).
//
// # Atomic writes and idempotency
//
// Every file (bundle, tar, manifest) is written under a temporary name
// beside its final path, fsynced, renamed into place and its folder
// fsynced: a crash leaves the old file or the whole new one, plus at worst
// a stray ".<name>.tmp-*" file. Writing the same archive again replaces it
// whole. SnapshotWorktree with nothing changed returns the commit it made
// before; with nothing uncommitted it makes no commit (it only points the
// ref at a detached HEAD, so those commits stay reachable). RestoreWorktree
// refuses an existing destination, and fetches from the bundle only the
// refs the repository lacks (create-only), so running it again after a
// failure converges.
//
// # Extraction
//
// ExtractTar writes only beneath its destination: every path is resolved
// with openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS (or a component walk
// with O_NOFOLLOW), symbolic links are created after everything else, and
// absolute paths, "..", paths through a link or file of the archive,
// duplicates, hard links to anything but an earlier regular file, and
// devices and sockets are refused (ErrUnsafe). Setuid and setgid bits of
// files are dropped.
//
// A tar round trip is exact otherwise: WriteTar keeps, in PAX records,
// owner and group, mode, modification and access times, extended
// attributes (user.*, security.capability, trusted.*, POSIX ACLs), the data
// map of sparse files (RECLAIMER.data: their content is stored whole, holes
// as zeros, and ExtractTar writes only the data back so the holes stay
// holes) and FIFOs; ExtractTar restores them all, owners and privileged
// attributes when running as root. VerifyTar checks every one of them
// against the manifest. The cost is one flistxattr per entry and, for a
// file with fewer blocks than its size, a SEEK_DATA/SEEK_HOLE walk: within
// the noise of BenchmarkWriteTarFile.
//
// # Concurrency and errors
//
// Functions hold no state and are safe for concurrent use on different
// paths and refs. Errors are wrapped as "verb noun: %w"; RestoreWorktree
// returns backend.ErrConflict when the branch or snapshot ref moved since
// the archive and backend.ErrNotFound when neither the repository nor the
// bundle has them. Context cancellation is checked between entries and
// between buffer-sized chunks.
package archive
