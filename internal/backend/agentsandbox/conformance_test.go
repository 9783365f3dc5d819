package agentsandbox_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reclaimer/reclaimer/internal/backend/agentsandbox"
	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	"github.com/reclaimer/reclaimer/internal/kubetest"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// TestConformance runs the suite on the real API server (no agent-sandbox
// controller runs: makeSandbox writes the Ready condition it would):
// running Sandboxes of the selector; outside, one without its label.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Capabilities: []string{"Lister", "Suspender", "Deleter", "Exporter", "NativeLifecycle", "Restorer"},
		Setup: func(t *testing.T) *backendtest.Provider {
			e := setup(t, policy.Settings{}, agentsandbox.Options{})
			sandboxes := e.dyn.Resource(kubetest.Sandboxes).Namespace(e.ns)
			return &backendtest.Provider{
				Backend: e.b,
				Make: func(t *testing.T, name string) string {
					e.makeSandbox(t, "sb-"+name, sbOpts{state: "running"})
					return "sb-" + name
				},
				MakeOutside: func(t *testing.T, name string) string {
					e.makeSandbox(t, "other-"+name, sbOpts{state: "running", labels: map[string]string{"owner": "someone-else"}})
					return "other-" + name
				},
				Exists: func(t *testing.T, id string) bool {
					u, err := sandboxes.Get(context.Background(), id, metav1.GetOptions{})
					if apierrors.IsNotFound(err) {
						return false
					}
					must(t, err)
					return u.GetDeletionTimestamp() == nil
				},
				Vanish: func(t *testing.T, id string) {
					must(t, sandboxes.Delete(context.Background(), id, metav1.DeleteOptions{}))
				},
			}
		},
	})
}
