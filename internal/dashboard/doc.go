// Package dashboard is the operator's web page of `reclaimer serve`: an
// edge like the CLI and the HTTP API. Every page calls operations of
// internal/ops and renders their views (internal/views) with html/template;
// it decides nothing itself. What a page needs that no operation gives is
// added to ops, not here.
//
// Everything it serves is in the binary (embed): no build step, no external
// asset. A strict Content-Security-Policy allows scripts, styles and images
// from the daemon only and no inline script; the pages read and work
// without JavaScript (forms post, links sort and filter), and a small
// script adds live updates over EventSource (/events: a pass ended,
// activity arrived), countdowns and copy buttons.
//
// Authentication: the API token. The login form checks it and sets a
// session cookie (HttpOnly, SameSite=Strict, Secure over TLS) holding an
// HMAC, keyed by the token's digest, of the time it was issued: never the
// token. A session ends after SessionTTL, and every session ends when the
// token changes. Every state-changing form posts a CSRF token (an HMAC of
// the session) that is checked here, besides Go's cross-origin protection
// (Sec-Fetch-Site, Origin). A bearer header is accepted for reading pages;
// changes need a session and its CSRF token. Nothing but the login form,
// its static assets and /healthz (the API's) is served without a session.
//
// Concurrency: a Dashboard is safe for concurrent use; Publish never
// blocks (a slow event stream misses events, not passes). Closing
// Options.Stop ends every event stream (the daemon's graceful stop).
package dashboard
