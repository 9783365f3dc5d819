package openhands_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	"github.com/reclaimer/reclaimer/internal/backend/openhands"
	"github.com/reclaimer/reclaimer/internal/dockerclient/dockertest"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// TestConformance runs the suite against a fake agent-server layout and the
// real Docker Engine: each runtime a conversation (manifest, runtime
// folder, history) whose container runs with the owner label; outside, a
// conversation of another agent-server, with its own container.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Capabilities: []string{"Lister", "Suspender", "Deleter", "FileReclaimer", "Exporter", "Locker", "Restorer", "Watcher"},
		Setup: func(t *testing.T) *backendtest.Provider {
			c := dockertest.Client(t)
			run := dockertest.NewRun(t, c)
			a, other := newAgentServer(t), newAgentServer(t)
			b := openhands.New(openhands.Options{Layout: a.L, Client: c, Git: gitcmd.Runner{Timeout: time.Minute},
				CacheDirs: cacheDirs, StopTimeout: time.Second})
			containers := map[string]string{} // conversation id -> container
			start := func(s *agentServer, name string) string {
				id := s.Create("")
				s.Run(id, time.Now().Add(-time.Hour))
				containers[id] = run.Create(dockertest.Spec{Name: unique(t, name),
					Labels: map[string]string{openhands.OwnerLabel: s.L.Owner()}, Binds: conversationBinds(s.L, id),
					Args: []string{"sleep"}, Start: true})
				return id
			}
			layoutOf := func(id string) openhands.Layout {
				if _, err := os.Lstat(other.L.ManifestPath(id)); err == nil {
					return other.L
				}
				return a.L
			}
			return &backendtest.Provider{
				Backend:     b,
				Make:        func(t *testing.T, name string) string { return start(a, name) },
				MakeOutside: func(t *testing.T, name string) string { return start(other, name) },
				Exists: func(t *testing.T, id string) bool {
					_, err := os.Lstat(layoutOf(id).RunDir(id))
					return err == nil || run.State(containers[id]) != "gone"
				},
				Vanish: func(t *testing.T, id string) {
					if run.State(containers[id]) == "running" {
						run.Stop(containers[id])
					}
					if err := c.Remove(context.Background(), containers[id]); err != nil {
						t.Fatal(err)
					}
					for _, p := range []string{a.L.RunDir(id), a.L.ManifestPath(id)} {
						if err := os.RemoveAll(p); err != nil {
							t.Fatal(err)
						}
					}
				},
				Unsupported: []func(ctx context.Context, rt backend.Runtime) error{
					// The agent-server's trash has nothing to stop.
					func(ctx context.Context, rt backend.Runtime) error {
						trash := rt
						trash.ID = openhands.TrashID
						return b.Suspend(ctx, trash, backend.SuspendOptions{})
					},
					// A container runtime has no folder to restore.
					func(ctx context.Context, rt backend.Runtime) error {
						_, err := b.Restore(ctx, backend.Key{Backend: openhands.Name, ID: openhands.ContainerPrefix + "x"}, backend.RestoreOptions{})
						return err
					},
				},
			}
		},
	})
}
