// Package modal is the "modal" backend: Modal sandboxes whose tags match
// the configured selector, through Modal's gRPC API (service
// modal.client.ModalClient; the few messages used are in modalpb). It
// calls only:
//
//	SandboxList        list by tags, newest first, paged by before_timestamp
//	SandboxTagsGet     a narrowed listing: still in scope?
//	SandboxWait        a narrowed listing: finished? (timeout 0: no wait)
//	SandboxSnapshotFs  Export: the filesystem as an image, before removal
//	SandboxTerminate   Delete
//
// Roles: Lister, Deleter, Exporter, Restorer, NativeLifecycle. There is no
// Suspender: Modal cannot pause a sandbox, so idle suspend is not offered.
//
// State comes from task_info: no task or not started is starting; a
// finished_at or a result means the sandbox ended, and it is left out (it is
// gone); otherwise running. Modal reports no activity: the task's start is
// the floor, the ledger adds host reports.
//
// A sandbox's filesystem exists only while it runs, so every listed sandbox
// carries Unsaved: no removal happens without an archive first. Export
// snapshots the filesystem (SandboxSnapshotFs, which must answer SUCCESS with
// an image id), and writes a manifest naming the image into the archive
// sink, read back; the image itself stays at Modal. Restore cannot start a
// sandbox (reclaimer calls no create RPC): it answers the command that
// starts one from the image, as an error wrapping errors.ErrUnsupported
// (StartCommand).
//
// timeout_secs (lifetime) and idle_timeout_secs are fixed at creation:
// NativeLifecycle reports them (Deadline = start + timeout, deleting;
// IdleSuspend = idle timeout with Delete Immediately, since Modal
// terminates an idle sandbox) with an empty Can, and no request.
//
// Credentials are the token id and secret (MODAL_TOKEN_ID,
// MODAL_TOKEN_SECRET by default), sent as metadata headers and scrubbed from
// every error. Errors wrap backend.ErrNotFound, backend.ErrConflict or
// remote.ErrUnavailable (see Error).
package modal
