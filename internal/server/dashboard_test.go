package server_test

import (
	"bufio"
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// dashboardSetup is a daemon over real worktrees (conv1, conv2: inactive
// for 30 days with uncommitted work) and real run folders (run-a, run-b:
// inactive for 30 days), whose start pass announces an archive of each
// worktree and a delete of each run folder, due in a day.
func dashboardSetup(t *testing.T) *daemon {
	t.Helper()
	dir := t.TempDir()
	repo := testtree.NewRepo(t, filepath.Join(dir, "repo"))
	wts := filepath.Join(dir, "worktrees")
	for _, c := range []string{"conv1", "conv2"} {
		addWorktree(t, repo, wts, c)
	}
	runs := filepath.Join(dir, "runs")
	for _, r := range []string{"run-a", "run-b"} {
		p := filepath.Join(runs, r)
		testtree.Write(t, filepath.Join(p, "out", "log.txt"), strings.Repeat("run output\n", 1000))
		testtree.Age(t, time.Now().Add(-30*24*time.Hour), filepath.Join(p, "out", "log.txt"), filepath.Join(p, "out"), p)
	}
	cfg := writeConfig(t, dir, "", "[[worktrees]]\nroot = \""+wts+"\"\nretention = \"14d\"\ngrace = \"24h\"\n"+
		"[[dirs]]\nroot = \""+runs+"\"\nretention = \"7d\"\ngrace = \"24h\"\n")
	h := startDaemon(t, dir, cfg, server.Options{})
	h.waitFor("the start pass to announce the archives", scheduled(h, "conv1:repo"))
	// The schedule is written during the pass, its usage samples after:
	// the tests read both.
	h.waitPass("start")
	return h
}

// browser is a cookie-keeping HTTP client that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar := &cookieJar{m: map[string]*http.Cookie{}}
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// cookieJar keeps cookies by name, for one host.
type cookieJar struct{ m map[string]*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) {
	for _, c := range cs {
		if c.MaxAge < 0 {
			delete(j.m, c.Name)
		} else {
			j.m[c.Name] = c
		}
	}
}

func (j *cookieJar) Cookies(*url.URL) []*http.Cookie {
	var out []*http.Cookie
	for _, c := range j.m {
		out = append(out, &http.Cookie{Name: c.Name, Value: c.Value})
	}
	return out
}

func (b *browser) do(method, path string, form url.Values, header ...string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(data)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfIn(t *testing.T, page string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

func (b *browser) login(token string) {
	b.t.Helper()
	resp, _ := b.do("POST", "/login", url.Values{"token": {token}, "next": {"/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		b.t.Fatalf("login: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
}

// TestDashboardAuth: nothing but the login form, its assets and /healthz
// without a session; the session cookie is HttpOnly, SameSite=Strict and
// holds no token; the API takes the bearer header and not the cookie; a
// strict Content-Security-Policy on every page.
func TestDashboardAuth(t *testing.T) {
	dir := t.TempDir()
	h := startDaemon(t, dir, writeConfig(t, dir, "", ""), server.Options{})
	b := newBrowser(t, h.url)

	for _, path := range []string{"/", "/runtimes", "/scheduled", "/archives", "/journal", "/runtime?id=x", "/nothing"} {
		resp, _ := b.do("GET", path, nil)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
			t.Errorf("GET %s without a session: %s to %q", path, resp.Status, resp.Header.Get("Location"))
		}
	}
	if resp, _ := b.do("GET", "/events", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /events without a session: %s", resp.Status)
	}
	if resp, _ := b.do("POST", "/actions/pin", url.Values{"id": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST a change without a session: %s", resp.Status)
	}
	resp, page := b.do("GET", "/login", nil)
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.Contains(page, `type="password"`) || !strings.Contains(csp, "script-src 'self'") ||
		!strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("login form: %s, CSP %q", resp.Status, csp)
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, " style=") || strings.Contains(page, " onclick=") {
		t.Fatal("the page has inline script or style")
	}
	for _, asset := range []string{"/static/app.js", "/static/style.css"} {
		if resp, body := b.do("GET", asset, nil); resp.StatusCode != 200 || len(body) < 100 {
			t.Errorf("GET %s without a session: %s", asset, resp.Status)
		}
	}
	if resp, _ := b.do("POST", "/login", url.Values{"token": {"wrong-" + h.token}}); resp.StatusCode != http.StatusUnauthorized ||
		len(resp.Cookies()) != 0 {
		t.Fatalf("login with a wrong token: %s, cookies %v", resp.Status, resp.Cookies())
	}
	resp, _ = b.do("POST", "/login", url.Values{"token": {h.token}, "next": {"//evil.example/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %s to %q (a next off the site must not be followed)", resp.Status, resp.Header.Get("Location"))
	}
	var sess *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "reclaimer_session" {
			sess = c
		}
	}
	if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Secure || strings.Contains(sess.Value, h.token) {
		t.Fatalf("session cookie: %+v", sess)
	}
	for _, path := range []string{"/", "/runtimes", "/scheduled", "/archives", "/journal"} {
		if resp, page := b.do("GET", path, nil); resp.StatusCode != 200 || !strings.Contains(page, "<h1>") ||
			resp.Header.Get("Content-Security-Policy") != csp {
			t.Errorf("GET %s with a session: %s", path, resp.Status)
		}
	}
	if resp, page := b.do("GET", "/nothing", nil); resp.StatusCode != 404 || !strings.Contains(page, "no page /nothing") {
		t.Errorf("GET /nothing: %s", resp.Status)
	}
	// The cookie is no API credential; the bearer header still is.
	if resp, _ := b.do("GET", "/v1/status", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API with the session cookie only: %s", resp.Status)
	}
	if resp, _ := b.do("GET", "/v1/status", nil, "Authorization", "Bearer "+h.token); resp.StatusCode != 200 {
		t.Errorf("the API with the bearer header: %s", resp.Status)
	}
	// A bearer header reads pages, but changes nothing: a change needs a
	// session and its CSRF token.
	anon := newBrowser(t, h.url)
	if resp, _ := anon.do("GET", "/", nil, "Authorization", "Bearer "+h.token); resp.StatusCode != 200 {
		t.Errorf("a page with the bearer header: %s", resp.Status)
	}
	if resp, _ := anon.do("POST", "/actions/pin", url.Values{"id": {"x"}}, "Authorization", "Bearer "+h.token); resp.StatusCode != 403 {
		t.Errorf("a change with the bearer header: %s", resp.Status)
	}
	// Logging out ends the session in this browser.
	_, page = b.do("GET", "/", nil)
	if resp, _ := b.do("POST", "/logout", url.Values{"csrf": {csrfIn(t, page)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %s", resp.Status)
	}
	if resp, _ := b.do("GET", "/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after logout: %s", resp.Status)
	}
}

// TestDashboardChanges: pin, lease and reclaim now from the scheduled
// page change the ledger through the application layer; a change without
// the CSRF token, with another session's, or from another site changes
// nothing.
func TestDashboardChanges(t *testing.T) {
	h := dashboardSetup(t)
	b := newBrowser(t, h.url)
	b.login(h.token)
	_, page := b.do("GET", "/scheduled", nil)
	for _, id := range []string{"conv1:repo", "conv2:repo", "run-a", "run-b"} {
		if !strings.Contains(page, `data-id="`+id+`"`) {
			t.Fatalf("scheduled page lacks %s:\n%s", id, page)
		}
	}
	csrf := csrfIn(t, page)
	key := func(id, backendName string) url.Values {
		rt := h.runtime(id)
		return url.Values{"id": {rt.ID}, "backend": {rt.Backend}, "source": {rt.Source}, "back": {"/scheduled"}}
	}
	with := func(v url.Values, k, val string) url.Values {
		out := url.Values{}
		for kk, vv := range v {
			out[kk] = vv
		}
		out.Set(k, val)
		return out
	}

	// Refused: no token, a wrong one, another session's, cross-site.
	other := newBrowser(t, h.url)
	other.login(h.token)
	_, otherPage := other.do("GET", "/scheduled", nil)
	refused := []struct {
		name   string
		form   url.Values
		header []string
	}{
		{"no token", key("conv1:repo", "worktree"), nil},
		{"wrong token", with(key("conv1:repo", "worktree"), "csrf", csrf[:len(csrf)-2]+"xx"), nil},
		{"cross-site", with(key("conv1:repo", "worktree"), "csrf", csrf), []string{"Sec-Fetch-Site", "cross-site"}},
		{"another origin", with(key("conv1:repo", "worktree"), "csrf", csrf), []string{"Origin", "http://evil.example"}},
	}
	if otherCSRF := csrfIn(t, otherPage); otherCSRF != csrf {
		refused = append(refused, struct {
			name   string
			form   url.Values
			header []string
		}{"another session's token", with(key("conv1:repo", "worktree"), "csrf", otherCSRF), nil})
	}
	for _, tc := range refused {
		resp, body := b.do("POST", "/actions/pin", tc.form, tc.header...)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "refused") {
			t.Errorf("%s: %s", tc.name, resp.Status)
		}
	}
	if rt := h.runtime("conv1:repo"); rt.Pinned || rt.ScheduledStep == "" {
		t.Fatalf("a refused change changed the runtime: %+v", rt)
	}

	// Pin: the notice is canceled.
	resp, _ := b.do("POST", "/actions/pin", with(key("conv1:repo", "worktree"), "csrf", csrf))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/scheduled" {
		t.Fatalf("pin: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if rt := h.runtime("conv1:repo"); !rt.Pinned || rt.ScheduledStep != "" || rt.PinReason != "pinned from the dashboard" {
		t.Fatalf("after pin: %+v", rt)
	}
	_, page = b.do("GET", "/scheduled", nil)
	if strings.Contains(page, `data-id="conv1:repo"`) || !strings.Contains(page, "pinned: never touched until unpinned") {
		t.Fatalf("the scheduled page after pin:\n%s", page)
	}

	// Lease 1 day.
	before := time.Now()
	if resp, _ := b.do("POST", "/actions/lease", with(key("conv2:repo", "worktree"), "csrf", csrf)); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("lease: %s", resp.Status)
	}
	rt := h.runtime("conv2:repo")
	if rt.LeaseUntil.Before(before.Add(23*time.Hour)) || rt.LeaseUntil.After(time.Now().Add(24*time.Hour+time.Minute)) {
		t.Fatalf("after lease: %+v", rt)
	}

	// Reclaim now: the announced archive of run-a (its files are work to
	// keep) happens at once.
	runA := h.runtime("run-a")
	if runA.ScheduledStep != string(backend.StepArchive) {
		t.Fatalf("run-a is not announced for archiving: %+v", runA)
	}
	if resp, _ := b.do("POST", "/actions/reclaim", with(key("run-a", "dir"), "csrf", csrf)); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reclaim now: %s", resp.Status)
	}
	if rt := h.runtime("run-a"); rt.State != "archived" || rt.ArchiveID == "" || exists(runA.Path) {
		t.Fatalf("after reclaim now: %+v (path there: %v)", rt, exists(runA.Path))
	}
	_, page = b.do("GET", "/scheduled", nil)
	if !strings.Contains(page, "archive done") || strings.Contains(page, `data-id="run-a"`) {
		t.Fatalf("the outcome of reclaim now is not shown:\n%s", page)
	}
	// Nothing announced: reclaim now refuses, and says why.
	b.do("POST", "/actions/reclaim", with(key("conv1:repo", "worktree"), "csrf", csrf))
	_, page = b.do("GET", "/scheduled", nil)
	if !strings.Contains(page, "nothing is announced") || !strings.Contains(page, "flash-error") {
		t.Fatalf("reclaim now of a runtime with nothing announced:\n%s", page)
	}
	if rt := h.runtime("conv1:repo"); rt.State == "archived" {
		t.Fatal("a pinned runtime was archived")
	}
	// The archive is listed with the command that restores it.
	_, page = b.do("GET", "/archives", nil)
	if !strings.Contains(page, "reclaimer restore dir/run-a --archive "+h.runtime("run-a").ArchiveID) {
		t.Fatalf("archives page:\n%s", page)
	}
	// The runtimes table filters, searches and sorts; each row links to
	// the runtime's page, which says why it is kept.
	_, page = b.do("GET", "/runtimes?backend=worktree&sort=activity", nil)
	if !strings.Contains(page, `data-id="conv1:repo"`) || strings.Contains(page, `data-id="run-b"`) || !strings.Contains(page, "sorted by activity") {
		t.Fatalf("runtimes of the worktree backend:\n%s", page)
	}
	_, page = b.do("GET", "/runtimes?q=RUN-B", nil)
	if strings.Contains(page, `data-id="conv1:repo"`) || !strings.Contains(page, `data-id="run-b"`) {
		t.Fatalf("runtimes searched for run-b:\n%s", page)
	}
	if resp, page := b.do("GET", "/runtimes?sort=nonsense", nil); resp.StatusCode != 400 || !strings.Contains(page, "sort") {
		t.Fatalf("an unknown sort: %s", resp.Status)
	}
	c1 := h.runtime("conv1:repo")
	_, page = b.do("GET", "/runtime?"+url.Values{"id": {c1.ID}, "backend": {c1.Backend}, "source": {c1.Source}}.Encode(), nil)
	if !strings.Contains(page, `data-pinned="true"`) || !strings.Contains(page, "pinned from the dashboard") {
		t.Fatalf("runtime page of conv1:\n%s", page)
	}
	// The journal shows the archive, filtered by the runtime.
	_, page = b.do("GET", "/journal?runtime=run-a", nil)
	if !strings.Contains(page, ">dir/run-a<") || !strings.Contains(page, "outcome-done") {
		t.Fatalf("journal of run-a:\n%s", page)
	}
}

// TestDashboardEvents: the event stream tells a page that a pass ended.
func TestDashboardEvents(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	if err := os.MkdirAll(filepath.Join(runs, "r1"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n"), server.Options{})
	h.waitStartPass()
	b := newBrowser(t, h.url)
	b.login(h.token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/events", nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /events: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	lines := bufio.NewScanner(resp.Body)
	// The stream is open once its first comment arrives.
	for lines.Scan() && lines.Text() != ": connected" {
	}
	h.pass(openapi.PassRequest{})
	for lines.Scan() && lines.Text() != "event: pass" {
	}
	if lines.Err() != nil {
		t.Fatalf("no pass event: %v", lines.Err())
	}
	// A stop does not wait for open pages: the stream ends, the daemon
	// stops at once.
	start := time.Now()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the stop took %v with an event stream open", took)
	}
}

// TestDashboardProblems: a source that could not be read is at the top of
// the overview, in red.
func TestDashboardProblems(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-repo")
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[worktrees]]\nrepo = \""+missing+"\"\n"), server.Options{})
	h.waitStartPass()
	b := newBrowser(t, h.url)
	b.login(h.token)
	_, page := b.do("GET", "/", nil)
	i, j := strings.Index(page, `class="problems"`), strings.Index(page, `id="fs-h"`)
	if i < 0 || j < 0 || i > j || !strings.Contains(page[i:j], missing) {
		t.Fatalf("the overview does not put the unreadable source first:\n%s", page)
	}
}

// TestDashboardUsageChart: the overview draws each filesystem's usage
// samples (the start pass's, and one an hour before it) as a chart, with
// the forecast in words beside it.
func TestDashboardUsageChart(t *testing.T) {
	h := dashboardSetup(t)
	ctx := context.Background()
	st := h.d.App().Store()
	samples, err := st.ListUsage(ctx, ledger.UsageFilter{AnyHost: true})
	if err != nil || len(samples) == 0 {
		t.Fatalf("the start pass's usage samples: %v, %v", samples, err)
	}
	earlier := samples[0]
	earlier.At = earlier.At.Add(-time.Hour)
	earlier.UsedBytes -= 1 << 20
	earlier.AvailBytes += 1 << 20
	if err := st.RecordUsage(ctx, []ledger.UsageSample{earlier}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, h.url)
	b.login(h.token)
	_, page := b.do("GET", "/", nil)
	art := regexp.MustCompile(`(?s)<article class="fs" data-path="` + regexp.QuoteMeta(earlier.Path) + `">.*?</article>`).FindString(page)
	if art == "" {
		t.Fatalf("the overview has no article for %s:\n%s", earlier.Path, page)
	}
	line := regexp.MustCompile(`<svg class="chart"[^>]*>(?s:.*?)<polyline class="line" points="([^"]*)"`).FindStringSubmatch(art)
	if line == nil || len(strings.Fields(line[1])) != 2 {
		t.Fatalf("the chart of %s does not draw its two samples:\n%s", earlier.Path, art)
	}
	u, err := h.d.App().Usage(ctx, ops.UsageQuery{Path: earlier.Path})
	if err != nil || len(u.Filesystems) != 1 || u.Filesystems[0].Forecast == nil {
		t.Fatalf("usage of %s: %+v, %v", earlier.Path, u, err)
	}
	if text := u.Filesystems[0].Forecast.Text; !strings.Contains(art, `class="forecast-text"`) || !strings.Contains(art, html.EscapeString(text)) {
		t.Errorf("the overview does not say the forecast %q:\n%s", text, art)
	}
}
