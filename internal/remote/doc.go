// Package remote is the HTTP layer every remote-sandbox backend shares: a
// Client that rate-limits (requests a second per source), bounds the
// requests in flight, retries 429 and 5xx answers and network errors with
// exponential backoff and full jitter (honouring Retry-After), times out each
// attempt, and stops calling a provider that keeps failing for a cool-down
// (so an outage fails that backend's actions fast instead of holding up a
// pass); Secret, a credential read from the environment or a file that never
// prints; and Pages, a pagination loop bounded in pages, in-scope items and
// empty pages (Bounds), keeping only what is in scope page by page.
//
// Rules kept here for every provider (docs/backends.md, "Hostile
// providers"): no redirect carries a credential (RefuseRedirects: a 3xx is
// ErrRedirect, never followed); no provider byte carries our credential
// onward (every answer, body and headers, is scrubbed as it arrives, before
// it is decoded or quoted; messages are scrubbed before they are cut); a
// listing ends (Bounds, ErrUnbounded).
//
// Concurrency: a Client is safe for concurrent use; its limits are shared by
// every goroutine using it, so one Client per configured source bounds what
// reclaimer sends to that source.
//
// Errors: a request that got an answer outside 2xx returns *StatusError,
// which wraps backend.ErrNotFound (404, 410), backend.ErrConflict (409) or
// ErrUnavailable (429, 5xx after the retries, or the cool-down), so callers
// test categories with errors.Is. Error texts never hold a credential: the
// client scrubs the secret from every answer before anything reads it.
//
// Every call this package makes is idempotent in its effect (list, get,
// pause, stop, delete, set a timer), which is why retrying a POST is safe.
package remote
