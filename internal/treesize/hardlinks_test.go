package treesize_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/treesize"
)

// TestFileCountsOnlyWhenAllItsLinksAreInside: a node_modules whose files
// are hard links into a store outside it (pnpm) measures as its folders
// only, with the files in SharedBytes; measured together with the store,
// every file counts once.
func TestFileCountsOnlyWhenAllItsLinksAreInside(t *testing.T) {
	base := t.TempDir()
	store := filepath.Join(base, "store")
	nm := filepath.Join(base, "project", "node_modules")
	for i, name := range []string{"a.js", "b.js", "c.js"} {
		writeFile(t, filepath.Join(store, name), 64<<10, byte(i))
		must(t, os.MkdirAll(filepath.Join(nm, "pkg"+name), 0o755))
		must(t, os.Link(filepath.Join(store, name), filepath.Join(nm, "pkg"+name, "index.js")))
	}
	res, err := treesize.Measure(context.Background(), base, "project/node_modules", treesize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SharedBytes < 3*64<<10 || res.AllocBytes >= 64<<10 || res.Entries != 7 {
		t.Fatalf("node_modules of store links: %+v; want the folders only, the files shared", res.Size)
	}
	all, err := treesize.Measure(context.Background(), base, "", treesize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if all.SharedBytes != 0 || all.AllocBytes < 3*64<<10 || all.AllocBytes >= 4*64<<10+64<<10 {
		t.Fatalf("store and project together: %+v; want each file once, nothing shared", all.Size)
	}
}
