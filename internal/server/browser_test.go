package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/cli"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/views"
)

// chromiumPath finds Debian's chromium (or another Chromium build on
// PATH). Without one the browser tests skip, or fail with
// RECLAIMER_REQUIRE_BROWSER=1 (as in CI).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium on PATH (apt-get install chromium): the dashboard's browser tests need one"
	if os.Getenv("RECLAIMER_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// tab is one headless Chromium tab, and where its screenshots go.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
	shot string
	n    int
}

func newTab(t *testing.T, base string) *tab {
	t.Helper()
	exe := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelTimeout)
	// A person can look at what the test saw: in the test's folder, or
	// kept in RECLAIMER_SCREENSHOT_DIR when set.
	shot := os.Getenv("RECLAIMER_SCREENSHOT_DIR")
	if shot == "" {
		shot = t.TempDir()
	} else if err := os.MkdirAll(shot, 0o755); err != nil {
		t.Fatal(err)
	}
	tb := &tab{t: t, ctx: ctx, base: base, shot: shot}
	tb.do(chromedp.EmulateViewport(1280, 900))
	return tb
}

func (b *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

func run[T any](b *tab, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.t.Fatalf("browser: %v", err)
	}
	return v
}

// eval runs a JavaScript expression in the page and decodes its value.
func eval[T any](b *tab, js string) T {
	b.t.Helper()
	return run(b, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
}

// open navigates to path and waits for its heading.
func (b *tab) open(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS("h1")))
}

func (b *tab) path() string {
	b.t.Helper()
	return strings.TrimPrefix(run(b, chromedp.Location()), b.base)
}

// screenshot writes the whole page as a PNG and logs where.
func (b *tab) screenshot(name string) {
	b.t.Helper()
	buf := run(b, chromedp.FullScreenshot(100))
	b.n++
	p := filepath.Join(b.shot, fmt.Sprintf("%02d-%s.png", b.n, name))
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", p)
}

// fitsWidth tells that the page does not scroll sideways.
func (b *tab) fitsWidth() bool {
	return eval[bool](b, `document.documentElement.scrollWidth <= window.innerWidth + 1`)
}

// a11yProblems checks the page's accessible basics: one h1 and no
// heading level skipped, a label for every field and words on every
// button and link, and text contrast of at least 4.5:1 (WCAG AA) against
// the background it is drawn on.
const a11yProblems = `(() => {
  const out = [];
  const hs = Array.from(document.querySelectorAll('h1, h2, h3, h4, h5, h6'));
  if (hs.filter(h => h.tagName === 'H1').length !== 1) out.push('not exactly one h1');
  let level = 0;
  for (const h of hs) {
    const l = Number(h.tagName[1]);
    if (l > level + 1) out.push('heading ' + h.tagName + ' "' + h.textContent.trim() + '" skips a level');
    level = l;
  }
  for (const f of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
    if (f.labels.length === 0 && !f.getAttribute('aria-label')) out.push('field ' + (f.id || f.name) + ' has no label');
  }
  for (const b of document.querySelectorAll('button, a')) {
    if (!(b.getAttribute('aria-label') || b.textContent.trim())) out.push(b.tagName + ' without words');
  }
  const rgb = c => (c.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const bgOf = el => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  for (const el of document.querySelectorAll('body *')) {
    if (!el.offsetParent && el.tagName !== 'BODY') continue;
    const own = Array.from(el.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const fg = rgb(getComputedStyle(el).color).slice(0, 3);
    const a = lum(fg), b = lum(bgOf(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) out.push('contrast ' + ratio.toFixed(2) + ' of ' + el.tagName + ' "' + el.textContent.trim().slice(0, 30) + '"');
  }
  return out;
})()`

// accessible fails the test with the page's accessibility problems.
func (b *tab) accessible(page string) {
	b.t.Helper()
	if ps := eval[[]string](b, a11yProblems); len(ps) > 0 {
		b.t.Errorf("%s: %s", page, strings.Join(ps, "; "))
	}
}

