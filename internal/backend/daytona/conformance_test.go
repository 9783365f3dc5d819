package daytona_test

import (
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	"github.com/reclaimer/reclaimer/internal/backend/daytona"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// TestConformance runs the suite against the contract fake: started
// sandboxes with the selector's labels; outside, one without them.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Capabilities: []string{"Lister", "Suspender", "Deleter", "NativeLifecycle"},
		Setup: func(t *testing.T) *backendtest.Provider {
			clock := fakes.NewClock(t0)
			f := fakes.NewDaytona(t, key, clock.Now)
			b := &daytona.Backend{Client: fakes.Client(t, f.URL, remote.BearerAuth(remote.NewSecret(key))), Labels: selector}
			add := func(id string, labels map[string]string) string {
				f.Add(fakes.DaytonaSandbox{ID: id, State: "started", Labels: labels, CreatedAt: t0.Add(-time.Hour),
					LastActivity: t0.Add(-time.Minute), AutoDelete: -1})
				return id
			}
			return &backendtest.Provider{
				Backend:     b,
				Make:        func(t *testing.T, name string) string { return add("sbx-"+name, selector) },
				MakeOutside: func(t *testing.T, name string) string { return add("sbx-"+name, map[string]string{"team": "other"}) },
				Exists: func(t *testing.T, id string) bool {
					_, ok := f.Get(id)
					return ok
				},
				Vanish: func(t *testing.T, id string) { f.Remove(id) },
			}
		},
	})
}
