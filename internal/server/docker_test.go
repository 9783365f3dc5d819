package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/dockerclient/dockertest"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestDockerStopFreesCachesAtOnce: on the real Engine, a container's home
// caches go as soon as it stops (its die/stop event starts a narrowed
// pass), not at the next pass an hour later; while it ran they stayed.
func TestDockerStopFreesCachesAtOnce(t *testing.T) {
	client := dockertest.Client(t)
	run := dockertest.NewRun(t, client)
	dir := t.TempDir()
	roots := filepath.Join(dir, "sandboxes")
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "reclaimer-e2e-" + hex.EncodeToString(rnd[:])
	home := filepath.Join(roots, name, "home")
	testtree.Write(t, filepath.Join(home, ".cache", "pip", "wheel"), strings.Repeat("w", 8192))
	testtree.Write(t, filepath.Join(home, ".bash_history"), "ls\n")
	id := run.Create(dockertest.Spec{Name: name, Binds: []string{home + ":/home/agent"}, Args: []string{"sleep"}, Start: true})

	cfg := writeConfig(t, dir, "", "[[docker]]\nlabels = { \""+dockertest.LabelKey+"\" = \""+run.Label+"\" }\n"+
		"home = \"/home/agent\"\nroots = [\""+roots+"\"]\n")
	h := startDaemon(t, dir, cfg, server.Options{})
	h.waitStartPass()
	if !exists(filepath.Join(home, ".cache")) {
		t.Fatal("the caches of a running container went")
	}
	// The event subscription is made when the daemon starts; should this
	// stop come before it, the next one is seen: stop, and start and stop
	// again until the caches go.
	deadline := time.Now().Add(60 * time.Second)
	for exists(filepath.Join(home, ".cache")) {
		if time.Now().After(deadline) {
			t.Fatalf("the caches of a stopped container are still there a minute later:\n%s", h.logs.String())
		}
		if run.State(id) == "running" {
			run.Stop(id)
		} else {
			run.Start(id)
			continue
		}
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && exists(filepath.Join(home, ".cache")); {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !exists(filepath.Join(home, ".bash_history")) {
		t.Fatal("more than caches went")
	}
}
