package openhandscloud_test

import (
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	"github.com/reclaimer/reclaimer/internal/backend/openhandscloud"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// TestConformance runs the suite against the contract fake: running
// sandboxes of the key's user (alice), each with an idle conversation;
// outside, bob's sandbox, which the key's search never answers and a
// narrowed listing by its ID must not return either.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Capabilities: []string{"Lister", "Suspender", "Deleter", "NativeLifecycle"},
		Setup: func(t *testing.T) *backendtest.Provider {
			clock := fakes.NewClock(t0)
			f := fakes.NewOpenHands(t, map[string]string{key: "alice", otherKey: "bob"}, clock.Now)
			b := &openhandscloud.Backend{Client: fakes.Client(t, f.URL, remote.HeaderAuth("X-Access-Token", remote.NewSecret(key))), UserID: "alice"}
			add := func(id, user string) string {
				f.AddSandbox(fakes.OpenHandsSandbox{ID: id, User: user, Status: "RUNNING", CreatedAt: t0.Add(-24 * time.Hour)})
				f.AddConversation(fakes.OpenHandsConversation{ID: "c-" + id, User: user, SandboxID: id,
					CreatedAt: t0.Add(-2 * time.Hour), UpdatedAt: t0.Add(-time.Hour), Execution: "idle"})
				return id
			}
			return &backendtest.Provider{
				Backend:     b,
				Make:        func(t *testing.T, name string) string { return add("sb-"+name, "alice") },
				MakeOutside: func(t *testing.T, name string) string { return add("sb-other-"+name, "bob") },
				Exists: func(t *testing.T, id string) bool {
					s, ok := f.Sandbox(id)
					return ok && s.Status != "MISSING" && f.Deleted(id) == ""
				},
				Vanish: func(t *testing.T, id string) { f.RemoveSandbox(id) },
			}
		},
	})
}
