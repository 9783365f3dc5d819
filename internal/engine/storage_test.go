package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/diskusage"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// fixed is a backend that lists what it was given: two containers, one
// with a managed root and one without, both with a writable layer under a
// data root.
type fixed struct{ rts []backend.Runtime }

func (fixed) Name() string { return "fixed" }
func (f fixed) List(context.Context, backend.ListOptions) ([]backend.Runtime, error) {
	return f.rts, nil
}

// TestStorageIsAManagedFilesystem: the filesystem of a runtime's storage
// (Docker's data root) is measured and listed, and is the budget
// filesystem of a runtime with no managed root.
func TestStorageIsAManagedFilesystem(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rts := []backend.Runtime{
		{Key: backend.Key{Source: "fixed[0]", Backend: "fixed", ID: "mounts"}, State: backend.StateStopped, Root: "/srv/roots", Storage: "/var/lib/docker"},
		{Key: backend.Key{Source: "fixed[0]", Backend: "fixed", ID: "bare"}, State: backend.StateStopped, Storage: "/var/lib/docker"},
	}
	usage := func(path string) (diskusage.Usage, error) {
		fsid := map[string]int32{"/srv/roots": 1, "/var/lib/docker": 2}[path]
		return diskusage.Usage{FSID: [2]int32{fsid, 0}, UsedBytes: 90, AvailBytes: 10, Fraction: 0.9}, nil
	}
	eng, err := engine.New(engine.Options{Ledger: store, StateDir: filepath.Join(dir, "state"), Usage: usage,
		Sources: []engine.Source{{Name: "fixed[0]", Backend: fixed{rts}, Settings: policy.Settings{DiskHigh: 0.8, DiskLow: 0.7}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	w, err := eng.Observe(ctx, engine.ObserveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, fs := range w.Filesystems {
		paths[fs.ID] = fs.Path
	}
	if len(paths) != 2 {
		t.Fatalf("filesystems %+v, want the root's and the data root's", w.Filesystems)
	}
	if got := paths[w.Find(rts[0].Key).Filesystem]; got != "/srv/roots" {
		t.Errorf("a runtime with a root is on %q", got)
	}
	if got := paths[w.Find(rts[1].Key).Filesystem]; got != "/var/lib/docker" {
		t.Errorf("a runtime without a root is on %q, want its storage's filesystem", got)
	}
}
