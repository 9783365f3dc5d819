// Package discover finds what coding agents left on this machine and
// describes each set it finds as a source: its kind, the configuration
// table that would manage it, where it looked and what it found. It never
// acts and never writes.
//
// Where it looks (every path injectable through Options):
//
//   - OpenHands agent-server: conversation worktrees in
//     conversation_worktree_root (default /tmp/conversation-worktrees),
//     <root>/<conversation_id>/<repo> on branch openhands/<conversation_id>;
//     its storage (<persistence>/runtime-control, runtime-data, and the
//     conversations folder beside it) in <home>/.openhands,
//     <home>/workspace/.openhands and wherever its containers' mounts say;
//     its containers on the Docker Engine: labelled
//     ai.openhands.runtime-owner (the layout is derived from their mounts
//     and accepted only when it hashes to the label, as the agent-server
//     computes it), labelled ai.openhands.execution-scope, or named
//     openhands-execution-*. Containers whose owner label or execution
//     scope is that of a layout found are part of that layout's source
//     (its backend lists them), never a source of their own.
//   - Claude Code: <repo>/.claude/worktrees/<name> (subagents' agent-*
//     included) of every repository it knows (the projects of
//     <home>/.claude.json) or whose agent worktrees were found, and the
//     older <home>/.claude-worktrees/<project>/<name>.
//   - Codex: <home>/.codex/worktrees/<id>/<repo>.
//   - Cursor: <home>/.cursor/worktrees/<repo>/<name>.
//   - The other linked worktrees of every repository found there.
//
// Homes: the current user's; as root, every home of /etc/passwd whose
// shell is a login shell (not nologin, false or sync) and is not "/". A
// user other than root is shown only what it owns (files in a shared /tmp
// included).
//
// Safety: a place that is a symbolic link, or reached through one, is not
// followed (the Place says so); the walk below a place never enters a
// link, a hidden folder or another mount. A worktree is reported only when
// proven from both sides (worktree.ProveLinked, the proof the worktree
// backend acts on: its .git file names an admin folder of its repository,
// and that admin folder names it back), so an agent
// that writes its repository's .git cannot make discovery report a folder
// someone else owns; a full clone is never a worktree.
//
// Cost: a walk of a few levels under each place, a handful of small file
// reads per worktree, no git process, and one Engine listing.
package discover
