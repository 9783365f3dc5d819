package kubernetes_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/reclaimer/reclaimer/internal/backend"
	kbackend "github.com/reclaimer/reclaimer/internal/backend/kubernetes"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/kubeclient"
	"github.com/reclaimer/reclaimer/internal/kubetest"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

var cluster *kubetest.Cluster

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, kubetest.Options{}, &cluster)) }

// selector is what the tests' runtimes carry, as OpenHands' runtime-api
// labels them.
const selector = "app=openhands-runtime"

type env struct {
	c      *kubetest.Cluster
	ns     string
	admin  kubernetes.Interface
	client *kubeclient.Client
	b      backend.Backend
	clock  *fakes.Clock
	eng    *engine.Engine
	store  ledger.Store
}

// setup makes a namespace and a backend over it, with cfg's rights (nil:
// exactly those of deploy/kubernetes/role.yaml, so every test also shows
// the Role grants what the backend uses), and an engine with set. The engine's clock starts
// at the real time, since the API server stamps objects with it.
func setup(t testing.TB, set policy.Settings, cfg *rest.Config, opts kbackend.Options) *env {
	t.Helper()
	c := kubetest.Need(t, cluster)
	ns := opts.Namespace
	if ns == "" {
		ns = c.Namespace(t)
	}
	return setupIn(t, c, ns, set, cfg, opts)
}

func setupIn(t testing.TB, c *kubetest.Cluster, ns string, set policy.Settings, cfg *rest.Config, opts kbackend.Options) *env {
	t.Helper()
	if cfg == nil {
		cfg = c.Client(t, ns, roleRules(t))
	}
	client, err := kubeclient.New(kubeclient.Options{Config: cfg, Rate: 1000, Concurrency: 16})
	if err != nil {
		t.Fatal(err)
	}
	opts.Namespace = ns
	if opts.Selector == "" {
		opts.Selector = selector
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 5 * time.Second
	}
	b, err := kbackend.New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(interface{ Close() error }).Close() })
	clock := fakes.NewClock(time.Now().UTC().Truncate(time.Second))
	eng, store := fakes.Engine(t, clock, engine.Source{Name: "kubernetes[0]", Backend: b, Settings: set})
	return &env{c: c, ns: ns, admin: c.AdminClient(t), client: client, b: b, clock: clock, eng: eng, store: store}
}

// rtOpts shape one test runtime.
type rtOpts struct {
	replicas int32
	running  bool // mark its pod running (no kubelet: the test writes its status)
	noVolume bool
	labels   map[string]string // replace the selector's labels
}

// makeRuntime lays out one runtime as the runtime-api does: a Deployment
// whose pods mount the workspace claim, the claim, a Service, an Ingress,
// an HTTPRoute, a PodDisruptionBudget and a ServiceAccount, all labelled
// runtime_id=<id>.
func (e *env) makeRuntime(t testing.TB, id string, o rtOpts) {
	t.Helper()
	ctx := context.Background()
	lbl := map[string]string{"app": "openhands-runtime", "runtime_id": id}
	if o.labels != nil {
		lbl = map[string]string{"runtime_id": id}
		for k, v := range o.labels {
			lbl[k] = v
		}
	}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Labels: lbl} }
	name := "runtime-" + id
	must(t, create(e.admin.CoreV1().ServiceAccounts(e.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta(name)}, metav1.CreateOptions{})))
	var volumes []corev1.Volume
	if !o.noVolume {
		_, err := e.admin.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: meta(name + "-pvc"),
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}},
			metav1.CreateOptions{})
		must(t, err)
		volumes = []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name + "-pvc"}}}}
	}
	sel := map[string]string{"runtime_id": id}
	_, err := e.admin.AppsV1().Deployments(e.ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta(name),
		Spec: appsv1.DeploymentSpec{Replicas: &o.replicas, Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{ServiceAccountName: name, Volumes: volumes,
					Containers: []corev1.Container{{Name: "runtime", Image: "openhands-runtime"}}}}}},
		metav1.CreateOptions{})
	must(t, err)
	must(t, create(e.admin.CoreV1().Services(e.ns).Create(ctx, &corev1.Service{ObjectMeta: meta(name),
		Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 60000}}}}, metav1.CreateOptions{})))
	prefix := networkingv1.PathTypePrefix
	must(t, create(e.admin.NetworkingV1().Ingresses(e.ns).Create(ctx, &networkingv1.Ingress{ObjectMeta: meta(name),
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: id + ".runtime.example", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: 60000}}}}}}}}}}},
		metav1.CreateOptions{})))
	one := intstr.FromInt32(1)
	must(t, create(e.admin.PolicyV1().PodDisruptionBudgets(e.ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: meta(name),
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}}}, metav1.CreateOptions{})))
	route := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": name, "labels": toAny(lbl)},
		"spec":     map[string]any{"hostnames": []any{id + ".runtime.example"}}}}
	_, err = e.c.AdminDynamic(t).Resource(kubetest.HTTPRoutes).Namespace(e.ns).Create(ctx, route, metav1.CreateOptions{})
	must(t, err)
	if o.replicas > 0 {
		pod := e.waitPod(t, id)
		if o.running {
			e.c.MarkPodRunning(t, e.ns, pod.Name, time.Now())
			e.waitFor(t, id+" ready", func() bool {
				d, err := e.admin.AppsV1().Deployments(e.ns).Get(ctx, name, metav1.GetOptions{})
				return err == nil && d.Status.ReadyReplicas > 0
			})
		}
	}
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func create[T any](_ T, err error) error { return err }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitPod waits for the controller manager to make the runtime's pod.
func (e *env) waitPod(t testing.TB, id string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	e.waitFor(t, "the pod of "+id, func() bool {
		pods, err := e.admin.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "runtime_id=" + id})
		if err != nil || len(pods.Items) == 0 {
			return false
		}
		pod = pods.Items[0]
		return true
	})
	return pod
}

