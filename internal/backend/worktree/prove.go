package worktree

// ProveLinked is the ownership proof this backend acts on (proveLinked),
// for those who must tell a worktree from a folder a repository merely
// names without acting on it (package discover): path is a linked worktree
// git made for the repository whose common git folder is common, proven
// from both sides; it returns the worktree's admin folder.
func ProveLinked(common, path string) (admin string, err error) { return proveLinked(common, path) }
