package worktree

// ProveLinked is the ownership proof this backend acts on (proveLinked),
// for those who must tell a worktree from a folder a repository merely
// names without acting on it (package discover): path is a linked worktree
// git made for the repository whose common git folder is common, proven
// from both sides; it returns the worktree's admin folder.
func ProveLinked(common, path string) (admin string, err error) { return proveLinked(common, path) }

// ReadLinkFile reads one of the one-line files git writes to link a
// worktree and its admin folder (the worktree's .git, "gitdir: X"; the
// admin folder's gitdir and HEAD), refusing anything but a small regular
// file; prefix is the line's expected start.
func ReadLinkFile(p, prefix string) (string, error) { return readLinkFile(p, prefix) }
