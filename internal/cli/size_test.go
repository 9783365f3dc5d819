package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestSizeOfAMountPoint: `size PATH` where PATH is itself a mount point
// measures it; only mounts nested inside it are skipped (and named). A
// plain folder, a file and a link (measured as the link) still work.
func TestSizeOfAMountPoint(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	testtree.MountTmpfs(t, mnt, "size=8m")
	write(t, filepath.Join(mnt, "data.bin"), strings.Repeat("d", 1<<20))
	inner := filepath.Join(mnt, "inner")
	testtree.MountTmpfs(t, inner, "size=4m")
	write(t, filepath.Join(inner, "hidden.bin"), strings.Repeat("h", 2<<20))
	write(t, filepath.Join(dir, "plain", "a.txt"), strings.Repeat("a", 4096))
	if err := os.Symlink(mnt, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}

	out := runOK(t, "size", "--json", mnt, filepath.Join(dir, "plain"), filepath.Join(dir, "plain", "a.txt"), filepath.Join(dir, "link"))
	var rows []struct {
		Path          string   `json:"path"`
		ApparentBytes int64    `json:"apparent_bytes"`
		Entries       int64    `json:"entries"`
		Skipped       []string `json:"skipped_mounts"`
		Error         string   `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 4 {
		t.Fatalf("size --json: %v\n%s", err, out)
	}
	m := rows[0]
	if m.ApparentBytes < 1<<20 || m.ApparentBytes >= 2<<20 || m.Error != "" {
		t.Fatalf("the mount point measured %+v, want its 1 MiB and not the nested mount's 2 MiB", m)
	}
	if len(m.Skipped) != 1 || m.Skipped[0] != inner {
		t.Fatalf("skipped %v, want only the nested mount %s", m.Skipped, inner)
	}
	if p := rows[1]; p.ApparentBytes < 4096 || len(p.Skipped) != 0 {
		t.Fatalf("a plain folder: %+v", p)
	}
	if f := rows[2]; f.ApparentBytes != 4096 || f.Entries != 1 {
		t.Fatalf("a file: %+v", f)
	}
	if l := rows[3]; l.Entries != 1 || l.ApparentBytes >= 1<<20 {
		t.Fatalf("a link is measured as the link, not followed: %+v", l)
	}
	if text := runOK(t, "size", mnt); !strings.Contains(text, "1 mount point not entered: "+inner) {
		t.Fatalf("size %s:\n%s", mnt, text)
	}
}
