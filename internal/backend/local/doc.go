// Package local holds what the host-folder backends (worktree, dir, and
// the bind-mounted folders of containers) share: selecting caches (cache
// folders of a home, core dumps) and dependencies (git-ignored folders, see
// package ignored), re-checking a plan's paths before discarding them,
// sizing, and the newest-change time of a runtime's own files.
//
// Every path it returns or discards is inside the runtime's managed root;
// anything else is refused with backend.ErrProtected. It never deletes: it
// hands paths to the engine's Discard (a rename into the trash).
package local
