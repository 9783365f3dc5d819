// Package busy tells whether a process is using a local runtime folder.
//
// A folder is busy when any process has its working directory, its root
// directory (chroot), an open file descriptor, or a memory-mapped file inside
// it. Scan reads /proc once and answers for many folders at once: for every
// process it reads the cwd and root links, every link under fd/, and the
// file-backed lines of maps; threads whose working directory or descriptor
// table differ from their leader's (unshare(CLONE_FS), CLONE_FILES not set;
// told apart with kcmp(2)) are read as well.
//
// A path is inside a folder when it equals it or starts with it plus "/",
// compared on cleaned paths. A link to an unlinked file (" (deleted)") still
// counts: the open file keeps its blocks. Folders are also recognised under
// other names: the mount table (mountinfo) maps every path to (device, path
// within that filesystem), so a process that sees the folder through a bind
// mount, in this or another mount namespace (a bubblewrap sandbox, a
// container with the workspace bind-mounted), makes it busy too.
//
// # Contract
//
// A Snapshot is a moment's truth. A process can open a file in a folder the
// instant after Scan looked at it, so a caller that acts on "not busy" must
// re-check under its per-runtime lock, right before the rename that takes the
// folder away, and skip the action when the folder became busy meanwhile.
// A scan costs about fifteen system calls per process and one readlinkat
// per open descriptor, spread over a few workers, with no allocation for
// what does not match: milliseconds to tens of milliseconds on a host with
// hundreds of processes and tens of thousands of descriptors. Scan once per
// pass for every folder, and once more, for the one folder, under the lock.
//
// Processes that vanish while being read are not errors. Anything else
// that cannot be read makes the answer unknown, and unknown is busy (fail
// closed): Snapshot.Busy and Reason answer busy for every folder, with the
// processes named ("unknown: 1 processes could not be read (pid 42 (node)
// fd 7: ...)"). Permission refused on another user's process (when not
// running as root, or with /proc mounted hidepid=) counts in Denied, other
// errors in Failed. One exception: a scan running as root that is refused
// by PID 1 of its own PID namespace, which holds capabilities the scan
// lacks (the supervisor of the container the reclaimer runs in), counts it
// in Privileged instead; that does not make the answer unknown. Any other
// refusal does, however privileged the process: run the reclaimer as root
// with CAP_SYS_PTRACE (root's default) so that it can read every process.
//
// A cwd, root or descriptor deeper than PATH_MAX has no path /proc can
// give (ENAMETOOLONG). A folder is then found by identity: opened through
// the magic link with O_PATH and climbed with ".." comparing device and
// inode with the folders asked about. A file that deep cannot be climbed
// from: that process is unread, so the answer is unknown.
// Scan fails only when /proc cannot be listed or the context ends.
//
// The calling process is left out by default (Options.IncludeSelf): its own
// descriptors on a folder it is working on must not make the folder busy.
//
// Not seen: descriptors in flight in a unix socket (SCM_RIGHTS), io_uring
// registered files, and kernel users such as loop devices or swap files
// backed by a file in the folder. Holder paths of a process in another mount
// namespace are that namespace's paths.
//
// Scan is safe for concurrent use; it keeps no state between calls. It reads
// processes with a bounded pool of workers.
package busy
