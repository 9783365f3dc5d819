package sources

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/config"
)

// TestConfiguredPathsResolvedOnceAndChecked: every configured path is
// resolved at load, links included, and a root that resolves to "/", a
// system folder, the folder holding another root, or a folder holding the
// state is refused, naming its key; a root reached through a harmless link
// loads as its resolved path.
func TestConfiguredPathsResolvedOnceAndChecked(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", filepath.Join(base, "home"))
	t.Setenv("XDG_STATE_HOME", "")
	link := func(name, target string) string {
		p := filepath.Join(base, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	runs := filepath.Join(base, "srv", "runs")
	state := filepath.Join(base, "srv", "state")
	for _, d := range []string{runs, state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	slash := link("slash", "/")
	etc := link("etc", "/etc")
	srv := link("srv-link", filepath.Join(base, "srv"))
	good := link("runs-link", runs)
	ledger := "[ledger]\npath = \"" + filepath.Join(state, "ledger.db") + "\"\n"
	for _, tc := range []struct {
		name, doc, wantKey, wantMsg string
	}{
		{"a link to /", "[[dirs]]\nroot = \"" + slash + "\"\n", "dirs[0].root", "system folder"},
		{"a link to /etc, below it", "[[dirs]]\nroot = \"" + etc + "/x\"\n", "", ""},
		{"a link to /etc", "[[worktrees]]\nroot = \"" + etc + "\"\n", "worktrees[0].root", "system folder"},
		{"a link to the folder holding another root",
			ledger + "[[dirs]]\nroot = \"" + runs + "\"\n[[dirs]]\nroot = \"" + srv + "\"\n", "dirs[1].root", "contains dirs[0]"},
		{"a link to the folder holding the state",
			ledger + "[[dirs]]\nroot = \"" + srv + "\"\n", "dirs[0].root", "ledger"},
		{"docker root through a link to /", "[[docker]]\nlabels = { a = \"b\" }\nroots = [\"" + slash + "/\"]\n", "docker[0].roots[0]", "system folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := loadDoc(t, tc.doc)
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got := c.Sources[0].Table.(*DirsTable).Root; got != "/etc/x" {
					t.Fatalf("root %q, want the resolved /etc/x", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantKey) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("got %v, want an error on %s mentioning %q", err, tc.wantKey, tc.wantMsg)
			}
		})
	}
	c := mustLoad(t, "[[dirs]]\nroot = \""+good+"\"\n")
	if got := c.Sources[0].Table.(*DirsTable).Root; got != runs {
		t.Fatalf("root %q, want the resolved %q", got, runs)
	}
	// Flags go through the same check.
	d := config.Default()
	if err := AdHoc(d, nil, []string{slash}); err != nil {
		t.Fatal(err)
	}
	if err := d.ResolvePaths(); err == nil {
		t.Fatal("a --dir through a link to / was accepted")
	}
}
