package httpbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	"github.com/reclaimer/reclaimer/internal/backend/httpbackend"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// TestConformance runs the suite against the protocol's contract fake:
// running runtimes with the selector's labels; outside, one without them.
// The server advertises all but touch, which a raw backend then refuses.
func TestConformance(t *testing.T) {
	ops := []string{"suspend", "delete", "archive", "lifecycle", "lifecycle_write"}
	backendtest.Run(t, backendtest.Harness{
		Capabilities: []string{"Lister", "Suspender", "Deleter", "NativeLifecycle"},
		Setup: func(t *testing.T) *backendtest.Provider {
			clock := fakes.NewClock(t0)
			f := fakes.NewHTTPServer(t, token, clock.Now, ops...)
			raw := &httpbackend.Backend{Client: fakes.Client(t, f.URL, remote.BearerAuth(remote.NewSecret(token))), Labels: selector}
			b, err := httpbackend.Open(context.Background(), raw)
			if err != nil {
				t.Fatal(err)
			}
			add := func(id string, labels map[string]string) string {
				f.Add(fakes.HTTPRuntime{ID: id, State: "running", LastActivity: t0.Add(-time.Minute), CreatedAt: t0.Add(-time.Hour), Labels: labels})
				return id
			}
			return &backendtest.Provider{
				Backend:     b,
				Make:        func(t *testing.T, name string) string { return add("rt-"+name, selector) },
				MakeOutside: func(t *testing.T, name string) string { return add("rt-"+name, map[string]string{"pool": "other"}) },
				Exists: func(t *testing.T, id string) bool {
					_, ok := f.Get(id)
					return ok
				},
				Vanish: func(t *testing.T, id string) { f.Remove(id) },
				Unsupported: []func(ctx context.Context, rt backend.Runtime) error{
					func(ctx context.Context, rt backend.Runtime) error {
						n, _ := backend.As[backend.NativeLifecycle](b)
						_, err := n.Lifecycle(ctx, rt, backend.LifecycleOptions{Touch: true})
						return err
					},
				},
			}
		},
	})
}
