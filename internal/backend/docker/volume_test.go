package docker_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/moby/moby/client"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/docker"
	"github.com/reclaimer/reclaimer/internal/dockerclient/dockertest"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// TestEveryMountKindCounts: a folder under the managed root that a running
// container uses through a named volume of the local driver binding it
// (`-o type=none,o=bind,device=DIR`) is used, exactly like a bind mount: it
// is not listed as unowned, and a stopped container of the scope sharing
// it through a bind mount is busy while the other runs.
func TestEveryMountKindCounts(t *testing.T) {
	h := newHarness(t, "")
	h.use(policy.Settings{CacheDirs: cacheDirs})
	used := mkdir(t, filepath.Join(h.root, "used-through-a-volume"))
	ctx := context.Background()
	vol := h.name("vol")
	if _, err := h.client.API().VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol, Driver: "local",
		DriverOpts: map[string]string{"type": "none", "o": "bind", "device": used},
		Labels:     map[string]string{dockertest.LabelKey: h.run.Label}}); err != nil {
		t.Fatalf("create volume: %v", err)
	}
	other := h.name("other")
	args := []string{"/data/written=1", "sleep"}
	id := h.run.Create(dockertest.Spec{Name: other, Labels: map[string]string{scopeLabel: h.other}, Binds: []string{vol + ":/data"}, Args: args, Start: true})
	h.waitFile([]string{used + ":/data"}, args) // the volume shows the folder
	t.Cleanup(func() {
		_, _ = h.client.API().ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
		_, _ = h.client.API().VolumeRemove(ctx, vol, client.VolumeRemoveOptions{Force: true})
	})
	mine := h.name("mine")
	h.container(mine, h.scope, []string{used + ":/home"})

	rts, err := h.backend.List(ctx, backend.ListOptions{Light: true})
	var warn backend.Warnings
	if err != nil && !errors.As(err, &warn) { // no container mounts /workspace: said, not a failure
		t.Fatal(err)
	}
	for _, rt := range rts {
		if rt.ID == docker.UnownedPrefix+used {
			t.Errorf("%s is listed as unowned while a running container uses it through volume %s", used, vol)
		}
		if rt.ID == mine && rt.Busy == "" {
			t.Errorf("%s shares %s with a running container (through a volume) but is not busy", mine, used)
		}
	}
	p, _ := h.pass()
	for _, act := range p.Actions {
		t.Errorf("acted on %s (%s) while a running container uses its folder through a volume", act.Runtime, act.Step)
	}
}
