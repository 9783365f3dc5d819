package engine_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/rundir"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// rotting is a real local sink whose stored files get a byte flipped right
// after they are written: what a faulty disk or server does between the
// upload and the read-back.
type rotting struct{ *sink.Local }

func (r rotting) Put(ctx context.Context, name string, src io.Reader) (int64, error) {
	n, err := r.Local.Put(ctx, name, src)
	if err != nil || n < 64 {
		return n, err
	}
	f, ferr := os.OpenFile(r.URL(name), os.O_RDWR, 0)
	if ferr != nil {
		return n, ferr
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, n/2)
	b[0] ^= 0xff
	_, ferr = f.WriteAt(b, n/2)
	return n, ferr
}

// TestCorruptArchiveLeavesRuntime: an object damaged after it was stored
// is caught by the read-back; the runtime stays as it was, nothing is
// recorded as archived, the failure is in the result, the journal and a
// failed notice, and the sink holds nothing.
func TestCorruptArchiveLeavesRuntime(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	testtree.Write(t, filepath.Join(runs, "r1", "out.txt"), strings.Repeat("results ", 4096))
	before := testtree.Fingerprint(t, filepath.Join(runs, "r1"))
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	archives := filepath.Join(dir, "archives")
	local, err := sink.NewLocal(archives)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{Ledger: store, StateDir: filepath.Join(dir, "state"), ArchiveDir: archives, Sink: rotting{local},
		Sources: []engine.Source{{Name: "dirs[0]", Backend: &rundir.Backend{Root: runs}, Settings: policy.Settings{Grace: time.Hour}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	k := backend.Key{Source: "dirs[0]", Backend: "dir", ID: "r1"}
	p, _, err := eng.Plan(ctx, engine.PlanOptions{Requests: []policy.Request{{Key: k, Step: backend.StepDelete}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Apply(ctx, p, engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].Outcome != plan.Failed || !strings.Contains(res.Results[0].Reason, "does not match what was written") {
		t.Fatalf("results: %+v", res.Results)
	}
	if got := testtree.Fingerprint(t, filepath.Join(runs, "r1")); got != before {
		t.Fatal("the runtime changed")
	}
	if got, _ := store.ListArchives(ctx, k); len(got) != 0 {
		t.Fatalf("an archive was recorded: %+v", got)
	}
	j, err := store.ListJournal(ctx, ledger.JournalFilter{Key: k})
	if err != nil || len(j) != 1 || j[0].Outcome == nil || j[0].Outcome.Result != ledger.ResultFailed {
		t.Fatalf("journal: %+v %v", j, err)
	}
	n, err := store.ListNotices(ctx, ledger.NoticeFilter{Key: k})
	if err != nil || len(n) != 1 || n[0].Kind != "failed" || n[0].Step != "delete" {
		t.Fatalf("notices: %+v %v", n, err)
	}
	if c := testtree.CountEntries(t, archives); c != 0 {
		t.Fatalf("%d entries left in the archive folder", c)
	}
}
