package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
	"github.com/reclaimer/reclaimer/internal/sources"
	"github.com/reclaimer/reclaimer/internal/views"
)

// TestModalAndOpenHandsCloudThroughTheCLI configures [[modal]] and
// [[openhands_cloud]] as an operator would, against their contract fakes:
// ls says Modal offers no idle suspend, native plan words each provider's
// own settings, and a Modal sandbox deleted (snapshotted first) is brought
// back by the command restore prints.
func TestModalAndOpenHandsCloudThroughTheCLI(t *testing.T) {
	now := time.Now().UTC()
	fm := fakes.NewModal(t, "ak-cli-0123456789", "as-cli-0123456789", time.Now)
	idle := uint32(600)
	fm.Add(fakes.ModalSandbox{ID: "sb-1", Tags: map[string]string{"pool": "agents"}, CreatedAt: now.Add(-2 * time.Hour),
		StartedAt: now.Add(-2 * time.Hour), TimeoutSecs: 3600, IdleTimeoutSecs: &idle})
	fo := fakes.NewOpenHands(t, map[string]string{"oh-cli-key-0123456789": "alice"}, time.Now)
	fo.AddSandbox(fakes.OpenHandsSandbox{ID: "oh-1", User: "alice", Status: "RUNNING", CreatedAt: now.Add(-time.Hour)})
	fo.AddConversation(fakes.OpenHandsConversation{ID: "c-1", User: "alice", SandboxID: "oh-1", CreatedAt: now.Add(-time.Hour),
		UpdatedAt: now.Add(-5 * time.Minute), Execution: "idle"})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "reclaimer.toml")
	doc := fmt.Sprintf(`
[ledger]
path = %q
[archive]
dir = %q
[policy]
idle_suspend = "30m"
[[modal]]
endpoint = %q
tags = { pool = "agents" }
[[openhands_cloud]]
endpoint = %q
`, filepath.Join(dir, "state", "ledger.db"), filepath.Join(dir, "archives"), fm.URL, fo.URL)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MODAL_TOKEN_ID", "ak-cli-0123456789")
	t.Setenv("MODAL_TOKEN_SECRET", "as-cli-0123456789")
	t.Setenv("OPENHANDS_API_KEY", "oh-cli-key-0123456789")

	out := runOK(t, "--config", cfg, "ls")
	if !strings.Contains(out, "note: idle suspend is not offered: modal cannot suspend its runtimes") {
		t.Fatalf("ls does not say idle suspend is not offered for modal:\n%s", out)
	}
	var list []views.Runtime
	runJSON(t, &list, "--config", cfg, "ls")
	got := map[string]string{}
	for _, r := range list {
		got[r.ID] = r.IdleSuspend
	}
	if !strings.HasPrefix(got["sb-1"], "not offered") || got["oh-1"] != "30m" {
		t.Fatalf("idle_suspend in ls --json: %v", got)
	}

	out = runOK(t, "--config", cfg, "native", "plan")
	for _, want := range []string{"server-wide only", "fixed when the sandbox is created", "cannot be changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("native plan does not say %q:\n%s", want, out)
		}
	}

	// A running Modal sandbox is removed only by a plan that says so (an
	// orphan's, a host's): one, applied on the configuration's engine,
	// snapshots the filesystem first. Then restore prints how to start a
	// sandbox from the image.
	if out, errOut, code := run(t, "--config", cfg, "delete", "sb-1"); code != 1 || !strings.Contains(errOut, "running") {
		t.Fatalf("delete of a running sandbox: exit %d\n%s%s", code, out, errOut)
	}
	removeThroughEngine(t, cfg, backend.Key{Source: list[0].Source, Backend: "modal", ID: "sb-1"})
	if s, _ := fm.Get("sb-1"); s.FinishedAt.IsZero() {
		t.Fatal("not terminated")
	}
	out = runOK(t, "--config", cfg, "restore", "sb-1")
	if !strings.Contains(out, "modal.Image.from_id(\"im-") || !strings.Contains(out, "not restored by reclaimer") {
		t.Fatalf("restore:\n%s", out)
	}
	var r views.Restored
	runJSON(t, &r, "--config", cfg, "restore", "sb-1")
	if r.Command == "" || r.Path != "" {
		t.Fatalf("restore --json: %+v", r)
	}
}

// removeThroughEngine applies a removal plan for k with the engine of the
// configuration at cfg (what an orphan sweep's plan does).
func removeThroughEngine(t *testing.T, cfg string, k backend.Key) {
	t.Helper()
	c, err := sources.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	app, err := ops.Open(context.Background(), ops.Options{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	p := fakes.RemovalPlan(t, app.Engine(), time.Now(), k)
	res, err := app.Engine().Apply(context.Background(), p, engine.ApplyOptions{})
	if err != nil || len(res.Results) != 1 || res.Results[0].Outcome != plan.Done {
		t.Fatalf("removal: %+v %v", res, err)
	}
}
