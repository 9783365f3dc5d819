// Package notify delivers notices (a step scheduled, a runtime reclaimed or
// archived, an action failed) to the webhooks of [[notify]].
//
// Send and Offer never block: events go into a bounded queue per webhook.
// An event given to Send is delivered from memory under a random delivery
// id, and a full queue drops it (reported through Options.Record, like
// every delivery). An event of the Outbox (Offer) is a notice of the
// ledger: its delivery id is derived from the notice and the webhook
// (DeliveryID), so a re-send after a restart or by another replica is the
// same delivery to the receiver, and a full queue leaves it owed in the
// ledger for the next sweep. Each POST carries the JSON body, the event
// kind in X-Reclaimer-Event, the attempt's time in X-Reclaimer-Timestamp,
// the delivery id in X-Reclaimer-Delivery (the same on every retry: a
// receiver dedupes on it), and, with a secret, the HMAC-SHA256 of
// timestamp, delivery id and body in X-Reclaimer-Signature (Sign, Verify).
// A delivery that fails (a transport error, a redirect, which is never
// followed, or a status other than 2xx) is retried with exponential
// backoff up to Options.Attempts times (an outbox delivery: that many in
// all, over every start). What a Delivery says (URL, Err) never holds a
// credential. Close stops taking events and waits, within its context,
// for the queues to empty; a round it cuts short is reported Stopped (an
// outbox notice stays owed).
//
// The Outbox (outbox.go) is the transactional outbox: Sweep offers what
// the ledger owes the webhooks (ledger.Store.PendingNotices) within a
// horizon, for the sources its Scope owns, and Done writes each outcome
// back through the Scope's write (fenced for a fleet's shared runtimes).
// Delivery is at least once: a POST that went through just before a crash
// is sent again, under the same delivery id.
package notify
