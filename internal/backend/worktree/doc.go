// Package worktree is the "worktree" backend: git worktrees that agents
// create per conversation.
//
// Sources: a repository (every linked worktree of it; never the main
// worktree) or a root folder (every linked worktree found up to three
// levels below it, e.g. <root>/<conversation>/<repo>). A full clone found
// under a root is not a runtime: removing it would lose its branches.
//
// The managed root of a worktree is the configured root, or, for a
// repository source, the folder holding the worktree: that is where its
// trash lives (same filesystem, one rename).
//
// Roles: Lister (state from /proc via the engine, a `git worktree lock`
// as a pin, unsaved work counted by git), FileReclaimer (git-ignored
// dependencies, core dumps), Exporter (a snapshot commit of uncommitted and
// untracked work under refs/reclaimer/, then a verified git bundle of the
// branch and the snapshot; nothing is committed to the user's branch),
// Deleter (the folder into the trash, then `git worktree prune`; the
// branch and its commits stay), Restorer (`git worktree add` from the
// bundle, uncommitted work back as uncommitted).
package worktree
