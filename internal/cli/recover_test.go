package cli_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
)

// TestInterruptedArchiveIsFinished: a crash after the archive was verified
// and the runtime marked archived, but before its folder was renamed into
// the trash, is finished by the next start; a crash before the mark removes
// nothing and is recorded as interrupted.
func TestInterruptedArchiveIsFinished(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	write(t, filepath.Join(runs, "marked", "out.txt"), "archived already")
	write(t, filepath.Join(runs, "unmarked", "out.txt"), "not archived yet")
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\n")
	runOK(t, "--config", cfg, "ls") // records both runtimes

	// What a crash leaves: intents with no outcome, one runtime marked.
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, id := range []string{"marked", "unmarked"} {
		if _, err := st.AppendIntent(ctx, ledger.Intent{PlanID: "p1", Key: ledger.Key{Backend: "dir", ID: id}, Step: "archive",
			Paths: []string{filepath.Join(runs, id)}, Reason: "test", At: now}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Update(ctx, ledger.Key{Backend: "dir", ID: "marked"}, func(r *ledger.RuntimeRecord) error {
		r.State = "archived"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	runOK(t, "--config", cfg, "ls") // any command recovers first
	if exists(filepath.Join(runs, "marked")) {
		t.Error("the marked runtime was not removed after the restart")
	}
	if !exists(filepath.Join(runs, "unmarked", "out.txt")) {
		t.Error("the unmarked runtime was removed")
	}
	log := runOK(t, "--config", cfg, "log")
	if !strings.Contains(log, "finished after a restart") || !strings.Contains(log, "nothing was removed") {
		t.Fatalf("journal:\n%s", log)
	}
	if strings.Contains(log, "unfinished") {
		t.Fatalf("unfinished entries left:\n%s", log)
	}
}
