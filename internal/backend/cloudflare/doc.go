// Package cloudflare is the "cloudflare" backend: Cloudflare Sandbox SDK
// sandboxes, reached through the bridge Worker Cloudflare publishes (bearer
// key), and, where an account id and API token are configured, seen
// through the account Containers API. It calls only:
//
//	POST   /v1/sandbox/{id}/persist?excludes=...   Export: /workspace as a tar
//	DELETE /v1/sandbox/{id}                        Delete (destroy)
//	POST   /v1/sandbox                             Restore: a new sandbox
//	POST   /v1/sandbox/{id}/hydrate                Restore: the tar put back
//	GET    /accounts/{a}/containers/applications   the application (Containers API)
//	GET    .../applications/{app}/instances-v2     instance states, by name
//
// It never calls GET /v1/sandbox/{id}/running: that runs a command in the
// sandbox, which starts a sleeping container and counts as activity.
//
// # What the runtimes are
//
// The bridge has no list. The runtimes are the sandbox names hosts
// registered (Names, fed from the ledger's registrations); nothing else is
// ever touched. Their state comes from the Containers API, matched to
// instances by name: running is running, provisioning is starting,
// stopping, stopped and inactive are asleep (stopped), failed, unhealthy
// and unknown are unknown. Without the Containers API, or for a name with no
// instance, the state is unknown: no step touches the sandbox (the bridge
// cannot tell whether it is awake without waking it).
//
// # Sleep loses files
//
// A sleeping Cloudflare sandbox loses every file ("all previous state is
// lost"). An awake sandbox therefore carries Unsaved: no removal happens
// without an archive. Export of an awake sandbox streams persist (dependency
// folders left out unless the archive includes them) straight into the
// archive sink, reads it back to the tar's last block, and records what
// survives (the /workspace tree) and what does not (anything outside
// /workspace, processes, memory). Export of a sleeping sandbox calls nothing
// (persist would start an empty container) and records that nothing
// survived. Retention, an orphan sweep and a delete on request thus archive
// first and then destroy. Restore creates a sandbox (or, with a target name,
// uses that one) and hydrates it from the archive, after verifying it.
//
// There is no Suspender (the bridge cannot make a sandbox sleep, and sleep
// loses the files) and no NativeLifecycle (sleepAfter and keepAlive are set
// in the Worker's code, not through the bridge).
//
// Errors wrap the categories of package remote. The keys are scrubbed
// from every error.
package cloudflare
