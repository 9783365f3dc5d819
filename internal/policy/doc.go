// Package policy decides, from what was observed, which steps to propose.
//
// It is pure: values in, decisions out; no clock (Input.Now), no I/O, no
// randomness, and the same input always gives the same output in the same
// order. That is what lets a dry run be a faithful preview and what the
// property tests lean on.
//
// The policies, in the order they run:
//   - protection: pinned, leased, held, busy, running, starting or
//     unknown-state runtimes get no step, except that the lifetime cap, a
//     hard cap, still suspends a running one whatever its lease, hold or
//     activity (never a pinned one; leases are capped by max_lifetime);
//   - caches: a stopped runtime's cache folders and core dumps;
//   - idle suspend and lifetime cap: running runtimes that can be suspended;
//   - retention: inactive longer than the retention (per-runtime override
//     first) is first announced (a schedule with a due time Grace ahead),
//     then archived once due, unless activity, a lease or a pin came in
//     between, which cancels the notice;
//   - requests: steps asked for explicitly (delete on request: no notice);
//   - disk budget: while a filesystem is above its high watermark, idle
//     runtimes, least recently active first, shed dependencies until the
//     projected usage is at or under the low watermark.
//
// A runtime gets at most one destructive action per pass, and never a
// destructive action with unsaved work unless its backend can export it.
//
// Explain runs the same decision and records, at the branch each rule
// takes for one runtime, its Verdict (acts, announces, due, cancels or
// not, with the typed reason and when the step would be due): the
// explanation is the decision itself, never a second implementation of
// the rules, and a property test holds the two together.
package policy
