package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/native"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// TestRemoteSourcesEndToEnd runs the commands against contract fakes of
// E2B and Daytona, configured as an operator would.
func TestRemoteSourcesEndToEnd(t *testing.T) {
	now := time.Now().UTC()
	fe := fakes.NewE2B(t, "e2b-key-123456", time.Now)
	fd := fakes.NewDaytona(t, "dtn-key-123456", time.Now)
	fe.Add(fakes.E2BSandbox{ID: "idle", State: "running", StartedAt: now.Add(-2 * time.Hour), EndAt: now.Add(time.Hour),
		Metadata: map[string]string{"pool": "agents"}})
	fe.Add(fakes.E2BSandbox{ID: "theirs", State: "running", StartedAt: now.Add(-2 * time.Hour), EndAt: now.Add(time.Hour),
		Metadata: map[string]string{"pool": "other"}})
	fd.Add(fakes.DaytonaSandbox{ID: "d1", State: "started", Labels: map[string]string{"pool": "agents"}, CreatedAt: now.Add(-time.Hour),
		LastActivity: now.Add(-5 * time.Minute), AutoStop: 15, AutoDelete: 0})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "reclaimer.toml")
	doc := fmt.Sprintf(`
[ledger]
path = %q
[archive]
dir = %q
[policy]
idle_suspend = "30m"
[[e2b]]
endpoint = %q
metadata = { pool = "agents" }
[[daytona]]
endpoint = %q
labels = { pool = "agents" }
rate = 50
`, filepath.Join(dir, "state", "ledger.db"), filepath.Join(dir, "archives"), fe.URL, fd.URL)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2B_API_KEY", "e2b-key-123456")
	t.Setenv("DAYTONA_API_KEY", "dtn-key-123456")

	var np native.Report
	runJSON(t, &np, "--config", cfg, "native", "plan")
	var found bool
	for _, r := range np.Rows {
		for _, s := range r.Settings {
			if r.Runtime == "d1" && s.Name == "idle_suspend" && s.Drift == "stricter" && s.Provider == "15m" {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("native plan did not report the stricter auto-stop: %+v", np.Rows)
	}
	t.Log("\n" + runOK(t, "--config", cfg, "native", "plan"))
	out := runOK(t, "--config", cfg, "native", "sync")
	t.Log("\n" + out)
	if !strings.Contains(out, "1 runtimes changed") && !strings.Contains(out, "2 runtimes changed") {
		t.Fatalf("native sync:\n%s", out)
	}
	if s, _ := fd.Get("d1"); s.AutoStop != 30 || s.AutoDelete != -1 {
		t.Fatalf("daytona after sync: %+v", s)
	}

	var p plan.Plan
	runJSON(t, &p, "--config", cfg, "plan")
	if len(p.Actions) != 1 || p.Actions[0].Runtime != "idle" || p.Actions[0].Backend != "e2b" {
		t.Fatalf("plan: %+v", p.Actions)
	}
	runOK(t, "--config", cfg, "apply")
	if s, _ := fe.Get("idle"); s.State != "paused" {
		t.Fatalf("idle is %s", s.State)
	}
	if s, _ := fe.Get("theirs"); s.State != "running" {
		t.Fatal("touched a sandbox outside the selector")
	}

	// A missing credential fails that source alone, and says which
	// variable, never a value.
	// The other source's plan goes on; the command exits 1, loudly.
	t.Setenv("DAYTONA_API_KEY", "")
	stdout, stderr, code := run(t, "--config", cfg, "plan")
	if code != 1 || !strings.Contains(stderr, "problem: [[daytona]]") || !strings.Contains(stderr, "$DAYTONA_API_KEY is not set") ||
		!strings.Contains(stdout, "seen: e2b") || strings.Contains(stdout+stderr, "e2b-key-123456") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = run(t, "--config", cfg, "native", "plan")
	if code != 1 || !strings.Contains(stderr, "problem: [[daytona]]") {
		t.Fatalf("native plan with a failing source: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
