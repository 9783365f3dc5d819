package cli_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestRebuildableAndKeepConfigured: the rebuildable and keep lists decide
// which ignored folders an archive leaves out as dependencies. By default
// vendor-cache/ (holding a *.pem) is kept and data/ (a *.sqlite3, not in
// the keep list) is rebuildable; with rebuildable = ["defaults",
// "vendor-cache"] and keep = ["defaults", "*.sqlite3"] it is the other way
// round, and node_modules (still a default) is left out either way.
func TestRebuildableAndKeepConfigured(t *testing.T) {
	for _, configured := range []bool{false, true} {
		t.Run(fmt.Sprint("configured=", configured), func(t *testing.T) {
			dir := t.TempDir()
			runs := filepath.Join(dir, "runs")
			ws := newRepo(t, filepath.Join(runs, "r1", "workspace"))
			write(t, filepath.Join(ws, ".gitignore"), "node_modules/\nvendor-cache/\ndata/\n")
			git(t, ws, "add", ".gitignore")
			git(t, ws, "commit", "-q", "-m", "ignore")
			write(t, filepath.Join(ws, "node_modules", "dep.js"), "dep")
			write(t, filepath.Join(ws, "vendor-cache", "fixtures", "test.pem"), "not a real key")
			write(t, filepath.Join(ws, "data", "state.sqlite3"), "rows")
			lists := ""
			if configured {
				lists = "rebuildable = [\"defaults\", \"vendor-cache\"]\nkeep = [\"defaults\", \"*.sqlite3\"]\n"
			}
			cfg := config(t, dir, "[policy]\n"+lists+"[[dirs]]\nroot = \""+runs+"\"\nworkspaces = [\"workspace\"]\n")
			runOK(t, "--config", cfg, "delete", "r1")
			runOK(t, "--config", cfg, "restore", "r1")
			want := map[string]bool{"node_modules": false, "vendor-cache": !configured, "data": configured}
			for d, kept := range want {
				if got := exists(filepath.Join(ws, d)); got != kept {
					t.Errorf("%s archived: %v, want %v", d, got, kept)
				}
			}
			info := runOK(t, "--config", cfg, "archives", "r1")
			for d, kept := range want {
				if !kept && !strings.Contains(info, "workspace-0/"+d) && !strings.Contains(info, d) {
					t.Errorf("the archive does not list the dependency %s:\n%s", d, info)
				}
			}
		})
	}
}