// statusJSON is `reclaimer --server URL status --json`.
func statusJSON(t *testing.T, h *daemon) views.Status {
	t.Helper()
	var out, errs bytes.Buffer
	code := cli.Run(context.Background(), []string{"--server", h.url, "--token-file", h.d.TokenFile(), "status", "--json"},
		cli.Env{Stdout: &out, Stderr: &errs})
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, errs.String())
	}
	var st views.Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out.String())
	}
	return st
}

type shownFS struct {
	Path       string `json:"path"`
	Used       int64  `json:"used"`
	Avail      int64  `json:"avail"`
	ObservedAt string `json:"observed_at"`
}

// TestDashboardInBrowser drives the dashboard of a real daemon over real
// worktrees and run folders in headless Chromium: log in, the overview's
// usage equals status --json, a runtime's page from the table, pin on
// the scheduled page (the ledger changes, the row goes), a change without
// the CSRF token refused, live updates, 390 pixels wide, and without the
// cookie the login form.
func TestDashboardInBrowser(t *testing.T) {
	chromiumPath(t)
	h := dashboardSetup(t)
	b := newTab(t, h.url)

	// Log in: every page sends to the login form first.
	b.do(chromedp.Navigate(h.url+"/scheduled"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if p := b.path(); !strings.HasPrefix(p, "/login?next=") {
		t.Fatalf("without a session at %s", p)
	}
	b.screenshot("login")
	b.accessible("login")
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), "not the token"), chromedp.Click(chromedp.CSS("form.login button")),
		chromedp.WaitVisible(chromedp.CSS("#login-error")))
	// With the keyboard only: the field has the focus, Enter submits.
	if focused := eval[string](b, `document.activeElement.id`); focused != "token" {
		t.Errorf("the login form opens with the focus on %q", focused)
	}
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), h.token+"\r"), chromedp.WaitVisible(chromedp.CSS("#scheduled-table")))
	if p := b.path(); p != "/scheduled" {
		t.Fatalf("after logging in at %s, not where the login was asked for", p)
	}
	// The first Tab reaches the skip link, and it leads to the content.
	b.do(chromedp.KeyEvent("\t"))
	if first := eval[string](b, `document.activeElement.className`); first != "skip" {
		t.Errorf("the first Tab focuses %q, not the skip link", first)
	}
	if httpOnly := eval[bool](b, `document.cookie.indexOf('reclaimer_session') < 0`); !httpOnly {
		t.Fatal("the page's script can read the session cookie")
	}

	// The overview's usage is status --json's (the same observation: a
	// status answers from the dry run of the last seconds).
	var shown []shownFS
	var st views.Status
	for attempt := 0; ; attempt++ {
		st = statusJSON(t, h)
		b.open("/")
		shown = eval[[]shownFS](b, `Array.from(document.querySelectorAll('article.fs')).map(a => ({path: a.dataset.path,
			used: Number(a.querySelector('.used-bytes').dataset.bytes), avail: Number(a.querySelector('.avail-bytes').dataset.bytes),
			observed_at: document.getElementById('observed').dataset.observedAt}))`)
		if len(shown) > 0 && shown[0].ObservedAt == st.ObservedAt.UTC().Format(time.RFC3339) || attempt == 3 {
			break
		}
	}
	if len(shown) == 0 || len(shown) != len(st.Filesystems) {
		t.Fatalf("overview shows %d filesystems, status %d", len(shown), len(st.Filesystems))
	}
	for i, fs := range st.Filesystems {
		if shown[i].Path != fs.Path || shown[i].Used != fs.UsedBytes || shown[i].Avail != fs.AvailBytes ||
			shown[i].ObservedAt != st.ObservedAt.UTC().Format(time.RFC3339) {
			t.Errorf("filesystem %d: overview %+v, status --json %s used %d avail %d observed %s", i, shown[i], fs.Path,
				fs.UsedBytes, fs.AvailBytes, st.ObservedAt.Format(time.RFC3339))
		}
	}
	total := eval[string](b, `document.getElementById('reclaimable-total').dataset.bytes`)
	if total != fmt.Sprint(st.ReclaimableBytes) {
		t.Errorf("reclaimable now: overview %s, status --json %d", total, st.ReclaimableBytes)
	}
	b.screenshot("overview")
	b.accessible("overview")

	// Live: a pass ending updates the open page over EventSource.
	run(b, chromedp.Poll[bool](`document.body.dataset.events === 'open'`, chromedp.WithPollingTimeout(20*time.Second)))
	h.pass(openapi.PassRequest{Steps: []openapi.Step{openapi.StepCaches}})
	run(b, chromedp.Poll[bool](`!!document.body.dataset.updated`, chromedp.WithPollingTimeout(20*time.Second)))

	// The runtimes table links each runtime to its page.
	b.open("/runtimes")
	b.screenshot("runtimes")
	b.accessible("runtimes")
	b.do(chromedp.Click(chromedp.CSS(`tr[data-id="conv2:repo"] a.explain`)), chromedp.WaitVisible(chromedp.CSS("#decision")))
	if h1 := run(b, chromedp.Text(chromedp.CSS("h1"))); h1 != "worktree/conv2:repo" {
		t.Fatalf("the runtime's page is of %q", h1)
	}
	if got := run(b, chromedp.Text(chromedp.CSS("#scheduled"))); !strings.HasPrefix(got, "archive due in ") {
		t.Errorf("the runtime's page says it is announced: %q", got)
	}
	// Why: every policy's verdict, as explain says it (the same dry run).
	type shownVerdict struct{ Policy, Step, Outcome, Why string }
	verdicts := eval[[]shownVerdict](b, `Array.from(document.querySelectorAll('#verdicts tbody tr[class^="verdict-"]')).map(r => ({
		policy: r.querySelector('th').textContent, step: r.cells[1].textContent, outcome: r.cells[2].textContent, why: r.cells[3].textContent}))`)
	shownRT := h.runtime("conv2:repo")
	ex, err := h.d.App().Explain(context.Background(), ops.Ref{Name: shownRT.ID, Backend: shownRT.Backend, Source: shownRT.Source})
	if err != nil {
		t.Fatal(err)
	}
	var due []views.Verdict
	for _, v := range ex.Policies {
		if v.Outcome == policy.Due {
			due = append(due, v)
		}
	}
	var shownDue []shownVerdict
	for _, v := range verdicts {
		if v.Outcome == string(policy.Due) {
			shownDue = append(shownDue, v)
		}
	}
	if len(verdicts) != len(ex.Policies) || len(due) != 1 || len(shownDue) != 1 || shownDue[0].Policy != string(due[0].Policy) ||
		shownDue[0].Step != due[0].Step || !strings.HasPrefix(shownDue[0].Why, due[0].Reason+" ") || due[0].Reason == "" {
		t.Errorf("the runtime's verdicts: shown %+v, explain %+v", verdicts, ex.Policies)
	}
	b.screenshot("runtime")
	b.accessible("runtime")

	// Pin on the scheduled page: the ledger says pinned, nothing is
	// announced any more, and the row is gone.
	b.open("/scheduled")
	b.screenshot("scheduled")
	b.accessible("scheduled")
	conv1 := h.runtime("conv1:repo")
	key := backend.Key{Source: conv1.Source, Backend: conv1.Backend, ID: conv1.ID}
	b.do(chromedp.Click(chromedp.CSS(`tr[data-id="conv1:repo"] button.pin`)), chromedp.WaitVisible(chromedp.CSS(".flash")),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-id="conv1:repo"]`)))
	rec, err := h.d.App().Store().Runtime(context.Background(), key)
	if err != nil || !rec.Pinned || rec.ScheduledStep != "" {
		t.Fatalf("the ledger after pin: %+v, %v", rec, err)
	}
	if n := eval[int](b, `document.querySelectorAll('#scheduled-table tbody tr[data-id]').length`); n != 3 {
		t.Errorf("%d rows left on the scheduled page, want 3", n)
	}
	b.screenshot("scheduled-after-pin")

	// A change without the CSRF token is refused, by a form and by a
	// script, and changes nothing.
	b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('tr[data-id="conv2:repo"] form[action="/actions/pin"] input[name=csrf]').remove()`),
		chromedp.Click(chromedp.CSS(`tr[data-id="conv2:repo"] button.pin`)), chromedp.WaitVisible(chromedp.CSS("#error-message")))
	if msg := run(b, chromedp.Text(chromedp.CSS("#error-message"))); !strings.Contains(msg, "CSRF") {
		t.Errorf("the refusal says %q", msg)
	}
	b.screenshot("refused")
	b.accessible("refused")
	status := eval[int](b, `fetch('/actions/lease', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},
		body: new URLSearchParams({id: 'conv2:repo', backend: 'worktree', source: `+jsString(conv1.Source)+`})}).then(r => r.status)`)
	if status != 403 {
		t.Errorf("a lease posted by a script without the token: %d", status)
	}
	conv2 := h.runtime("conv2:repo")
	if conv2.Pinned || !conv2.LeaseUntil.IsZero() || conv2.ScheduledStep == "" {
		t.Fatalf("a refused change changed the runtime: %+v", conv2)
	}

	// Reclaim now asks first; accepted, the announced archive of run-b
	// happens at once, and the archives page has the command that brings
	// it back.
	dialogs := chromedp.Events(b.ctx, page.JavascriptDialogOpening)
	asked := make(chan string, 1)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			asked <- ev.Message
			_, _ = chromedp.Call(b.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			return
		}
	}()
	b.open("/scheduled")
	b.do(chromedp.Click(chromedp.CSS(`tr[data-id="run-b"] button.reclaim`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if q := <-asked; q != "archive dir/run-b now?" {
		t.Errorf("reclaim now asked %q", q)
	}
	if msg := run(b, chromedp.Text(chromedp.CSS(".flash"))); !strings.Contains(msg, "archive done") {
		t.Fatalf("reclaim now: %q", msg)
	}
	runB := h.runtime("run-b")
	if runB.State != "archived" || runB.ArchiveID == "" {
		t.Fatalf("run-b after reclaim now: %+v", runB)
	}
	b.open("/archives")
	if cmd := run(b, chromedp.Value(chromedp.CSS("#restore-"+runB.ArchiveID))); cmd != "reclaimer restore dir/run-b --archive "+runB.ArchiveID {
		t.Errorf("the restore command to copy: %q", cmd)
	}
	b.screenshot("archives")
	b.accessible("archives")
	b.open("/journal")
	if n := eval[int](b, `document.querySelectorAll('#journal-table tbody tr').length`); n == 0 {
		t.Error("the journal is empty")
	}
	b.screenshot("journal")
	b.accessible("journal")

	// 390 pixels wide: nothing scrolls sideways.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, p := range []string{"/", "/runtimes", "/scheduled", "/archives", "/journal"} {
		b.open(p)
		if !b.fitsWidth() {
			t.Errorf("%s is wider than 390 pixels", p)
		}
		b.screenshot("narrow" + strings.ReplaceAll(p, "/", "-"))
	}
	b.do(chromedp.EmulateViewport(1280, 900))

	// Without the cookie a reload shows the login form.
	if _, err := chromedp.Call(b.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#token")))
	if p := b.path(); !strings.HasPrefix(p, "/login") {
		t.Fatalf("without the cookie at %s", p)
	}
	b.screenshot("logged-out")
}

func jsString(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}
