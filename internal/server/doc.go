// Package server is `reclaimer serve`: the reconciler loop, the HTTP API of
// api/openapi.yaml, activity coalescing, metrics and notices. Its handlers
// are thin: each decodes, calls the daemon's *ops.App and writes a view;
// holds, marks, registrations and passes are the application layer's.
//
// Time: the loop's ticker, hold expiry, activity flushing and every
// decision run on Options.Clock (clock.Real by default); tests give a
// clock.Fake, move it, and wait on Options.Events instead of sleeping.
//
// Concurrency: passes (and dry runs) run one at a time; HTTP handlers run
// concurrently with them. A hold is written under the same per-runtime
// lock a pass takes to re-check and remove that runtime, so a host taking
// a hold and a pass removing the runtime never both succeed. Activity
// reports are acknowledged once in memory and written in batches; every
// read of activity by the engine sees the pending reports too (the store
// it is given merges them), and a clean stop writes them before exiting.
//
// Errors reach clients as {"error": {"code", "message", "field"}} with the
// HTTP status mapped from the error's category at this edge only.
//
// Reload (SIGHUP) swaps the configuration, sources and engine between
// passes; the listen address and the ledger path need a restart.
package server
