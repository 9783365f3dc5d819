package cli_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// hostileKey is the E2B key a hostile provider echoes back.
const hostileKey = "e2bKq7Zx91Lm0pWvRt"

// leaks names the first window of 8 characters of hostileKey found in s
// (a whole key, or one cut short by a message limit).
func leaks(s string) string {
	for i := 0; i+8 <= len(hostileKey); i++ {
		if w := hostileKey[i : i+8]; strings.Contains(s, w) {
			return w
		}
	}
	return ""
}

// TestProviderEchoingTheKeyLeaksNowhere: rule "no provider byte carries our
// credential onward". An E2B fake echoes the API key in every place a
// provider can put it: a response header, a label (metadata), a time field
// (which breaks the listing's decoding), and an error message long enough
// that a cut at 200 characters would straddle it. Nothing that reclaimer
// prints or keeps holds any 8 characters of it: plan --json, native plan
// --json, apply --json, log --json, the daemon's /v1/journal, and the
// failure notice POSTed to a webhook.
func TestProviderEchoingTheKeyLeaksNowhere(t *testing.T) {
	now := time.Now().UTC()
	fe := fakes.NewE2B(t, hostileKey, time.Now)
	fe.Add(fakes.E2BSandbox{ID: "idle", State: "running", StartedAt: now.Add(-2 * time.Hour), EndAt: now.Add(time.Hour),
		Metadata: map[string]string{"pool": "agents", "echo": hostileKey}})
	var hookMu sync.Mutex
	var hookBodies bytes.Buffer
	notified := make(chan struct{}, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hookMu.Lock()
		hookBodies.Write(b)
		hookBodies.WriteByte('\n')
		hookMu.Unlock()
		select {
		case notified <- struct{}{}:
		default:
		}
	}))
	defer hook.Close()
	dir := t.TempDir()
	cfg := config(t, dir, fmt.Sprintf(`
[policy]
idle_suspend = "30m"
[[e2b]]
endpoint = %q
metadata = { pool = "agents" }
[[notify]]
url = %q
events = ["failed"]
`, fe.URL, hook.URL))
	t.Setenv("E2B_API_KEY", hostileKey)
	check := func(what, out string) {
		t.Helper()
		if w := leaks(out); w != "" {
			t.Errorf("%s holds %q of the key:\n%s", what, w, out)
		}
	}

	// The listing: the key in a header and in endAt (a time field).
	fe.Bend(func(op string, a *fakes.Answer) bool {
		if op != "GET /v2/sandboxes" {
			return false
		}
		a.Header.Set("X-Request-Id", hostileKey)
		a.Body = bytes.Replace(a.Body, []byte(`"endAt":"`), []byte(`"endAt":"`+hostileKey+`","x":"`), 1)
		return true
	})
	out, errOut, code := run(t, "--config", cfg, "plan", "--json")
	if code != 1 || !strings.Contains(out+errOut, "[redacted]") {
		t.Fatalf("plan with an unreadable listing: exit %d\n%s\n%s", code, out, errOut)
	}
	check("plan --json", out+errOut)
	out, errOut, _ = run(t, "--config", cfg, "native", "plan", "--json")
	check("native plan --json", out+errOut)

	// The listing readable (the key only in a label and a header); pause
	// refused with a message of 190 characters, then the key.
	fe.Bend(func(op string, a *fakes.Answer) bool {
		if op == "GET /v2/sandboxes" {
			a.Header.Set("X-Request-Id", hostileKey)
			return true
		}
		return false
	})
	fe.Intercept(func(op string, _ *http.Request) *fakes.Answer {
		if op != "POST /sandboxes/{sandboxID}/pause" {
			return nil
		}
		return &fakes.Answer{Status: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}},
			Body: fmt.Appendf(nil, `{"code":400,"message":"%s%s rejected"}`, strings.Repeat("x", 190), hostileKey)}
	})
	out, errOut, _ = run(t, "--config", cfg, "native", "plan", "--json")
	check("native plan --json", out+errOut)
	out, errOut, _ = run(t, "--config", cfg, "plan", "--json")
	check("plan --json", out+errOut)
	out, errOut, _ = run(t, "--config", cfg, "apply", "--json")
	if !strings.Contains(out, "rejected") && !strings.Contains(out, "xxxxxxxx") {
		t.Fatalf("apply did not report the refused pause:\n%s\n%s", out, errOut)
	}
	check("apply --json", out+errOut)
	out, errOut, _ = run(t, "--config", cfg, "log", "--json")
	check("log --json", out+errOut)
	out, errOut, _ = run(t, "--config", cfg, "ls", "--json")
	check("ls --json", out+errOut)

	// The daemon: a pass asked for over the API fails the pause again
	// and notifies.
	e := newEdges(t, cfg)
	var pass any
	st := e.api("POST", "/v1/passes", "{}", &pass)
	check("POST /v1/passes", fmt.Sprint(pass))
	select {
	case <-notified:
	case <-time.After(30 * time.Second):
		t.Fatalf("no failure notice reached the hook (pass: %d %v)", st, pass)
	}
	hookMu.Lock()
	bodies := hookBodies.String()
	hookMu.Unlock()
	if !strings.Contains(bodies, `"failed"`) {
		t.Fatalf("the notice: %q", bodies)
	}
	check("the failure notice", bodies)
	var journal any
	if st := e.api("GET", "/v1/journal", "", &journal); st != http.StatusOK {
		t.Fatalf("/v1/journal: %d", st)
	}
	check("/v1/journal", fmt.Sprint(journal))
}
