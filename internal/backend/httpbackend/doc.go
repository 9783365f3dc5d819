// Package httpbackend is the "http" backend: any orchestrator that serves
// reclaimer's http backend protocol (api/http-backend.yaml, OpenAPI 3.1).
//
// The server advertises what it supports in GET /capabilities. Open reads
// that document and returns the backend with exactly the roles advertised
// (With builds one per combination), so the policy never plans a step the
// server cannot do and reclaimer never calls an operation it did not
// advertise. When the server cannot be reached at Open, every role is
// present and each checks the capabilities again when used, failing with
// errors.ErrUnsupported for what the server lacks. The document is read
// once per process: a server that adds operations is seen after a restart.
//
// Roles: Lister (GET /runtimes with the label selector, paginated, state and
// optional last activity), and as advertised Suspender, Deleter
// (mode=archive for StepArchive when the server supports "archive"),
// NativeLifecycle (get and set timers, touch).
package httpbackend
