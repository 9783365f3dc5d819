package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The cookies: the session, and the outcome of the last change (read once).
const (
	sessionCookie = "reclaimer_session"
	flashCookie   = "reclaimer_flash"
)

// session is who is asking: a login (its cookie's value), or a request
// with the bearer token (reading only: it has no CSRF token).
type session struct {
	value  string
	bearer bool
}

// mac is the HMAC-SHA256, keyed by the token's digest, of what.
func (d *Dashboard) mac(what string) []byte {
	key := d.opts.Token()
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(what))
	return m.Sum(nil)
}

// newSession is the value of a session issued at t: "v1.<unix>.<mac>".
func (d *Dashboard) newSession(t time.Time) string {
	issued := strconv.FormatInt(t.Unix(), 10)
	return "v1." + issued + "." + base64.RawURLEncoding.EncodeToString(d.mac("session|"+issued))
}

// validSession tells whether v is a session this token issued that has
// not expired.
func (d *Dashboard) validSession(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return false
	}
	unix, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(got, d.mac("session|"+parts[1])) {
		return false
	}
	age := d.opts.Clock.Now().Sub(time.Unix(unix, 0))
	return age >= -time.Minute && age < SessionTTL
}

// authenticate finds the session of r: its cookie, else the bearer token.
func (d *Dashboard) authenticate(r *http.Request) (*session, bool) {
	if c, err := r.Cookie(sessionCookie); err == nil && d.validSession(c.Value) {
		return &session{value: c.Value}, true
	}
	if d.tokenOK(bearer(r)) {
		return &session{bearer: true}, true
	}
	return nil, false
}

func bearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// tokenOK compares digests in constant time, as the API does.
func (d *Dashboard) tokenOK(tok string) bool {
	if tok == "" {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	want := d.opts.Token()
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// csrfOf is the CSRF token of a session: bound to it, so a token of one
// session (or of before a token change) is worth nothing in another.
func (d *Dashboard) csrfOf(s *session) string {
	if s.bearer {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(d.mac("csrf|" + s.value))
}

func (d *Dashboard) csrfOK(s *session, got string) bool {
	want := d.csrfOf(s)
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (d *Dashboard) loginForm(w http.ResponseWriter, r *http.Request) {
	if _, ok := d.authenticate(r); ok && r.URL.Query().Get("again") == "" {
		http.Redirect(w, r, nextOf(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	d.render(w, r, nil, http.StatusOK, "login", "Log in", loginData{Next: nextOf(r.URL.Query().Get("next"))})
}

type loginData struct {
	Next  string
	Error string
}

// login checks the token and starts a session.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if err := d.xorig.Check(r); err != nil {
		d.render(w, r, nil, http.StatusForbidden, "error", "Forbidden", "refused: "+err.Error())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		d.render(w, r, nil, http.StatusBadRequest, "login", "Log in", loginData{Error: "the form could not be read"})
		return
	}
	next := nextOf(r.PostForm.Get("next"))
	if !d.tokenOK(strings.TrimSpace(r.PostForm.Get("token"))) {
		d.opts.Logger.Warn("dashboard login refused: wrong token", "from", r.RemoteAddr)
		d.render(w, r, nil, http.StatusUnauthorized, "login", "Log in", loginData{Next: next, Error: "That is not the API token."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: d.newSession(d.opts.Clock.Now()), Path: "/",
		MaxAge: int(SessionTTL / time.Second), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	d.opts.Logger.Info("dashboard login", "from", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// nextOf is where a login goes on to: a page of this site, never
// elsewhere.
func nextOf(n string) string {
	if !localPath(n) || strings.HasPrefix(n, "/login") {
		return "/"
	}
	return n
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// setFlash keeps the outcome of a change for the page the browser is sent
// back to.
func setFlash(w http.ResponseWriter, r *http.Request, msg string, isErr bool) {
	kind := "ok:"
	if isErr {
		kind = "error:"
	}
	if len(msg) > 1500 {
		msg = msg[:1500] + "…"
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(kind + msg)), Path: "/",
		MaxAge: 120, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// takeFlash reads the outcome of the last change once.
func takeFlash(w http.ResponseWriter, r *http.Request) (msg string, isErr, ok bool) {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return "", false, false
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return "", false, false
	}
	s := string(raw)
	if m, found := strings.CutPrefix(s, "error:"); found {
		return m, true, true
	}
	if m, found := strings.CutPrefix(s, "ok:"); found {
		return m, false, true
	}
	return "", false, false
}
