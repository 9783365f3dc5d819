package catalog_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/catalog"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestPrune: old archives go from the sink and the ledger, journaled; a new
// one, and an old one of a pinned runtime, stay; an archive whose storage
// cannot be reached stays recorded with the reason; applying the same plan
// again is harmless.
func TestPrune(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := sink.NewLocal(filepath.Join(dir, "archives"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	record := func(id, runtime string, age time.Duration) ledger.Archive {
		src := filepath.Join(dir, "src-"+id)
		testtree.Write(t, filepath.Join(src, "f.txt"), "data of "+id)
		at := now.Add(-age)
		m, err := archive.ExportFolders(ctx, archive.Request{Sink: s, Base: archive.ObjectBase("dir", runtime, at), Runtime: runtime,
			Backend: "dir", CreatedAt: at}, []archive.Folder{{Name: "run", Path: src}})
		if err != nil {
			t.Fatal(err)
		}
		exp := m.BackendExport()
		a := ledger.Archive{ID: id, Key: ledger.Key{Source: "dirs[0]", Backend: "dir", ID: runtime}, CreatedAt: at, Location: exp.Location,
			Formats: exp.Formats, Bytes: exp.Bytes, Manifest: exp.Manifest}
		for _, o := range exp.Objects {
			a.Objects = append(a.Objects, ledger.ArchiveObject{Name: o.Name, Bytes: o.Bytes, SHA256: o.SHA256})
		}
		if err := st.RecordArchive(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	old := record("old", "r1", 100*24*time.Hour)
	record("new", "r2", time.Hour)
	record("pinned", "r3", 100*24*time.Hour)
	unreachable := record("unreachable", "r4", 100*24*time.Hour)
	if err := st.Observe(ctx, []ledger.Observation{{Key: ledger.Key{Source: "dirs[0]", Backend: "dir", ID: "r3"}, At: now}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, ledger.Key{Source: "dirs[0]", Backend: "dir", ID: "r3"}, func(r *ledger.RuntimeRecord) error { r.Pinned = true; return nil }); err != nil {
		t.Fatal(err)
	}

	p, err := catalog.PlanPrune(ctx, st, 30*24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 2 || len(p.Skipped) != 1 || p.Skipped[0].ArchiveID != "pinned" || p.Bytes() != old.Bytes+unreachable.Bytes {
		t.Fatalf("plan: %+v", p)
	}
	sinkFor := func(a ledger.Archive) (sink.Sink, error) {
		if a.ID == "unreachable" {
			return sink.Unavailable{Err: errors.New("no credentials")}, nil
		}
		return s, nil
	}
	res, err := catalog.ApplyPrune(ctx, st, sinkFor, p, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	if res.Results[0].Outcome != plan.Done || res.Results[1].Outcome != plan.Failed || !strings.Contains(res.Results[1].Reason, "no credentials") {
		t.Fatalf("results: %+v", res.Results)
	}
	left, _ := st.ListArchives(ctx, ledger.Key{})
	var ids []string
	for _, a := range left {
		ids = append(ids, a.ID)
	}
	if strings.Join(ids, ",") != "new,unreachable,pinned" {
		t.Fatalf("archives left: %v", ids)
	}
	if _, err := s.Open(ctx, old.Objects[0].Name); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("the pruned object: %v", err)
	}
	j, _ := st.ListJournal(ctx, ledger.JournalFilter{PlanID: p.ID})
	if len(j) != 2 || j[0].Intent.Step != catalog.StepPrune {
		t.Fatalf("journal: %+v", j)
	}
	again, _ := catalog.ApplyPrune(ctx, st, sinkFor, p, func() time.Time { return now })
	if again.Results[0].Outcome != plan.Skip {
		t.Fatalf("applying again: %+v", again.Results)
	}
}
