package dashboard

import (
	"crypto/sha256"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/clock"
)

func testDashboard(token *string, c clock.Clock) *Dashboard {
	return New(Options{Clock: c, Token: func() [sha256.Size]byte { return sha256.Sum256([]byte(*token)) }})
}

// TestSessions: a session is valid for SessionTTL, for the token that
// issued it only, and not once tampered with; its CSRF token is bound to
// it.
func TestSessions(t *testing.T) {
	tok := "the-first-token-0123456789"
	fake := clock.NewFake(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	d := testDashboard(&tok, fake)
	s := d.newSession(fake.Now())
	if strings.Contains(s, tok) || !d.validSession(s) {
		t.Fatalf("a new session %q: valid %v", s, d.validSession(s))
	}
	other := d.newSession(fake.Now().Add(-time.Hour))
	if d.csrfOf(&session{value: s}) == d.csrfOf(&session{value: other}) || !d.csrfOK(&session{value: s}, d.csrfOf(&session{value: s})) {
		t.Fatal("CSRF tokens are not bound to their sessions")
	}
	if d.csrfOK(&session{value: s}, "") || d.csrfOK(&session{bearer: true}, "") {
		t.Fatal("an empty CSRF token passed")
	}
	parts := strings.Split(s, ".")
	for _, bad := range []string{"", "v1", "v2." + parts[1] + "." + parts[2], "v1." + parts[1] + "1." + parts[2],
		"v1." + parts[1] + "." + parts[2][:len(parts[2])-1] + "A", "v1.x." + parts[2], s + ".x"} {
		if d.validSession(bad) {
			t.Errorf("session %q was taken", bad)
		}
	}
	fake.Advance(SessionTTL - time.Second)
	if !d.validSession(s) {
		t.Fatal("a session ended before SessionTTL")
	}
	fake.Advance(time.Second)
	if d.validSession(s) {
		t.Fatal("a session outlived SessionTTL")
	}
	// One issued in the future (a forged clock) is no session either.
	if d.validSession(d.newSession(fake.Now().Add(time.Hour))) {
		t.Fatal("a session from the future was taken")
	}
	s = d.newSession(fake.Now())
	tok = "a-new-token-9876543210"
	if d.validSession(s) {
		t.Fatal("a session outlived its token")
	}
}

// TestLoginCookie: the cookie is HttpOnly and SameSite=Strict, Secure over
// TLS only, and a wrong token sets none.
func TestLoginCookie(t *testing.T) {
	tok := "the-token-0123456789abcdef"
	d := testDashboard(&tok, clock.NewFake(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)))
	for _, tc := range []struct {
		name     string
		tls      bool
		token    string
		status   int
		cookie   bool
		secure   bool
		location string
		next     string
	}{
		{name: "plain", token: tok, status: 303, cookie: true, next: "/scheduled", location: "/scheduled"},
		{name: "tls", tls: true, token: tok, status: 303, cookie: true, secure: true, next: "https://evil.example/", location: "/"},
		{name: "wrong", token: tok + "x", status: 401},
		{name: "empty", token: "", status: 401},
	} {
		form := url.Values{"token": {tc.token}, "next": {tc.next}}
		r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tc.tls {
			r.TLS = &tls.ConnectionState{}
		}
		w := httptest.NewRecorder()
		d.ServeHTTP(w, r)
		cookies := w.Result().Cookies()
		if w.Code != tc.status || (len(cookies) > 0) != tc.cookie {
			t.Errorf("%s: %d, cookies %v", tc.name, w.Code, cookies)
			continue
		}
		if !tc.cookie {
			continue
		}
		c := cookies[0]
		if c.Name != sessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tc.secure ||
			!d.validSession(c.Value) || w.Header().Get("Location") != tc.location {
			t.Errorf("%s: cookie %+v, to %q", tc.name, c, w.Header().Get("Location"))
		}
	}
}

func TestNextStaysOnTheSite(t *testing.T) {
	for in, want := range map[string]string{"/runtimes?q=x": "/runtimes?q=x", "": "/", "//evil.example/x": "/",
		"/\\evil.example": "/", "https://evil.example/": "/", "javascript:alert(1)": "/", "/login?next=/": "/",
		"/a\r\nSet-Cookie: x=y": "/", "runtimes": "/"} {
		if got := nextOf(in); got != want {
			t.Errorf("nextOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFormats(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		got, want string
	}{
		{humanBytes(-1), "—"}, {humanBytes(0), "0 B"}, {humanBytes(1023), "1023 B"}, {humanBytes(1536), "1.5 KiB"},
		{humanBytes(3 << 30), "3.0 GiB"},
		{relative(now, now.Add(90*time.Minute)), "in 1h 30m"}, {relative(now, now.Add(-26*time.Hour)), "1d 2h ago"},
		{relative(now, now), "now"}, {relative(now, time.Time{}), "—"}, {relative(now, now.Add(45*time.Second)), "in 45s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	d := runtimesData{Query: "backend=dir", Sort: "size"}
	if l := sortLink(d, "size"); l != "/runtimes?backend=dir&desc=1&sort=size" || sortMark(d, "size") != "descending" {
		t.Errorf("sorted by size: link %q, mark %q", l, sortMark(d, "size"))
	}
	d.Desc = true
	if l := sortLink(d, "size"); l != "/runtimes?backend=dir&sort=size" || sortMark(d, "size") != "ascending" || sortMark(d, "due") != "none" {
		t.Errorf("sorted by size, reversed: link %q, mark %q", l, sortMark(d, "size"))
	}
}
