// Package worktree is the "worktree" backend: git worktrees that agents
// create per conversation.
//
// Sources: a repository (every linked worktree of it; never the main
// worktree) or a root folder (every linked worktree found up to three
// levels below it, e.g. <root>/<conversation>/<repo>). A full clone found
// under a root is not a runtime: removing it would lose its branches.
//
// Ownership is proven from both sides before a worktree is a runtime (see
// proveLinked): git's list alone is not proof, since whoever writes the
// repository's .git can make it name any folder. The worktree's own .git
// must be a regular file naming an entry of the repository's worktrees/
// folder, and that entry's gitdir must name the worktree back. A folder
// that fails is listed with the reason as its pin and no managed root:
// reported, never acted on; Delete proves it again before the rename.
//
// The managed root of a worktree is the configured root, or, for a
// repository source, the folder git created the proven worktree in
// (never "/" or a system folder): that is where its trash lives (same
// filesystem, one rename).
//
// Roles: Lister (state from /proc via the engine, a `git worktree lock`
// as a pin, unsaved work counted by git), FileReclaimer (git-ignored
// dependencies, core dumps), Exporter (a snapshot commit of uncommitted and
// untracked work under refs/reclaimer/, then a verified git bundle of the
// branch and the snapshot, a tar of each untracked nested repository, and
// a tar of the ignored files that are not rebuildable dependencies; nothing
// is committed to the user's branch; a worktree holding state that cannot
// be archived exactly is listed with it in Unarchivable and refused),
// Deleter (the folder into the trash, then exactly its own admin folder is
// removed, never a repository-wide `git worktree prune`, which would also
// drop the entries of worktrees whose folder is absent for now; the branch
// and its commits stay), Restorer (`git worktree add` from the
// bundle, uncommitted work back as uncommitted).
package worktree
