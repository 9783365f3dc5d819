package kubernetes_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	kbackend "github.com/reclaimer/reclaimer/internal/backend/kubernetes"
	"github.com/reclaimer/reclaimer/internal/kubetest"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// TestConformance runs the suite on the real API server, with the rights
// of deploy/kubernetes/role.yaml: runtimes laid out as the runtime-api lays
// them out, their pod marked running (no kubelet runs: the test writes the
// pod's status); outside, the same layout without the selector's label.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Capabilities: []string{"Lister", "Suspender", "Deleter", "Exporter", "Restorer"},
		Setup: func(t *testing.T) *backendtest.Provider {
			e := setup(t, policy.Settings{}, nil, kbackend.Options{Archive: kbackend.ArchiveSnapshot})
			return &backendtest.Provider{
				Backend: e.b,
				Make: func(t *testing.T, name string) string {
					e.makeRuntime(t, name, rtOpts{replicas: 1, running: true})
					return name
				},
				MakeOutside: func(t *testing.T, name string) string {
					e.makeRuntime(t, name, rtOpts{replicas: 1, running: true, labels: map[string]string{"app": "someone-else"}})
					return name
				},
				Exists: func(t *testing.T, id string) bool { return e.live(t, id) > 0 },
				Vanish: func(t *testing.T, id string) {
					ctx := context.Background()
					lo := metav1.ListOptions{LabelSelector: "runtime_id=" + id}
					bg := metav1.DeletePropagationBackground
					do := metav1.DeleteOptions{PropagationPolicy: &bg}
					must(t, e.admin.AppsV1().Deployments(e.ns).DeleteCollection(ctx, do, lo))
					must(t, e.admin.CoreV1().Pods(e.ns).DeleteCollection(ctx, do, lo))
					for _, s := range []string{"runtime-" + id} {
						must(t, e.admin.CoreV1().Services(e.ns).Delete(ctx, s, do))
					}
					must(t, e.admin.CoreV1().PersistentVolumeClaims(e.ns).DeleteCollection(ctx, do, lo))
					must(t, e.admin.CoreV1().ServiceAccounts(e.ns).DeleteCollection(ctx, do, lo))
					must(t, e.admin.NetworkingV1().Ingresses(e.ns).DeleteCollection(ctx, do, lo))
					must(t, e.admin.PolicyV1().PodDisruptionBudgets(e.ns).DeleteCollection(ctx, do, lo))
					must(t, e.c.AdminDynamic(t).Resource(kubetest.HTTPRoutes).Namespace(e.ns).DeleteCollection(ctx, do, lo))
					e.waitGone(t, id)
				},
			}
		},
	})
}

// live counts the runtime's objects not being deleted (a claim waits for
// the controller manager's PVC protection after its deletion).
func (e *env) live(t testing.TB, id string) int {
	t.Helper()
	ctx := context.Background()
	lo := metav1.ListOptions{LabelSelector: "runtime_id=" + id}
	n := 0
	count := func(items []metav1.Object, err error) {
		must(t, err)
		for _, o := range items {
			if o.GetDeletionTimestamp() == nil {
				n++
			}
		}
	}
	d, err := e.admin.AppsV1().Deployments(e.ns).List(ctx, lo)
	count(metas(d.Items, err))
	pvc, err := e.admin.CoreV1().PersistentVolumeClaims(e.ns).List(ctx, lo)
	count(metas(pvc.Items, err))
	svc, err := e.admin.CoreV1().Services(e.ns).List(ctx, lo)
	count(metas(svc.Items, err))
	sa, err := e.admin.CoreV1().ServiceAccounts(e.ns).List(ctx, lo)
	count(metas(sa.Items, err))
	return n
}

func metas[T any, P interface {
	*T
	metav1.Object
}](items []T, err error) ([]metav1.Object, error) {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out, err
}
