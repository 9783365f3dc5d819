package ops_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/sources"
)

// countingStore counts the reads of one runtime's record.
type countingStore struct {
	ledger.Store
	reads atomic.Int64
}

func (c *countingStore) Runtime(ctx context.Context, k ledger.Key) (ledger.RuntimeRecord, error) {
	c.reads.Add(1)
	return c.Store.Runtime(ctx, k)
}

// TestActivityAfterLoadKeys: once the ledger's keys are loaded (a daemon
// does it when it starts), a report of a runtime the ledger lacks is taken
// without reading its record, and one of an archived runtime is still
// refused; before the load, a report of an unknown runtime reads it.
func TestActivityAfterLoadKeys(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	if err := os.MkdirAll(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "reclaimer.toml")
	if err := os.WriteFile(cfgPath, []byte("[ledger]\npath = \""+filepath.Join(dir, "ledger.db")+"\"\n\n[[dirs]]\nroot = \""+runs+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := sources.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	raw, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	source := "dirs:" + runs
	old := ledger.Key{Backend: "dir", Source: source, ID: "old"}
	if err := raw.Observe(ctx, []ledger.Observation{{Key: old, State: "archived", Path: filepath.Join(runs, "old"), SizeBytes: -1, At: time.Now().Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	st := &countingStore{Store: raw}
	app, err := ops.Open(ctx, ops.Options{Config: cfg, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	report := func(id string) error {
		return app.ReportActivity(ctx, ops.Ref{Backend: "dir", Name: id}, time.Time{})
	}

	if err := report("new-1"); err != nil {
		t.Fatalf("report of a runtime not seen yet: %v", err)
	}
	if n := st.reads.Load(); n != 1 {
		t.Fatalf("before the keys are loaded, a new runtime's report reads its record once; %d reads", n)
	}
	if err := app.LoadKeys(ctx); err != nil {
		t.Fatal(err)
	}
	st.reads.Store(0)
	for _, id := range []string{"new-2", "new-3", "new-2"} {
		if err := report(id); err != nil {
			t.Fatalf("report of %s: %v", id, err)
		}
	}
	if err := report("old"); !errors.Is(err, ops.ErrArchived) {
		t.Fatalf("report of an archived runtime after the load: %v, want ErrArchived", err)
	}
	if n := st.reads.Load(); n != 0 {
		t.Fatalf("after the load, reports read %d runtime records, want none", n)
	}
	for _, id := range []string{"new-1", "new-2", "new-3"} {
		if _, err := raw.LastActivity(ctx, ledger.Key{Backend: "dir", Source: source, ID: id}); err != nil {
			t.Errorf("activity of %s not written: %v", id, err)
		}
	}
}
