package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPinAndLeaseCancelTheNotice: a pin or lease on a runtime with a
// notice in force cancels it at once (not at the next pass): the command
// says so, ls and status no longer show it, and the journal (log) has the
// cancellation; pinning again without a reason keeps the first reason.
func TestPinAndLeaseCancelTheNotice(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	for _, r := range []string{"a", "b", "c"} {
		write(t, filepath.Join(runs, r, "notes.txt"), "work of "+r)
		age(t, time.Now().Add(-10*24*time.Hour), filepath.Join(runs, r))
	}
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nretention = \"2d\"\ngrace = \"1h\"\n")
	runOK(t, "--config", cfg, "apply") // announces the three archives
	if ls := runOK(t, "--config", cfg, "ls"); strings.Count(ls, "archive in") != 3 {
		t.Fatalf("the notices are not shown:\n%s", ls)
	}

	out := runOK(t, "--config", cfg, "pin", "a", "--reason", "in review")
	if !strings.Contains(out, "pinned") || !strings.Contains(out, "the archive due ") || !strings.Contains(out, "is canceled") {
		t.Fatalf("pin does not say it canceled the notice: %q", out)
	}
	out = runOK(t, "--config", cfg, "lease", "b", "--for", "2h")
	if !strings.Contains(out, "leased until") || !strings.Contains(out, "is canceled") {
		t.Fatalf("lease does not say it canceled the notice: %q", out)
	}
	ls := runOK(t, "--config", cfg, "ls")
	for _, line := range strings.Split(ls, "\n") {
		if (strings.Contains(line, " a ") || strings.Contains(line, " b ")) && strings.Contains(line, "archive in") {
			t.Fatalf("ls still shows a canceled notice:\n%s", ls)
		}
	}
	if strings.Count(ls, "archive in") != 1 {
		t.Fatalf("c's notice should stay:\n%s", ls)
	}
	var st struct {
		Scheduled []struct {
			Runtime string `json:"runtime"`
		} `json:"scheduled"`
	}
	runJSON(t, &st, "--config", cfg, "status")
	if len(st.Scheduled) != 1 || st.Scheduled[0].Runtime != "c" {
		t.Fatalf("status lists %+v, want only c", st.Scheduled)
	}
	log := runOK(t, "--config", cfg, "log")
	for _, want := range []string{"canceled: pinned: in review", "canceled: leased until"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}

	// Pinning again without a reason keeps the reason, and cancels
	// nothing more.
	out = runOK(t, "--config", cfg, "pin", "a")
	if strings.Contains(out, "canceled") {
		t.Fatalf("a second pin canceled something: %q", out)
	}
	var list []struct {
		ID        string `json:"id"`
		PinReason string `json:"pin_reason"`
	}
	runJSON(t, &list, "--config", cfg, "ls")
	for _, r := range list {
		if r.ID == "a" && r.PinReason != "in review" {
			t.Fatalf("pin without --reason replaced the reason with %q", r.PinReason)
		}
	}
	// A new reason replaces it.
	runOK(t, "--config", cfg, "pin", "a", "--reason", "release branch")
	runJSON(t, &list, "--config", cfg, "ls")
	for _, r := range list {
		if r.ID == "a" && r.PinReason != "release branch" {
			t.Fatalf("pin --reason kept %q", r.PinReason)
		}
	}
}
