// Package daytona is the "daytona" backend: sandboxes at Daytona whose
// labels match the configured selector. The client is written from
// Daytona's published OpenAPI document (the generated Go client is not
// available from the module proxy this project uses), and calls only:
//
//	GET    /sandbox                            list (labels filter, cursor)
//	GET    /sandbox/{id}                       one sandbox (narrowed listing, settings)
//	POST   /sandbox/{id}/stop                  Suspend
//	POST   /sandbox/{id}/archive               Delete with StepArchive (cold storage)
//	DELETE /sandbox/{id}                       Delete
//	POST   /sandbox/{id}/autostop/{minutes}    NativeLifecycle
//	POST   /sandbox/{id}/autopause/{minutes}
//	POST   /sandbox/{id}/autoarchive/{minutes}
//	POST   /sandbox/{id}/autodelete/{minutes}
//	POST   /sandbox/{id}/last-activity         NativeLifecycle Touch (a lease)
//
// Roles: Lister (with lastActivityAt as LastActivity), Suspender (stop: the
// disk is kept, billing for CPU and memory ends), Deleter (for StepArchive
// the sandbox goes to Daytona's cold storage, restorable by starting it, so
// retention loses nothing; for StepDelete it is deleted), NativeLifecycle
// (auto-stop, auto-pause, auto-archive and auto-delete intervals, all
// changeable after creation, and the last-activity touch).
//
// Interval semantics, exactly as the document states them: auto-stop and
// auto-pause 0 mean disabled; auto-archive 0 means the provider's maximum (read as off:
// Daytona's SDK documents it as "never archive"); auto-delete negative means
// disabled and 0 means delete at once upon stopping (read as
// backend.Immediately). Reading never starts a sandbox.
package daytona