// waitFor polls a condition the API server or a controller reaches by
// itself (there is no event to wait on from outside).
func (e *env) waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// objects counts each kind of the runtime's objects, straight from the API
// server.
func (e *env) objects(t testing.TB, id string) map[string]int {
	t.Helper()
	ctx := context.Background()
	lo := metav1.ListOptions{LabelSelector: "runtime_id=" + id}
	out := map[string]int{}
	count := func(kind string, n int, err error) {
		must(t, err)
		if n > 0 {
			out[kind] = n
		}
	}
	d, err := e.admin.AppsV1().Deployments(e.ns).List(ctx, lo)
	count("Deployment", len(d.Items), err)
	pvc, err := e.admin.CoreV1().PersistentVolumeClaims(e.ns).List(ctx, lo)
	count("PersistentVolumeClaim", len(pvc.Items), err)
	svc, err := e.admin.CoreV1().Services(e.ns).List(ctx, lo)
	count("Service", len(svc.Items), err)
	sa, err := e.admin.CoreV1().ServiceAccounts(e.ns).List(ctx, lo)
	count("ServiceAccount", len(sa.Items), err)
	ing, err := e.admin.NetworkingV1().Ingresses(e.ns).List(ctx, lo)
	count("Ingress", len(ing.Items), err)
	pdb, err := e.admin.PolicyV1().PodDisruptionBudgets(e.ns).List(ctx, lo)
	count("PodDisruptionBudget", len(pdb.Items), err)
	rt, err := e.c.AdminDynamic(t).Resource(kubetest.HTTPRoutes).Namespace(e.ns).List(ctx, lo)
	count("HTTPRoute", len(rt.Items), err)
	return out
}

// waitGone waits until the runtime has no object left: a deleted claim
// goes once the controller manager's PVC protection sees no pod using it.
func (e *env) waitGone(t testing.TB, id string) {
	t.Helper()
	var left map[string]int
	deadline := time.Now().Add(time.Minute)
	for {
		if left = e.objects(t, id); len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind after a minute: %s", fmtKinds(left))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// allKinds is what makeRuntime lays out (pods aside).
var allKinds = map[string]int{"Deployment": 1, "PersistentVolumeClaim": 1, "Service": 1, "ServiceAccount": 1,
	"Ingress": 1, "PodDisruptionBudget": 1, "HTTPRoute": 1}

func (e *env) replicas(t testing.TB, id string) int32 {
	t.Helper()
	d, err := e.admin.AppsV1().Deployments(e.ns).Get(context.Background(), "runtime-"+id, metav1.GetOptions{})
	must(t, err)
	return *d.Spec.Replicas
}

// list lists through the backend, by ID.
func (e *env) list(t testing.TB) map[string]backend.Runtime {
	t.Helper()
	l, _ := backend.As[backend.Lister](e.b)
	rts, err := l.List(context.Background(), backend.ListOptions{})
	must(t, err)
	out := map[string]backend.Runtime{}
	for _, rt := range rts {
		out[rt.ID] = rt
	}
	return out
}

// waitListed waits until the backend's caches show want for id (a watch
// delivers changes a moment after the API server made them).
func (e *env) waitListed(t testing.TB, id string, want func(backend.Runtime, bool) bool) backend.Runtime {
	t.Helper()
	var rt backend.Runtime
	var ok bool
	e.waitFor(t, "the listing of "+id, func() bool {
		rt, ok = e.list(t)[id]
		return want(rt, ok)
	})
	return rt
}

func (e *env) pass(t testing.TB) (*plan.Plan, *plan.Applied) {
	t.Helper()
	ctx := context.Background()
	p, w, err := e.eng.Plan(ctx, engine.PlanOptions{})
	must(t, err)
	res, err := e.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
	must(t, err)
	return p, res
}

func outcome(res *plan.Applied, id string) plan.Result {
	for _, r := range res.Results {
		if r.Runtime == id {
			return r
		}
	}
	return plan.Result{}
}

func actionsOf(p *plan.Plan) map[string]backend.Step {
	out := map[string]backend.Step{}
	for _, a := range p.Actions {
		out[a.Runtime] = a.Step
	}
	return out
}

// playSnapshotController stands in for the CSI snapshot controller, which
// does not run here: it marks every VolumeSnapshot of the namespace ready
// to use, until the test ends.
func (e *env) playSnapshotController(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	dyn := e.c.AdminDynamic(t)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := dyn.Resource(kubetest.VolumeSnapshots).Namespace(e.ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, it := range list.Items {
					if ready, _, _ := unstructured.NestedBool(it.Object, "status", "readyToUse"); !ready {
						if err := e.c.MarkSnapshotReady(ctx, e.ns, it.GetName(), "10Gi"); err != nil && ctx.Err() == nil {
							t.Errorf("play the snapshot controller: %v", err)
						}
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

func key(id string) ledger.Key {
	return ledger.Key{Source: "kubernetes[0]", Backend: kbackend.Name, ID: id}
}

func fmtKinds(m map[string]int) string { return fmt.Sprint(m) }
