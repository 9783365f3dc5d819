// Package e2b is the "e2b" backend: sandboxes at E2B (or a self-hosted E2B
// API) whose metadata matches the configured selector.
//
// Roles: Lister (GET /v2/sandboxes with the metadata filter, paginated; a
// narrowed listing reads GET /sandboxes/{id}), Suspender (pause: memory and
// files kept), Deleter (kill), NativeLifecycle (the sandbox's timeout, a
// Deadline whose step, pause or kill, was fixed at creation).
//
// E2B reports no activity: the ledger is the only activity source, so a
// runtime's LastActivity is always zero. Nothing this backend calls counts
// as activity or wakes a sandbox: it never calls connect or resume (connect
// resumes a paused sandbox), nor the sandbox's own envd API.
//
// Safety: a sandbox that E2B kills at its timeout (no auto-pause) is never
// given an earlier deadline, since that would delete it sooner without an
// archive; its deadline may only be extended. CreatedAt is E2B's startedAt,
// the only creation-like time it reports.
//
// Errors wrap the categories of package remote (backend.ErrNotFound,
// backend.ErrConflict, remote.ErrUnavailable).
package e2b
