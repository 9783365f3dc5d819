// Package openhandscloud is the "openhands-cloud" backend: sandboxes of an
// OpenHands Cloud (or self-hosted OpenHands) app server, through its V1
// API. It calls only:
//
//	GET    /api/v1/sandboxes/search               list (page_id, limit 100)
//	GET    /api/v1/sandboxes?id=...               a narrowed listing (batch get)
//	GET    /api/v1/app-conversations/search       activity, sharing, scope
//	POST   /api/v1/sandboxes/{id}/pause           Suspend (the PVC is kept)
//	DELETE /api/v1/sandboxes/{id}?sandbox_id=...  Delete, forced path
//	DELETE /api/v1/app-conversations/{id}         Delete, gentle path
//
// It never calls resume, send-message or anything that starts a sandbox or
// runs the agent: reading never wakes a paused sandbox.
//
// # Activity and sharing
//
// Sandboxes carry no activity time. A sandbox's LastActivity is the newest
// updated_at of the conversations that use it (sub-conversations included),
// and its creation when it has none; host reports in the ledger add to it.
// A sandbox is busy while any of its conversations runs or waits for the
// user's confirmation (execution_status running, waiting_for_confirmation),
// so one shared by several conversations is paused or removed only when
// none of them is active; the fingerprint holds its conversations, so a
// conversation that joins between plan and apply skips the action.
//
// # Scope
//
// Search answers the key's own user's sandboxes. UserID, when set, also
// requires the sandbox and every conversation on it to be that user's;
// ConversationTags, when set, requires the sandbox to have conversations and
// every one of them to carry those tags. A sandbox shared with a
// conversation outside the scope is never touched.
//
// # Removal: forced by default, gentle on request
//
// Every removal (retention's archive step, an orphan, a delete on request)
// deletes the sandbox (the forced path, DELETE /api/v1/sandboxes/{id}):
// OpenHands keeps the conversations, whose transcripts stay readable (the
// sandbox shows as MISSING), while the sandbox's compute and storage, what
// costs money, go. OpenHands keeps no copy of the workspace, so retention
// here is a deletion of the workspace: set it where work is pushed.
//
// With DeleteConversations (the gentle path) a removal deletes each of the
// sandbox's conversations instead, and OpenHands frees the sandbox with the
// last of them; transcripts go too. It refuses a sandbox with an active
// conversation (ErrBusy) or one outside the scope (ErrProtected), and when
// the sandbox is still there afterwards (a conversation reclaimer cannot see
// keeps it) it reports ErrConflict and does not force it.
//
// # Native lifecycle
//
// OpenHands' own idle pause and deletion are server-wide settings
// (RUNTIME_IDLE_SECONDS, RUNTIME_DEAD_SECONDS) with no per-sandbox read or
// write: NativeLifecycle makes no request and returns what the operator
// configured (ServerIdlePause, ServerDelete; by default OpenHands' documented
// 20 minutes and 60 days) with an empty Can, so native plan reports them and
// never tries to change them.
//
// # Agent-server
//
// A running sandbox's exposed AGENT_SERVER URL and its session key are
// carried in Runtime.AgentServer, for the agent-server idle clock.
//
// Errors wrap the categories of package remote.
package openhandscloud
