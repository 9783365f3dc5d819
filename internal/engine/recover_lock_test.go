package engine

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
)

// TestRecoverLeavesAnotherApplyAlone: while any engine on the same state
// folder applies, Recover in another one leaves the journal's unfinished
// entries alone (they are in flight, not interrupted); once no apply
// runs, it closes them.
func TestRecoverLeavesAnotherApplyAlone(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.AppendIntent(ctx, ledger.Intent{Key: ledger.Key{Source: "dirs[0]", Backend: "dir", ID: "r1"}, Step: "caches", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	applying, err := New(Options{Ledger: st, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	recovering, err := New(Options{Ledger: st, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	unlock, _, err := applying.applyLock(false)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := recovering.Recover(ctx); err != nil || n != 0 {
		t.Fatalf("recover during an apply: %d %v", n, err)
	}
	if u, _ := st.Unfinished(ctx); len(u) != 1 {
		t.Fatalf("unfinished entries after a deferred recovery: %+v", u)
	}
	unlock()
	if n, err := recovering.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("recover after the apply: %d %v", n, err)
	}
	if u, _ := st.Unfinished(ctx); len(u) != 0 {
		t.Fatalf("unfinished entries left: %+v", u)
	}
}
