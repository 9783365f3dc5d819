// Package openhands is the "openhands" backend: the runtimes of one
// OpenHands agent-server in Docker mode, found the way its own storage
// module finds them, from two settings (Layout): the persistence folder P
// and the conversations folder C.
//
//   - P/runtime-control/<id>.json is a conversation's identity manifest
//     (its keys): read, never modified or removed. Its workspace_path, when
//     outside the runtime folder, is a caller's checkout: listed, never
//     touched.
//   - P/runtime-control/<id>.archived.json is the archive marker: while it
//     exists the agent-server shows the conversation as archived and
//     read-only and refuses to start its runtime (HTTP 410). reclaimer
//     writes it exactly as the agent-server's retention does
//     ({"retired_at": "<ISO 8601, +00:00>"}) and removes it on restore.
//   - P/runtime-data/<id> is the runtime folder, the managed root's child:
//     persistence/ is the sandbox's $HOME, workspace/ the workspace.
//   - P/runtime-data/.trash is the agent-server's own trash.
//   - C/<id>/base_state.json: its modification time is the conversation's
//     last activity (newer file changes in the runtime folder count too).
//   - Containers labelled ai.openhands.runtime-owner=sha256(C NUL P)[:24]
//     are this agent-server's conversation containers, matched to a
//     conversation by the folders they mount; those labelled
//     ai.openhands.execution-scope=sha256(C)[:24] its execution-only ones.
//
// Runtimes, keyed by the conversation id's 32 hex digits: one per
// conversation with a runtime folder, manifest or container; plus
// "container:<name>" for an owner-labelled container that mounts no
// conversation's folder, "execution:<name>" for an execution-only
// container, and "trash" for the agent-server's own trash when it holds
// entries.
//
// Orphans (Runtime.Orphan, swept by the orphan policy after the grace
// period): a runtime folder without a manifest, an owner-labelled container
// without one, a conversation archived by the agent-server whose folder is
// still there, a stopped execution container, the agent-server's trash,
// and a conversation that ran (its history is there) but whose runtime
// folder and containers are gone, not archived (the agent-server would
// resume it into an empty runtime): sweeping that one writes its archive
// marker and nothing else, so the agent-server shows it archived and
// read-only; its manifest, the keys to the history, is never touched. A
// manifest alone is a conversation not started yet, and an archived one
// (manifest and marker, no folder) has nothing left to manage: neither is
// listed.
//
// Roles: Lister (one listing of runtime-control and runtime-data, one
// Engine request), Suspender (stops the conversation's containers),
// FileReclaimer (caches of the home and core dumps, git-ignored
// dependencies of the workspace, never while a container uses the folder),
// Exporter (a verified tar.zst of the runtime folder, workspace and home,
// less caches, core dumps and dependencies), Deleter (marker first, then,
// with no container using it, the folder into the trash), Restorer (the
// folder back, then the marker removed: the conversation resumes), Locker
// (re-observes), Watcher (container die and stop events).
//
// Races with the agent-server: it takes no lock reclaimer can share. The
// marker, written before anything is removed, is what stops it from
// starting the runtime afterwards; a container found using the folder
// after the marker was written aborts the removal and the marker is taken
// away again. Caches and dependencies are freed only after a fresh Engine
// listing shows no container using the folder; one started in the
// microseconds before the renames would find those folders gone, which
// costs it a rebuild, not work.
//
// Without a Docker client (an agent-server in local mode) no container is
// looked at and every runtime folder counts as stopped: the engine's
// process scan is then the only busy check.
package openhands
