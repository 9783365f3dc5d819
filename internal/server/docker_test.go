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
	// stop come before the Engine has it, the next one is seen: stop, and
	// start and stop again, each time waiting for the narrowed pass the
	// event starts (no sleeping: the pass tells when it is done).
	for attempt := 0; exists(filepath.Join(home, ".cache")); attempt++ {
		if attempt == 6 {
			t.Fatalf("the caches of a stopped container are still there after %d stops:\n%s", attempt, h.logs.String())
		}
		if run.State(id) != "running" {
			run.Start(id)
		}
		run.Stop(id)
		timeout := time.NewTimer(10 * time.Second) // then the event was missed: try again
	wait:
		for {
			select {
			case p := <-h.passes:
				if p.Request.Trigger == "watch" {
					break wait
				}
			case <-timeout.C:
				break wait
			}
		}
		timeout.Stop()
	}
	if !exists(filepath.Join(home, ".bash_history")) {
		t.Fatal("more than caches went")
	}
}
