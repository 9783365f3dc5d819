package modal_test

import (
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	"github.com/reclaimer/reclaimer/internal/backend/modal"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// TestConformance runs the suite against the gRPC contract fake: started
// sandboxes of the tag selector; outside, one of another owner's tags.
// Modal cannot pause: no Suspender, so the suspend subtests skip.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Capabilities: []string{"Lister", "Deleter", "Exporter", "NativeLifecycle", "Restorer"},
		Setup: func(t *testing.T) *backendtest.Provider {
			clock := fakes.NewClock(t0)
			f := fakes.NewModal(t, tokenID, secret, clock.Now)
			b := &modal.Backend{Client: client(t, f, clock, tokenID, secret), Tags: selector}
			add := func(id string, tags map[string]string) string {
				f.Add(fakes.ModalSandbox{ID: id, Tags: tags, CreatedAt: t0.Add(-time.Hour), StartedAt: t0.Add(-time.Hour + time.Second),
					TimeoutSecs: 3600, IdleTimeoutSecs: ptr(600)})
				return id
			}
			return &backendtest.Provider{
				Backend: b,
				Make:    func(t *testing.T, name string) string { return add("sb-"+name, selector) },
				MakeOutside: func(t *testing.T, name string) string {
					return add("sb-other-"+name, map[string]string{"owner": "someone-else"})
				},
				Exists: func(t *testing.T, id string) bool {
					s, ok := f.Get(id)
					return ok && s.FinishedAt.IsZero()
				},
				Vanish: func(t *testing.T, id string) { f.Remove(id) },
			}
		},
	})
}
