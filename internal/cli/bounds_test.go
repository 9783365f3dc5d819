package cli_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/remote/fakes"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// endlessE2B is an E2B fake whose listing never ends in the way given:
// "fresh" hands out a new next-page token every time with a page of
// sandboxes outside the selector, "empty" the same with empty pages,
// "stall" answers nothing until the request is given up.
func endlessE2B(t *testing.T, how string) *fakes.E2B {
	fe := fakes.NewE2B(t, "e2b-key-123456", time.Now)
	var n atomic.Int64
	fe.Intercept(func(op string, r *http.Request) *fakes.Answer {
		if op != "GET /v2/sandboxes" {
			return nil
		}
		if how == "stall" {
			<-r.Context().Done()
			return &fakes.Answer{Status: http.StatusGatewayTimeout}
		}
		i := n.Add(1)
		var items []string
		if how == "fresh" {
			for j := range 100 {
				items = append(items, fmt.Sprintf(`{"templateID":"base","sandboxID":"s%d-%d","clientID":"x","startedAt":"2026-01-01T00:00:00Z",`+
					`"endAt":"2026-01-02T00:00:00Z","cpuCount":2,"memoryMB":512,"diskSizeMB":1024,"state":"running","envdVersion":"0.2.0","metadata":{"pool":"other"}}`, i, j))
			}
		}
		return &fakes.Answer{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"},
			"X-Next-Token": {base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(i, 10)))}},
			Body: []byte("[" + strings.Join(items, ",") + "]")}
	})
	return fe
}

// TestStalledProviderDoesNotStallThePass: rules "a listing ends" and
// "every pass ends". A provider whose listing never ends (a fresh token
// every time, empty pages forever) or never answers is that source's
// problem, reported, while the local [[dirs]] source's caches are freed in
// the same pass; the daemon's plan and passes answer, not 423.
func TestStalledProviderDoesNotStallThePass(t *testing.T) {
	for _, how := range []string{"fresh", "empty", "stall"} {
		t.Run(how, func(t *testing.T) {
			fe := endlessE2B(t, how)
			listTimeout := "10s"
			if how == "stall" {
				listTimeout = "2s"
			}
			dir := t.TempDir()
			runs := filepath.Join(dir, "runs")
			write(t, filepath.Join(runs, "run1", "persistence", ".cache", "x"), strings.Repeat("c", 64<<10))
			cfg := config(t, dir, fmt.Sprintf(`
[server]
hold_wait = "30s"
[[dirs]]
root = %q
home = "persistence"
[[e2b]]
endpoint = %q
metadata = { pool = "agents" }
rate = 1000
list_timeout = %q
`, runs, fe.URL, listTimeout))
			t.Setenv("E2B_API_KEY", "e2b-key-123456")
			start := time.Now()
			var out, errOut string
			var code int
			// The fresh-token case moves about 60 MB of pages that are
			// out of scope: kept, they would be several times that.
			testtree.HeapCeiling(t, 128<<20, func() { out, errOut, code = run(t, "--config", cfg, "apply", "--json") })
			took := time.Since(start)
			if code != 1 || !strings.Contains(errOut, "[[e2b]]") || took > 25*time.Second {
				t.Fatalf("apply: exit %d after %s\n%s\n%s", code, took, out, errOut)
			}
			if !strings.Contains(out, `"runtime": "run1"`) || exists(filepath.Join(runs, "run1", "persistence", ".cache", "x")) {
				t.Fatalf("the local caches were not freed:\n%s", out)
			}
			// Bounded by its pages (a fresh token, empty pages) or by
			// list_timeout (a stall; or fresh tokens on a machine too
			// slow to reach the page bound first).
			if !strings.Contains(errOut+out, "does not end") && !strings.Contains(errOut+out, "list_timeout") ||
				how == "stall" && !strings.Contains(errOut+out, "list_timeout") {
				t.Fatalf("the problem does not say why the listing ended:\n%s\n%s", out, errOut)
			}

			// The daemon: its passes end, and plan and passes answer
			// (the fresh-token case is the empty one at a slower pace).
			if how == "fresh" {
				return
			}
			write(t, filepath.Join(runs, "run2", "persistence", ".cache", "x"), strings.Repeat("c", 64<<10))
			e := newEdges(t, cfg)
			var pl map[string]any
			if st := e.api("GET", "/v1/plan", "", &pl); st != http.StatusOK || !strings.Contains(fmt.Sprint(pl["problems"]), "e2b") {
				t.Fatalf("GET /v1/plan: %d %v", st, pl)
			}
			var pass map[string]any
			if st := e.api("POST", "/v1/passes", "{}", &pass); st != http.StatusOK {
				t.Fatalf("POST /v1/passes: %d %v", st, pass)
			}
			if exists(filepath.Join(runs, "run2", "persistence", ".cache", "x")) {
				t.Fatal("the daemon's passes did not free the local caches")
			}
		})
	}
}

// TestPassTimeout: rule "every pass ends". A provider that takes its time
// over each pause (within the client's own timeout) meets the pass's
// deadline: the action in flight finishes, the ones not reached are
// reported (pending, with the reason) with a pass_timeout problem, exit 1;
// the next pass takes them.
func TestPassTimeout(t *testing.T) {
	now := time.Now().UTC()
	fe := fakes.NewE2B(t, "e2b-key-123456", time.Now)
	for i := range 4 {
		fe.Add(fakes.E2BSandbox{ID: fmt.Sprintf("idle%d", i), State: "running", StartedAt: now.Add(-2 * time.Hour), EndAt: now.Add(time.Hour),
			Metadata: map[string]string{"pool": "agents"}})
	}
	fe.Intercept(func(op string, r *http.Request) *fakes.Answer {
		if op == "POST /sandboxes/{sandboxID}/pause" {
			time.Sleep(1500 * time.Millisecond) // a slow provider, not a stalled one
		}
		return nil
	})
	dir := t.TempDir()
	cfg := config(t, dir, fmt.Sprintf(`
[server]
pass_timeout = "1s"
[policy]
idle_suspend = "30m"
[[e2b]]
endpoint = %q
metadata = { pool = "agents" }
`, fe.URL))
	t.Setenv("E2B_API_KEY", "e2b-key-123456")
	start := time.Now()
	out, errOut, code := run(t, "--config", cfg, "apply", "--json")
	if took := time.Since(start); code != 1 || took > 10*time.Second {
		t.Fatalf("apply: exit %d after %s\n%s\n%s", code, took, out, errOut)
	}
	if !strings.Contains(out, "pass_timeout") || !strings.Contains(out, "not reached within pass_timeout 1s") || !strings.Contains(out, `"outcome": "done"`) {
		t.Fatalf("apply --json:\n%s\n%s", out, errOut)
	}
	paused := 0
	for i := range 4 {
		if s, _ := fe.Get(fmt.Sprintf("idle%d", i)); s.State == "paused" {
			paused++
		}
	}
	if paused == 0 || paused == 4 {
		t.Fatalf("%d of 4 paused; want the first done and the rest left", paused)
	}
}
