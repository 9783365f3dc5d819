// Package httpbackend is the "http" backend: any orchestrator that serves
// reclaimer's http backend protocol (api/http-backend.yaml, OpenAPI 3.1).
//
// The server advertises what it supports in GET /capabilities; the backend
// reads that document once (again after a failure) and never calls an
// operation the server did not advertise. Its role methods are always
// present, so the capability table is fixed, but Suspend, Delete and
// Lifecycle return an error wrapping errors.ErrUnsupported when the server
// lacks the operation, and the engine falls back (the policy then reports
// the step as impossible rather than failing).
//
// Roles: Lister (GET /runtimes with the label selector, paginated, state and
// optional last activity), Suspender, Deleter (mode=archive for StepArchive
// when the server supports it), NativeLifecycle (get and set timers, touch).
package httpbackend
