package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/ops"
)

// Handler is the whole HTTP API: the generated router over the handlers,
// /metrics, and JSON errors for what matches no route under /v1/; the
// dashboard at every other path; all behind the stop check, and the API
// behind the token check (the dashboard checks its sessions itself).
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	openapi.HandlerWithOptions(&api{d: d}, openapi.StdHTTPServerOptions{
		BaseRouter:       mux,
		ErrorHandlerFunc: paramError,
		Middlewares:      []openapi.MiddlewareFunc{d.timed},
	})
	mux.Handle("GET /metrics", d.metrics.handler())
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("no endpoint %s %s (see /openapi.json): %w", r.Method, r.URL.Path, backend.ErrNotFound))
	})
	mux.Handle("/", d.dash)
	return d.guard(mux)
}

// isAPI tells whether path is the API's (the bearer token's), not the
// dashboard's.
func isAPI(path string) bool {
	return path == "/v1" || strings.HasPrefix(path, "/v1/") || path == "/openapi.json" || path == "/metrics" || path == "/healthz"
}

// guard answers 503 while stopping and, on the API's paths, 401 without
// the right token; /healthz needs no token. The dashboard's paths go to
// the dashboard, which lets nothing but its login form and assets through
// without a session.
func (d *Daemon) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.stopping.Load() {
			writeError(w, ops.ErrShuttingDown)
			return
		}
		if isAPI(r.URL.Path) && r.URL.Path != "/healthz" && !d.authorized(r) {
			writeError(w, ops.ErrUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorized compares digests in constant time: neither the token's
// content nor its length leaks through timing.
func (d *Daemon) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	want := d.setupNow().token
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// timed records each request's latency by route (never by runtime id).
func (d *Daemon) timed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now() // latency is the real time a request took, whatever the daemon's clock
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		d.metrics.requestLatency.WithLabelValues(r.Pattern, statusText(sw.status)).Observe(time.Since(start).Seconds())
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func statusText(code int) string { return strconv.Itoa(code) }
