// Package views holds the one set of answer shapes: runtime, status,
// journal entry, archive, plan, pass, problem, hold. The CLI's --json, the
// API bodies and the CLI's text tables all come from these values; the
// API document (api/openapi.yaml) names the Go type of each schema
// (x-go-type), so that the generated server and client use these types
// themselves, and a test fails when a schema and its view disagree.
//
// JSON keys are snake_case; times are RFC 3339 (time.Time), durations are
// strings ("14d", "15m0s"), sizes bytes. Values only: no I/O.
package views
