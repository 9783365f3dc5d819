package cli_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/testtree"
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
	if _, err := st.Update(ctx, ledger.Key{Source: "dirs:" + runs, Backend: "dir", ID: "marked"}, func(r *ledger.RuntimeRecord) error {
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
	// The finished removal is a notice, as the interrupted apply's outcome
	// would have been (the webhooks hear of it through the outbox); the
	// interrupted one, which removed nothing, is not.
	st, err = sqlite.Open(ctx, filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	notices, err := st.ListNotices(ctx, ledger.NoticeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range notices {
		got = append(got, n.Key.ID+" "+n.Kind+" "+n.Step+" "+n.PlanID+": "+n.Message)
	}
	if len(got) != 1 || got[0] != "marked reclaimed archive p1: finished after a restart" {
		t.Fatalf("notices after the recovery: %q", got)
	}
}

// TestInterruptedExportIsRemoved: a crash after an archive's objects were
// stored but before it was recorded leaves objects nothing refers to; the
// next start removes them (and keeps the runtime), while an archive the
// ledger recorded is never removed.
func TestInterruptedExportIsRemoved(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	write(t, filepath.Join(runs, "r1", "out.txt"), "results")
	write(t, filepath.Join(runs, "r2", "out.txt"), "results")
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\n")
	runOK(t, "--config", cfg, "ls")

	// What the crash left: the objects of plan p's export of r1, no
	// record; and r2's export, recorded, but the runtime not yet marked.
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Second)
	planID := at.Format("20060102T150405Z") + "-0badc0de"
	s, err := sink.NewLocal(filepath.Join(dir, "archives"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := archive.ExportFolders(ctx, archive.Request{Sink: s, Base: archive.ObjectBase("dir", "r1", at), Runtime: "r1", Backend: "dir",
		CreatedAt: at}, []archive.Folder{{Name: "run", Path: filepath.Join(runs, "r1")}}); err != nil {
		t.Fatal(err)
	}
	m2, err := archive.ExportFolders(ctx, archive.Request{Sink: s, Base: archive.ObjectBase("dir", "r2", at), Runtime: "r2", Backend: "dir",
		CreatedAt: at}, []archive.Folder{{Name: "run", Path: filepath.Join(runs, "r2")}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r1", "r2"} {
		if _, err := st.AppendIntent(ctx, ledger.Intent{PlanID: planID, Key: ledger.Key{Backend: "dir", ID: id}, Step: "archive",
			Paths: []string{filepath.Join(runs, id)}, Reason: "test", At: at}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RecordArchive(ctx, ledger.Archive{ID: "a2", Key: ledger.Key{Backend: "dir", ID: "r2"}, CreatedAt: at,
		Location: m2.Location, Formats: m2.Formats, Bytes: m2.Bytes}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if n := testtree.CountEntries(t, filepath.Join(dir, "archives", "dir", "r1")); n != 2 {
		t.Fatalf("%d objects before the restart, want the tar and the manifest", n)
	}

	runOK(t, "--config", cfg, "ls") // recovers first
	if exists(filepath.Join(dir, "archives", "dir", "r1")) {
		t.Error("the interrupted export's objects are still there")
	}
	if !exists(filepath.Join(runs, "r1", "out.txt")) {
		t.Error("the runtime was removed")
	}
	if n := testtree.CountEntries(t, filepath.Join(dir, "archives", "dir", "r2")); n != 2 {
		t.Errorf("the recorded archive lost objects: %d left", n)
	}
}
