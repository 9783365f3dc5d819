package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/dockerclient/dockertest"
)

// TestRunFolderArchiveKeepsHomeNotCaches: the archive of a run folder
// keeps its home but never its cache_dirs (or core dumps); delete says so
// before the results, plan --json in not_kept; restore brings the home
// back without the caches. With [archive] include_home = false the home
// is left out, and that is said too.
func TestRunFolderArchiveKeepsHomeNotCaches(t *testing.T) {
	for _, includeHome := range []bool{true, false} {
		t.Run(fmt.Sprint("include_home=", includeHome), func(t *testing.T) {
			dir := t.TempDir()
			runs := filepath.Join(dir, "runs")
			r1 := filepath.Join(runs, "r1")
			write(t, filepath.Join(r1, "persistence", ".cache", "pip", "wheel.whl"), strings.Repeat("w", 64<<10))
			write(t, filepath.Join(r1, "persistence", ".npm", "_cacache", "x"), strings.Repeat("n", 32<<10))
			write(t, filepath.Join(r1, "persistence", ".bash_history"), "make test\n")
			write(t, filepath.Join(r1, "workspace", "notes.md"), "mine")
			extra := ""
			if !includeHome {
				extra = "include_home = false\n"
			}
			cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nhome = \"persistence\"\nworkspaces = [\"workspace\"]\n")
			if extra != "" {
				b, err := os.ReadFile(cfg)
				if err != nil {
					t.Fatal(err)
				}
				write(t, cfg, strings.Replace(string(b), "[archive]\n", "[archive]\n"+extra, 1))
			}
			out := runOK(t, "--config", cfg, "delete", "r1")
			wantSaid := "dir/r1: the archive will not keep the home's caches (.cache, .npm) and core dumps"
			if !includeHome {
				wantSaid = "dir/r1: the archive will not keep the home " + filepath.Join(r1, "persistence") + " ([archive] include_home = false)"
			}
			if i, j := strings.Index(out, wantSaid), strings.Index(out, "RUNTIME"); i < 0 || i > j {
				t.Fatalf("delete does not say first what is not kept (%q):\n%s", wantSaid, out)
			}
			runOK(t, "--config", cfg, "restore", "r1")
			if b, err := os.ReadFile(filepath.Join(r1, "workspace", "notes.md")); err != nil || string(b) != "mine" {
				t.Fatalf("workspace after restore: %q %v", b, err)
			}
			for _, c := range []string{".cache", ".npm"} {
				if exists(filepath.Join(r1, "persistence", c)) {
					t.Errorf("the cache %s was archived", c)
				}
			}
			if got := exists(filepath.Join(r1, "persistence", ".bash_history")); got != includeHome {
				t.Errorf("home kept: %v, want %v", got, includeHome)
			}
		})
	}
}

// TestDockerArchiveKeepsHome: the archive of a Docker runtime keeps its
// home (less cache_dirs) as well as its workspaces, and restore brings
// both back; the plan says what the archive will not keep.
func TestDockerArchiveKeepsHome(t *testing.T) {
	c := dockertest.Client(t)
	run := dockertest.NewRun(t, c)
	dir := t.TempDir()
	root := filepath.Join(dir, "runtime-data")
	scope := fmt.Sprintf("cli-home-%d", os.Getpid())
	name := "reclaimer-cli-home-" + filepath.Base(dir)
	home, ws := filepath.Join(root, name, "home"), filepath.Join(root, name, "workspace")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	id := run.Create(dockertest.Spec{Name: name, Labels: map[string]string{"reclaimer.scope": scope},
		Binds: []string{home + ":/home", ws + ":/workspace"},
		Args:  []string{"/home/.cache/x=cache", "/home/.npm/y=npm", "/home/.bash_history=ls", "/workspace/notes.md=mine"}, Start: true})
	run.Wait(id)
	cfg := config(t, dir, fmt.Sprintf("[[docker]]\nlabels = { \"reclaimer.scope\" = %q }\nhome = \"/home\"\nworkspaces = [\"/workspace\"]\nroots = [%q]\n", scope, root))

	out := runOK(t, "--config", cfg, "delete", name)
	for _, want := range []string{"the archive will not keep the container itself and its writable layer",
		"the archive will not keep the home's caches (.cache, .npm) and core dumps"} {
		if !strings.Contains(out, want) {
			t.Errorf("delete does not say %q:\n%s", want, out)
		}
	}
	if exists(filepath.Join(root, name)) {
		t.Fatal("its folders are still there")
	}
	runOK(t, "--config", cfg, "restore", name)
	for path, want := range map[string]string{filepath.Join(home, ".bash_history"): "ls", filepath.Join(ws, "notes.md"): "mine"} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s after restore: %q %v", path, b, err)
		}
	}
	for _, c := range []string{".cache", ".npm"} {
		if exists(filepath.Join(home, c)) {
			t.Errorf("the cache %s was archived", c)
		}
	}
}

// TestPlanSaysWhatIsNotKept: a plan that announces an archive says what
// the archive will not keep, before anything is archived (JSON not_kept
// and the text).
func TestPlanSaysWhatIsNotKept(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	write(t, filepath.Join(runs, "r1", "home", ".cache", "x"), "cache")
	write(t, filepath.Join(runs, "r1", "notes.md"), "mine")
	age(t, time.Now().Add(-10*24*time.Hour), filepath.Join(runs, "r1"))
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nhome = \"home\"\nretention = \"2d\"\ngrace = \"1h\"\n")
	var p struct {
		Scheduled []struct {
			Runtime string   `json:"runtime"`
			NotKept []string `json:"not_kept"`
		} `json:"scheduled"`
	}
	runJSON(t, &p, "--config", cfg, "plan")
	const want = "the home's caches (.cache, .npm) and core dumps: rebuildable, never archived"
	if len(p.Scheduled) != 1 || len(p.Scheduled[0].NotKept) != 1 || p.Scheduled[0].NotKept[0] != want {
		t.Fatalf("plan --json scheduled: %+v", p.Scheduled)
	}
	if out := runOK(t, "--config", cfg, "plan"); !strings.Contains(out, "  not kept: "+want) {
		t.Fatalf("plan:\n%s", out)
	}
}
