package cli

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/views"
)

// TestResultTableKeepsOneLinePerRow: git's errors carry several lines; a
// result whose reason is one of them is still one row of the table.
func TestResultTableKeepsOneLinePerRow(t *testing.T) {
	res := &views.Applied{PlanID: "p", Results: []plan.Result{
		{Runtime: "a", Backend: "worktree", Step: "delete", Outcome: plan.Failed,
			Reason: "archive (nothing was removed): git bundle create: exit status 128\nfatal: bad object HEAD\n\nerror: refs/heads/x does not point to a valid object"},
		{Runtime: "b", Backend: "worktree", Step: "caches", Outcome: plan.Done, FreedBytes: 4096},
	}}
	var b strings.Builder
	printApplied(&b, res)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "fatal: bad object HEAD; error: refs/heads/x") || !strings.HasPrefix(lines[2], "b ") {
		t.Fatalf("table:\n%s", b.String())
	}
}

// TestLsFitsOneHundredTwentyColumns: the default table stays within 120
// columns whatever the IDs, reasons and schedules; -o wide shows them all.
func TestLsFitsOneHundredTwentyColumns(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	long := strings.Repeat("conversation-7f3a9c0d1e4b5a6c-", 4)
	list := []views.Runtime{
		{ID: long + ":repository-with-a-long-name", Backend: "worktree", State: "stopped", Busy: "pid 4242 (node) cwd /srv/x",
			LastActivity: now.Add(-72 * time.Hour), SizeBytes: 123 << 30, Unsaved: "uncommitted changes to 40 files; 3 commits on no remote",
			Protection: &views.Reason{Code: policy.Leased, Reason: "leased until 2026-05-09T10:00:00Z"}, ScheduledStep: "archive",
			ScheduledDue: now.Add(20 * time.Hour), Retention: "14d", Path: "/srv/agents/worktrees/" + long},
		{ID: "unowned:/srv/openhands/runtime-data/" + long, Backend: "docker", State: "unowned", SizeBytes: -1, Retention: "off"},
		{ID: "sb-1", Backend: "daytona", State: "suspended", SizeBytes: -1, Retention: "7d",
			Protection: &views.Reason{Code: policy.Pinned, Reason: "pinned: the demo of the new checkout flow tomorrow morning"}},
	}
	var b strings.Builder
	if err := printRuntimes(&b, list, false, now); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 120 {
			t.Errorf("%d columns: %s", n, line)
		}
	}
	if !strings.Contains(b.String(), "yes") || !strings.Contains(b.String(), "leased") || !strings.Contains(b.String(), "archive in 20h") {
		t.Errorf("the table drops what matters:\n%s", b.String())
	}
	b.Reset()
	if err := printRuntimes(&b, list, true, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{long + ":repository-with-a-long-name", "3 commits on no remote", "the demo of the new checkout flow", "/srv/agents/worktrees/"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("-o wide lacks %q:\n%s", want, b.String())
		}
	}
}
