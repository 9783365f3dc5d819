// Package notify delivers notices (a step scheduled, a runtime reclaimed or
// archived, an action failed) to the webhooks of [[notify]].
//
// Send never blocks: events go into a bounded queue per webhook, and a
// full queue drops the event (reported through Options.Record, like every
// delivery). Each POST carries the JSON body, the event kind in
// X-Reclaimer-Event, the attempt's time in X-Reclaimer-Timestamp, the
// delivery id in X-Reclaimer-Delivery (the same on every retry: a receiver
// dedupes on it), and, with a secret, the HMAC-SHA256 of timestamp,
// delivery id and body in X-Reclaimer-Signature (Sign, Verify). A delivery
// that fails (a transport error, a redirect, which is never followed, or a
// status other than 2xx) is retried with exponential backoff up to
// Options.Attempts times. What a Delivery says (URL, Err) never holds a
// credential. Close stops taking events and waits, within its
// context, for the queues to empty.
package notify
