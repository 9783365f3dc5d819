package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/rundir"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// meddling wraps the real dir backend: right after a successful export it
// writes into the runtime, as a user or agent would while a slow export
// runs. Everything else is the real backend (found through Unwrap).
type meddling struct{ *rundir.Backend }

func (m meddling) Unwrap() backend.Backend { return m.Backend }

func (m meddling) Export(ctx context.Context, rt backend.Runtime, opts backend.ExportOptions) (backend.Export, error) {
	exp, err := m.Backend.Export(ctx, rt, opts)
	if err == nil {
		err = os.WriteFile(filepath.Join(rt.Path, "late-work.txt"), []byte("written during the export"), 0o644)
	}
	return exp, err
}

// TestChangeDuringExportSkipsAndDropsTheExport: the re-check under the lock
// sees the change made while the export ran, skips the removal, and removes
// the export nothing refers to.
func TestChangeDuringExportSkipsAndDropsTheExport(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	if err := os.MkdirAll(filepath.Join(runs, "r1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runs, "r1", "out.txt"), []byte("results"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	for _, p := range []string{filepath.Join(runs, "r1", "out.txt"), filepath.Join(runs, "r1")} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	archives := filepath.Join(dir, "archives")
	eng, err := engine.New(engine.Options{Ledger: store, StateDir: filepath.Join(dir, "state"), ArchiveDir: archives,
		Sources: []engine.Source{{Name: "dirs[0]", Backend: meddling{&rundir.Backend{Root: runs}}, Settings: policy.Settings{Grace: time.Hour}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	k := backend.Key{Source: "dirs[0]", Backend: "dir", ID: "r1"}
	p, _, err := eng.Plan(ctx, engine.PlanOptions{Requests: []policy.Request{{Key: k, Step: backend.StepDelete}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 1 || p.Actions[0].Step != backend.StepDelete {
		t.Fatalf("plan: %+v", p.Actions)
	}
	res, err := eng.Apply(ctx, p, engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].Outcome != plan.Skip || !strings.Contains(res.Results[0].Reason, "changed since plan") {
		t.Fatalf("results: %+v", res.Results)
	}
	for _, f := range []string{"out.txt", "late-work.txt"} {
		if _, err := os.Stat(filepath.Join(runs, "r1", f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(archives, "dir", "r1", "*"))
	if len(left) != 0 {
		t.Fatalf("the unused export is still there: %v", left)
	}
	if got, _ := store.ListArchives(ctx, k); len(got) != 0 {
		t.Fatalf("an archive was recorded: %+v", got)
	}
}
