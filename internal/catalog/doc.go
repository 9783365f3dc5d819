// Package catalog is the list of archives the ledger records, as the CLI
// and the API show them (Entry: one printer for tables, --json and API
// bodies), the sinks they live in (NewSink for new archives from the
// configuration, SinkOf for a recorded one), and the pruning of old
// archives.
//
// Pruning is planned, then applied, like a pass (DESIGN §3.5): PlanPrune
// is a dry run that reads the ledger only; ApplyPrune journals an intent
// per archive, removes its objects and then its manifest from the sink,
// then the ledger record, then journals the outcome. Every step is
// idempotent (removing a missing object or record succeeds), so a prune
// interrupted by a crash is finished by running it again. Archives of a
// pinned or leased runtime are never pruned. One archive's failure is
// reported in its result and the others go on.
package catalog
