package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/dockerclient/dockertest"
)

// TestDockerSourceFromConfig drives a [[docker]] source through the CLI on
// the real Engine: ls lists the container and an unowned folder, apply
// empties the stopped container's caches, and delete archives its
// workspace and home first, then removes the container and its folders.
func TestDockerSourceFromConfig(t *testing.T) {
	c := dockertest.Client(t)
	run := dockertest.NewRun(t, c)
	dir := t.TempDir()
	root := filepath.Join(dir, "runtime-data")
	scope := fmt.Sprintf("cli-%d", os.Getpid())
	name := "reclaimer-cli-" + filepath.Base(dir)
	home, ws := filepath.Join(root, name, "home"), filepath.Join(root, name, "workspace")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	id := run.Create(dockertest.Spec{Name: name, Labels: map[string]string{"reclaimer.scope": scope},
		Binds: []string{home + ":/home", ws + ":/workspace"},
		Args:  []string{"/home/.cache/x=cache", "/home/.bash_history=ls", "/workspace/notes.md=mine"}, Start: true})
	run.Wait(id)
	write(t, filepath.Join(root, "leftover", "file"), "left behind")
	cfg := config(t, dir, fmt.Sprintf("[[docker]]\nlabels = { \"reclaimer.scope\" = %q }\nhome = \"/home\"\nworkspaces = [\"/workspace\"]\nroots = [%q]\n", scope, root))

	var rows []struct {
		ID      string `json:"id"`
		Backend string `json:"backend"`
		State   string `json:"state"`
	}
	runJSON(t, &rows, "--config", cfg, "ls")
	states := map[string]string{}
	for _, r := range rows {
		states[r.ID] = r.State
	}
	if states[name] != "stopped" || states["unowned:"+filepath.Join(root, "leftover")] != "unowned" || len(states) != 2 {
		t.Fatalf("ls: %v", states)
	}

	// A folder inside the container's workspace names the container.
	if out := runOK(t, "--config", cfg, "pin", filepath.Join(ws, "src", "deep"), "--reason", "x"); !strings.Contains(out, "docker/"+name) {
		t.Fatalf("pin by a folder of its workspace: %s", out)
	}
	runOK(t, "--config", cfg, "unpin", ws)

	var res applyJSON
	runJSON(t, &res, "--config", cfg, "apply")
	if len(res.Results) != 1 || res.Results[0].Runtime != name || res.Results[0].Step != "caches" || res.Results[0].Outcome != "done" {
		t.Fatalf("apply: %+v", res.Results)
	}
	if exists(filepath.Join(home, ".cache")) || !exists(filepath.Join(home, ".bash_history")) {
		t.Error("caches not emptied, or more than caches went")
	}

	runOK(t, "--config", cfg, "delete", name)
	if st := run.State(id); st != "gone" {
		t.Errorf("the container is %s after delete", st)
	}
	if exists(filepath.Join(root, name)) {
		t.Error("its folders are still there")
	}
	if !exists(filepath.Join(root, "leftover", "file")) {
		t.Error("delete of one container touched an unowned folder")
	}
	var archives []string
	_ = filepath.WalkDir(filepath.Join(dir, "archives"), func(p string, d os.DirEntry, err error) error {
		if err == nil && filepath.Ext(p) == ".zst" {
			archives = append(archives, p)
		}
		return nil
	})
	if len(archives) != 2 || !strings.HasSuffix(archives[0], ".home.tar.zst") || !strings.HasSuffix(archives[1], ".workspace-0.tar.zst") {
		t.Errorf("archives %v, want the home's and the workspace's", archives)
	}
}
