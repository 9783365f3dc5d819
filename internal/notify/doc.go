// Package notify delivers notices (a step scheduled, a runtime reclaimed or
// archived, an action failed) to the webhooks of [[notify]].
//
// Send never blocks: events go into a bounded queue per webhook, and a
// full queue drops the event (reported through Options.Record, like every
// delivery). Each POST carries the JSON body, its HMAC-SHA256 under the
// webhook's secret in X-Reclaimer-Signature ("sha256=<hex>"), and the event
// kind in X-Reclaimer-Event. A delivery that fails (a transport error or a
// status other than 2xx) is retried with exponential backoff up to
// Options.Attempts times. Close stops taking events and waits, within its
// context, for the queues to empty.
package notify
