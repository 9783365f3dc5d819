package cloudflare_test

import (
	"slices"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// TestConformance runs the suite against the contract fakes of the bridge
// and the Containers API. The bridge has no list: a runtime is a name a
// host registered, so Make registers an awake sandbox, MakeOutside makes
// one nobody registered for this source (an instance of the account all
// the same), and Vanish is the sandbox gone and its registration with it.
// Cloudflare cannot suspend without losing the files: no Suspender.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Capabilities: []string{"Lister", "Deleter", "Exporter", "Restorer"},
		Setup: func(t *testing.T) *backendtest.Provider {
			e := setup(t, policy.Settings{}, true)
			return &backendtest.Provider{
				Backend: e.b,
				Make: func(t *testing.T, name string) string {
					e.awake("sb-"+name, map[string]string{"main.go": "package main\n"})
					return "sb-" + name
				},
				MakeOutside: func(t *testing.T, name string) string {
					e.f.Add(fakes.CloudflareSandbox{Name: "other-" + name, Awake: true, StartedAt: t0.Add(-time.Hour), StateAt: t0.Add(-time.Hour)})
					return "other-" + name
				},
				Exists: func(t *testing.T, id string) bool {
					_, ok := e.f.Get(id)
					return ok && !e.f.Destroyed(id)
				},
				Vanish: func(t *testing.T, id string) {
					e.f.Remove(id)
					e.mu.Lock()
					e.names = slices.DeleteFunc(e.names, func(n string) bool { return n == id })
					e.mu.Unlock()
				},
			}
		},
	})
}
