// Package agentserver reads the idle clock of an OpenHands agent-server:
// GET /server_info answers idle_time, the seconds since the server last
// executed anything (the signal OpenHands' own runtime-api reaps idle pods
// by). A runtime whose agent-server is known (backend.Runtime.AgentServer:
// an OpenHands Cloud sandbox's AGENT_SERVER URL, a URL a host registered,
// a container's labelled port) gets its last activity from that clock.
//
// Rules:
//
//   - Reading the clock is not activity. /server_info executes nothing in
//     the server, and what it answers only refines the observed
//     LastActivity of the runtime; nothing is recorded as reported
//     activity.
//   - The clock is read only for a runtime that is running. A paused or
//     stopped runtime is never contacted: an HTTP request to a paused
//     sandbox's URL may wake it (Refine skips it; LastActivity refuses it
//     with ErrNotRunning).
//   - A clock that cannot be read fails closed: Refine marks the runtime
//     busy with the reason, so no step but a lifetime cap touches it on
//     that pass.
//   - The estimate (now − idle_time, in whole seconds) is stable: a
//     reading within Tolerance of the previous estimate for the same URL
//     keeps the previous one, so network latency does not look like new
//     activity between plan and apply.
//   - The session key travels only in the X-Session-API-Key header. It is
//     scrubbed from every error, redirects are refused (the key would
//     follow them), and the URL may not carry credentials.
//
// Concurrency: a Clock is safe for concurrent use; Refine reads at most
// Concurrency clocks at once. Errors are wrapped as "read idle clock of
// URL: ...".
package agentserver
