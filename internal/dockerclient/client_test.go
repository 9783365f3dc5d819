package dockerclient_test

import (
	"context"
	"testing"

	"github.com/reclaimer/reclaimer/internal/dockerclient"
	"github.com/reclaimer/reclaimer/internal/dockerclient/dockertest"
)

// TestClient reads a container back as the backend sees it, counts every
// request, asks the data root once, and tells a missing container.
func TestClient(t *testing.T) {
	c := dockertest.Client(t)
	run := dockertest.NewRun(t, c)
	ctx := context.Background()
	bind := t.TempDir()
	name := "reclaimer-client-" + run.Label[len(run.Label)-8:]
	id := run.Create(dockertest.Spec{Name: name, Labels: map[string]string{"reclaimer.client": "yes"},
		Binds: []string{bind + ":/data"}, Args: []string{"/data/x=1"}, Start: true})
	run.Wait(id)

	before := c.Calls()
	got, err := c.List(ctx, map[string]string{dockertest.LabelKey: run.Label})
	if err != nil {
		t.Fatal(err)
	}
	if c.Calls() != before+1 {
		t.Errorf("a listing made %d requests, want 1", c.Calls()-before)
	}
	if len(got) != 1 || got[0].Name != name || got[0].State != "exited" || got[0].Labels["reclaimer.client"] != "yes" ||
		len(got[0].Mounts) != 1 || !got[0].Mounts[0].Bind() || got[0].Mounts[0].Source != bind || got[0].Mounts[0].Destination != "/data" {
		t.Fatalf("listed %+v", got)
	}
	if running, err := c.List(ctx, map[string]string{dockertest.LabelKey: run.Label}, "running"); err != nil || len(running) != 0 {
		t.Errorf("running containers of the run: %+v, %v", running, err)
	}

	d, err := c.Inspect(ctx, name, false)
	if err != nil {
		t.Fatal(err)
	}
	// No order between the two: for a process that exits at once the
	// Engine records its finish a millisecond before its start.
	if d.ID != id || d.StartedAt.IsZero() || d.FinishedAt.IsZero() || d.Created.IsZero() || d.SizeRw != -1 {
		t.Errorf("inspected %+v", d)
	}

	root, err := c.DataRoot(ctx)
	if err != nil || root == "" {
		t.Fatalf("data root %q, %v", root, err)
	}
	before = c.Calls()
	if again, _ := c.DataRoot(ctx); again != root || c.Calls() != before {
		t.Errorf("the data root was asked again (%d requests)", c.Calls()-before)
	}

	if _, err := c.Inspect(ctx, name+"-missing", false); !dockerclient.IsNotFound(err) {
		t.Errorf("inspect of a missing container: %v, want not found", err)
	}
	if err := c.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, id); !dockerclient.IsNotFound(err) {
		t.Errorf("second remove: %v, want not found", err)
	}
}
