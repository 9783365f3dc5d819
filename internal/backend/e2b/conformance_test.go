package e2b_test

import (
	"context"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// TestConformance runs the suite against the contract fake: running
// sandboxes of the metadata selector; outside, one of another owner.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Capabilities: []string{"Lister", "Suspender", "Deleter", "NativeLifecycle"},
		Setup: func(t *testing.T) *backendtest.Provider {
			clock := fakes.NewClock(t0)
			f := fakes.NewE2B(t, key, clock.Now)
			b := &e2b.Backend{Client: fakes.Client(t, f.URL, remote.HeaderAuth("X-API-Key", remote.NewSecret(key))), Metadata: selector, Now: clock.Now}
			add := func(id string, meta map[string]string) string {
				f.Add(fakes.E2BSandbox{ID: id, State: "running", StartedAt: t0.Add(-time.Hour), EndAt: t0.Add(time.Hour), Metadata: meta})
				return id
			}
			return &backendtest.Provider{
				Backend: b,
				Make:    func(t *testing.T, name string) string { return add("sbx-"+name, selector) },
				MakeOutside: func(t *testing.T, name string) string {
					return add("sbx-"+name, map[string]string{"owner": "someone-else"})
				},
				Exists: func(t *testing.T, id string) bool {
					_, ok := f.Get(id)
					return ok
				},
				Vanish: func(t *testing.T, id string) { f.Remove(id) },
				Unsupported: []func(ctx context.Context, rt backend.Runtime) error{
					// A paused sandbox's timeout runs only while it runs.
					func(ctx context.Context, rt backend.Runtime) error {
						if err := b.Suspend(ctx, rt, backend.SuspendOptions{}); err != nil {
							return err
						}
						_, err := b.Lifecycle(ctx, rt, backend.LifecycleOptions{Set: &backend.Lifecycle{Deadline: t0.Add(2 * time.Hour)}})
						return err
					},
				},
			}
		},
	})
}
