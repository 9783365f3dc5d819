package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/worktree"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestAbandonedExportLeavesNoRef: an archive step killed mid-export leaves
// a refs/reclaimer/* ref in the user's repository; the next start, finding
// the interrupted intent and no recorded archive, removes it (and only it).
func TestAbandonedExportLeavesNoRef(t *testing.T) {
	dir := testtree.Real(t, t.TempDir())
	repo := filepath.Join(dir, "repo")
	testtree.NewRepo(t, repo)
	wt := filepath.Join(dir, "wts", "agent")
	testtree.Git(t, repo, "worktree", "add", "-q", "-b", "agent", wt)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	id := "repo:agent"
	stale := archive.SnapshotRefPrefix + "repo_agent/" + at.Format("20060102T150405Z")
	other := archive.SnapshotRefPrefix + "repo_agent/20250101T000000Z" // a recorded archive's: kept
	head := strings.TrimSpace(testtree.Git(t, repo, "rev-parse", "HEAD"))
	testtree.Git(t, repo, "update-ref", stale, head)
	testtree.Git(t, repo, "update-ref", stale+"-head", head)
	testtree.Git(t, repo, "update-ref", other, head)

	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.AppendIntent(ctx, ledger.Intent{PlanID: at.Format("20060102T150405Z") + "-00000001",
		Key: ledger.Key{Backend: worktree.Name, ID: id}, Step: string(backend.StepArchive), At: at}); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{Ledger: st, StateDir: filepath.Join(dir, "state"), ArchiveDir: filepath.Join(dir, "archives"),
		Sources: []engine.Source{{Name: "worktrees[0]", Backend: &worktree.Backend{Repo: repo, Git: gitcmd.Runner{Timeout: time.Minute}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if n, err := eng.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("recover: %d %v", n, err)
	}
	refs := testtree.Git(t, repo, "for-each-ref", "--format=%(refname)", archive.SnapshotRefPrefix)
	if strings.TrimSpace(refs) != other {
		t.Fatalf("refs after recovery:\n%s\nwant only %s", refs, other)
	}
}

// TestKilledExportLeavesNoTemporaryObjects: the temporary objects and the
// staging folder an export killed with SIGKILL left in the archive folder
// are swept at the next start; the archives themselves stay.
func TestKilledExportLeavesNoTemporaryObjects(t *testing.T) {
	dir := t.TempDir()
	archives := filepath.Join(dir, "archives")
	tmp := filepath.Join(archives, "dir", "run-1", ".20260102T030405Z.run.tar.zst.tmp-123456789")
	testtree.Write(t, tmp, "half written")
	testtree.Write(t, filepath.Join(archives, ".staging-42", "worktree.bundle"), "half")
	keep := filepath.Join(archives, "dir", "run-0", "20250101T000000Z.run.tar.zst")
	testtree.Write(t, keep, "a recorded archive")
	notOurs := filepath.Join(archives, "dir", "run-0", ".notes.tmp-draft")
	testtree.Write(t, notOurs, "not a temporary object of ours")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(engine.Options{Ledger: st, StateDir: filepath.Join(dir, "state"), ArchiveDir: archives})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{tmp, filepath.Join(archives, ".staging-42")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the start (%v)", p, err)
		}
	}
	for _, p := range []string{keep, notOurs} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}
