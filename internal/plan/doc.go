// Package plan holds the plan of one pass and the result of applying it, in
// the exact shapes the CLI prints with --json, `plan --out` saves and
// `apply --plan` reads back.
//
// A plan is a preview, not a promise: apply re-observes every runtime under
// its lock and skips an action ("changed since plan") when anything it was
// based on changed; it never does more than the plan says. Each action
// carries the observation it was based on so that a saved plan can be
// checked the same way hours later.
//
// Values only; no I/O besides Read and Write of a plan file.
package plan
