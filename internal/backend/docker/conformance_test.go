package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	"github.com/reclaimer/reclaimer/internal/backend/docker"
)

// TestConformance runs the suite against a real Docker Engine: each
// runtime a running container of the scope with its home and workspace
// under the managed root; outside, a container of another scope with its
// folders elsewhere.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Capabilities: []string{"Lister", "Suspender", "Deleter", "FileReclaimer", "Exporter", "Locker", "Restorer", "Watcher"},
		Setup: func(t *testing.T) *backendtest.Provider {
			h := newHarness(t, "")
			args := []string{"/home/.cache/pip/x=" + "wheel", "sleep"}
			return &backendtest.Provider{
				Backend: h.backend,
				Make: func(t *testing.T, name string) string {
					home, ws := h.sandbox(h.name(name))
					h.container(h.name(name), h.scope, binds(home, ws), args...)
					return h.name(name)
				},
				MakeOutside: func(t *testing.T, name string) string {
					dir := t.TempDir()
					h.container(h.name(name), h.other, binds(mkdir(t, filepath.Join(dir, "home")), mkdir(t, filepath.Join(dir, "ws"))), args...)
					return h.name(name)
				},
				Exists: func(t *testing.T, id string) bool { return h.run.State(id) != "gone" },
				Vanish: func(t *testing.T, id string) {
					if h.run.State(id) == "running" {
						h.run.Stop(id)
					}
					if err := h.client.Remove(context.Background(), id); err != nil {
						t.Fatal(err)
					}
					if err := os.RemoveAll(filepath.Join(h.root, id)); err != nil {
						t.Fatal(err)
					}
				},
				Unsupported: []func(ctx context.Context, rt backend.Runtime) error{
					// An unowned folder has nothing to stop.
					func(ctx context.Context, rt backend.Runtime) error {
						folder := rt
						folder.ID = docker.UnownedPrefix + rt.ID
						return h.backend.Suspend(ctx, folder, backend.SuspendOptions{})
					},
				},
			}
		},
	})
}
