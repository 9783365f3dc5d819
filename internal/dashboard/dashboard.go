package dashboard

import (
	"context"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/clock"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/views"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Ops is what the dashboard calls: operations of the application layer
// (*ops.App has them all).
type Ops interface {
	Status(ctx context.Context) (*views.Status, error)
	Runtimes(ctx context.Context, q ops.RuntimeQuery) (*views.RuntimeList, error)
	Runtime(ctx context.Context, ref ops.Ref) (*views.Runtime, error)
	Explain(ctx context.Context, ref ops.Ref) (*views.Explain, error)
	Usage(ctx context.Context, q ops.UsageQuery) (*views.UsageHistory, error)
	Journal(ctx context.Context, q ops.JournalQuery) (*views.Journal, error)
	Archives(ctx context.Context, name string) ([]views.Archive, error)
	Mark(ctx context.Context, req ops.MarkRequest) ([]views.Marked, error)
	Apply(ctx context.Context, req ops.ApplyRequest) (*views.Pass, error)
}

var _ Ops = (*ops.App)(nil)

// Options configure a dashboard.
type Options struct {
	App Ops
	// Token is the SHA-256 digest of the API token in force (it may
	// change on a reload: every session then ends).
	Token func() [sha256.Size]byte
	// Clock is the time of sessions and countdowns; default clock.Real.
	Clock   clock.Clock
	Version string
	Logger  *slog.Logger
	// Stop, when closed, ends the event streams (a graceful stop must not
	// wait for browsers to go away).
	Stop <-chan struct{}
}

// SessionTTL is how long a login lasts.
const SessionTTL = 24 * time.Hour

// LeaseFor is how long the "lease 1 day" button keeps a runtime.
const LeaseFor = 24 * time.Hour

// Dashboard serves the pages, their assets, the login and the event
// stream.
type Dashboard struct {
	opts  Options
	pages map[string]*template.Template
	mux   *http.ServeMux
	hub   *hub
	xorig *http.CrossOriginProtection
}

// New makes a dashboard; its templates are parsed now (a broken one is a
// bug, and panics at start, not at the first request).
func New(opts Options) *Dashboard {
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Dashboard{opts: opts, pages: map[string]*template.Template{}, hub: newHub(), xorig: http.NewCrossOriginProtection()}
	for _, p := range []string{"login", "overview", "runtimes", "runtime", "scheduled", "archives", "journal", "error"} {
		d.pages[p] = template.Must(template.New(p).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html"))
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	m := http.NewServeMux()
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /login", d.loginForm)
	m.HandleFunc("POST /login", d.login)
	m.HandleFunc("POST /logout", d.changes(d.logout))
	m.HandleFunc("GET /{$}", d.reads(d.overview))
	m.HandleFunc("GET /runtimes", d.reads(d.runtimes))
	m.HandleFunc("GET /runtime", d.reads(d.runtime))
	m.HandleFunc("GET /scheduled", d.reads(d.scheduled))
	m.HandleFunc("GET /archives", d.reads(d.archives))
	m.HandleFunc("GET /journal", d.reads(d.journal))
	m.HandleFunc("GET /events", d.reads(d.events))
	m.HandleFunc("POST /actions/pin", d.changes(d.pin))
	m.HandleFunc("POST /actions/unpin", d.changes(d.unpin))
	m.HandleFunc("POST /actions/lease", d.changes(d.lease))
	m.HandleFunc("POST /actions/reclaim", d.changes(d.reclaim))
	m.HandleFunc("/", d.reads(func(w http.ResponseWriter, r *http.Request, s *session) {
		d.fail(w, r, s, http.StatusNotFound, fmt.Errorf("no page %s", r.URL.Path))
	}))
	d.mux = m
	return d
}

// Publish tells every open page that something happened: "pass" (a pass
// ended) or "activity" (activity arrived). It never blocks.
func (d *Dashboard) Publish(kind string) { d.hub.publish(kind) }

// ServeHTTP serves every path but the API's.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		h.Set("Cache-Control", "no-store")
	}
	d.mux.ServeHTTP(w, r)
}

// page is what every template gets.
type page struct {
	Title   string
	Nav     string // the current section, for aria-current
	Version string
	// CSRF is the session's token for forms; empty on the login page.
	CSRF string
	// Flash is the outcome of the last change, FlashError whether it failed.
	Flash      string
	FlashError bool
	Now        time.Time
	// Path is this page's path and query, where forms come back to.
	Path string
	Data any
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, s *session, status int, name, title string, data any) {
	p := page{Title: title, Nav: name, Version: d.opts.Version, Now: d.opts.Clock.Now().UTC(), Path: r.URL.RequestURI(), Data: data}
	if s != nil {
		p.CSRF = d.csrfOf(s)
	}
	if f, isErr, ok := takeFlash(w, r); ok {
		p.Flash, p.FlashError = f, isErr
	}
	var buf strings.Builder
	if err := d.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		d.opts.Logger.Error("render a dashboard page", "page", name, "err", err)
		http.Error(w, "the page could not be drawn: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

// fail draws the error page with err's words and status (by its category
// when status is 0).
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, s *session, status int, err error) {
	if status == 0 {
		status = ops.Classify(err).Status
		if status < 400 || status > 599 {
			status = http.StatusInternalServerError
		}
	}
	title := http.StatusText(status)
	if title == "" {
		title = "Error"
	}
	d.render(w, r, s, status, "error", title, err.Error())
}

// reads wraps a page: with a session (or the bearer token), else to the
// login form.
func (d *Dashboard) reads(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := d.authenticate(r)
		if !ok {
			if r.URL.Path == "/events" {
				http.Error(w, "log in first", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r, s)
	}
}

// changes wraps a state change: a session, its CSRF token, and a
// same-origin request; anything else is refused with 403 and changes
// nothing.
func (d *Dashboard) changes(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := d.authenticate(r)
		if !ok || s.bearer {
			d.render(w, r, nil, http.StatusForbidden, "error", "Forbidden", "log in first: a change needs a session")
			return
		}
		if err := d.xorig.Check(r); err != nil {
			d.render(w, r, s, http.StatusForbidden, "error", "Forbidden", "refused: "+err.Error())
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			d.render(w, r, s, http.StatusBadRequest, "error", "Bad request", "the form could not be read: "+err.Error())
			return
		}
		if !d.csrfOK(s, r.PostForm.Get("csrf")) {
			d.render(w, r, s, http.StatusForbidden, "error", "Forbidden",
				"refused: the form's CSRF token is missing or wrong (reload the page and try again)")
			return
		}
		h(w, r, s)
	}
}

// back is where a form returns to: its "back" field when it is a path of
// this site, else the overview.
func back(r *http.Request) string {
	if b := r.PostForm.Get("back"); localPath(b) {
		return b
	}
	return "/"
}

// localPath tells whether p is a path on this site (not "//host", not a
// scheme): the only places a redirect may go.
func localPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "/\\") &&
		!strings.ContainsAny(p, "\r\n")
}

// done redirects back with the outcome of a change.
func done(w http.ResponseWriter, r *http.Request, msg string, err error) {
	if err != nil {
		setFlash(w, r, err.Error(), true)
	} else {
		setFlash(w, r, msg, false)
	}
	http.Redirect(w, r, back(r), http.StatusSeeOther)
}

var errNoRuntime = errors.New("which runtime? (the form names none)")
