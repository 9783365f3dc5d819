// Package native writes reclaimer's policy into the providers' own timers
// ("native first"): where a provider suspends, archives or expires
// sandboxes by itself, it is told to do so when the policy would, and the
// reconciler loop only covers what the provider cannot do.
//
// Want derives, purely, what one runtime's settings should be from its
// source's policy and the ledger (activity, leases, holds, pins):
//
//   - idle_suspend → the provider's idle timer (Daytona auto-stop, an http
//     server's idle_suspend);
//   - retention → the provider's archive timer where an archive keeps the
//     whole runtime restorable (Daytona cold storage), counted from the
//     suspension: retention − idle_suspend;
//   - no provider timer ever deletes: a delete timer is wanted off, since
//     reclaimer deletes only after a notice and, with unsaved work, a
//     verified archive (E2B sandboxes that are killed at their timeout are
//     only ever given a later deadline, never an earlier one);
//   - deadline providers (E2B's timeout): the newest activity plus
//     idle_suspend, moved later by a lease or hold, capped by the runtime's
//     creation plus max_lifetime;
//   - a lease or hold on a provider with a touchable idle timer (Daytona's
//     last activity) restarts that timer on every pass, until max_lifetime.
//
// A policy key that is off has no opinion: the provider's value stands. A
// pinned runtime's settings are left as they are. A provider timer
// stricter than the policy is reported as drift and, where the provider
// allows, set to the policy's value; where it does not (settings fixed at
// creation), it is reported only.
//
// Plan reads; Sync reads and writes. Both list every source in parallel
// and bound the calls per source; a source that fails is reported in the
// Report and does not stop the others. Sync is idempotent: a second run
// finds nothing to change.
package native
