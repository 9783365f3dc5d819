package kubecli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/reclaimer/reclaimer/internal/cli"
	"github.com/reclaimer/reclaimer/internal/kubetest"
	"github.com/reclaimer/reclaimer/internal/plan"
)

var cluster *kubetest.Cluster

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, kubetest.Options{}, &cluster)) }

func run(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errb, Version: "test"})
	return out.String(), errb.String(), code
}

// config writes a configuration with one [[kubernetes]] source over ns,
// reached with token, and returns its path.
func config(t *testing.T, c *kubetest.Cluster, ns, token, extra string) string {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(kc, token); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "reclaimer.toml")
	doc := fmt.Sprintf(`
[ledger]
path = %q
[archive]
dir = %q
[[kubernetes]]
namespace = %q
selector = "app=openhands-runtime"
kubeconfig = %q
%s
`, filepath.Join(dir, "state", "ledger.db"), filepath.Join(dir, "archives"), ns, kc, extra)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runtime lays out one runtime as OpenHands' runtime-api does (a
// Deployment whose pod mounts the workspace claim, the claim, a Service),
// and marks its pod running since started: no kubelet runs, the test
// writes the pod's status.
func runtime(t *testing.T, c *kubetest.Cluster, ns, id string, started time.Time) {
	t.Helper()
	ctx := context.Background()
	admin := c.AdminClient(t)
	lbl := map[string]string{"app": "openhands-runtime", "runtime_id": id}
	meta := metav1.ObjectMeta{Name: "runtime-" + id, Labels: lbl}
	_, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "runtime-" + id + "-pvc", Labels: lbl},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}, metav1.CreateOptions{})
	must(t, err)
	one := int32(1)
	_, err = admin.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"runtime_id": id}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "runtime-" + id + "-pvc"}}}},
					Containers: []corev1.Container{{Name: "runtime", Image: "openhands-runtime"}}}}}}, metav1.CreateOptions{})
	must(t, err)
	_, err = admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: meta,
		Spec: corev1.ServiceSpec{Selector: map[string]string{"runtime_id": id}, Ports: []corev1.ServicePort{{Port: 60000}}}}, metav1.CreateOptions{})
	must(t, err)
	var pod string
	waitFor(t, "the pod of "+id, func() bool {
		pods, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "runtime_id=" + id})
		if err != nil || len(pods.Items) == 0 {
			return false
		}
		pod = pods.Items[0].Name
		return true
	})
	c.MarkPodRunning(t, ns, pod, started)
	waitFor(t, id+" ready", func() bool {
		d, err := admin.AppsV1().Deployments(ns).Get(ctx, "runtime-"+id, metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas > 0
	})
}

// TestPlanAndApplyOnARealAPIServer: the command line, with the Role of
// deploy/kubernetes/role.yaml, plans the lifetime cap's suspend of the
// runtime running longer than max_lifetime (and nothing for the other),
// and apply scales its Deployment to 0, keeping its claim.
func TestPlanAndApplyOnARealAPIServer(t *testing.T) {
	c := kubetest.Need(t, cluster)
	ns := c.Namespace(t)
	token := kubetest.Token(c.Client(t, ns, kubetest.RoleRules(t, "../../../deploy/kubernetes/role.yaml")))
	cfg := config(t, c, ns, token, `max_lifetime = "1h"`)
	runtime(t, c, ns, "old", time.Now().Add(-2*time.Hour))
	runtime(t, c, ns, "new", time.Now())

	out, errOut, code := run("--config", cfg, "plan", "--json")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
	}
	var p plan.Plan
	must(t, json.Unmarshal([]byte(out), &p))
	if len(p.Actions) != 1 || p.Actions[0].Runtime != "old" || p.Actions[0].Step != "suspend" || len(p.Problems) != 0 {
		t.Fatalf("plan: %+v %+v", p.Actions, p.Problems)
	}
	if out, errOut, code = run("--config", cfg, "apply"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	admin := c.AdminClient(t)
	ctx := context.Background()
	d, err := admin.AppsV1().Deployments(ns).Get(ctx, "runtime-old", metav1.GetOptions{})
	must(t, err)
	if *d.Spec.Replicas != 0 {
		t.Fatalf("runtime-old has %d replicas after apply:\n%s", *d.Spec.Replicas, out)
	}
	if d, _ := admin.AppsV1().Deployments(ns).Get(ctx, "runtime-new", metav1.GetOptions{}); *d.Spec.Replicas != 1 {
		t.Fatal("runtime-new was scaled too")
	}
	if _, err := admin.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "runtime-old-pvc", metav1.GetOptions{}); err != nil {
		t.Fatalf("suspending lost the volume: %v", err)
	}
	out, _, code = run("--config", cfg, "ls")
	if code != 0 || !strings.Contains(out, "old") || !strings.Contains(out, "suspended") {
		t.Fatalf("ls: exit %d\n%s", code, out)
	}
}

// TestMissingVerbIsAProblemOfThePlan: an account whose Role lacks the
// verbs the backend reads pods with (list, watch) makes plan exit 1 with a problem naming the
// verb and the resource, not a crash, and touches nothing.
func TestMissingVerbIsAProblemOfThePlan(t *testing.T) {
	c := kubetest.Need(t, cluster)
	ns := c.Namespace(t)
	rules := kubetest.RoleRules(t, "../../../deploy/kubernetes/role.yaml")
	var cut []rbacv1.PolicyRule
	for _, r := range rules {
		if slices.Contains(r.Resources, "pods") {
			// Both: client-go's informers may list through a watch
			// (the streaming list), so either verb alone still reads.
			r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "list" || v == "watch" })
		}
		cut = append(cut, r)
	}
	token := kubetest.Token(c.Client(t, ns, cut))
	cfg := config(t, c, ns, token, `max_lifetime = "1h"`)
	runtime(t, c, ns, "old", time.Now().Add(-2*time.Hour))

	out, errOut, code := run("--config", cfg, "plan")
	if code != 1 {
		t.Fatalf("plan: exit %d, want 1\n%s%s", code, out, errOut)
	}
	all := out + errOut
	for _, want := range []string{"pods", "list", "the account may not"} {
		if !strings.Contains(all, want) {
			t.Errorf("the problem does not say %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "panic") {
		t.Fatalf("crashed:\n%s", all)
	}
	d, err := c.AdminClient(t).AppsV1().Deployments(ns).Get(context.Background(), "runtime-old", metav1.GetOptions{})
	must(t, err)
	if *d.Spec.Replicas != 1 {
		t.Fatal("a source that could not be read was acted on")
	}
}

// TestAgentSandboxNativePlanAndSync: with an [[agent_sandbox]] source,
// native plan shows a Sandbox's spec.shutdownTime drifting from the policy
// (and says what the field holds), native sync repairs it, and a lease
// moves it later. No agent-sandbox controller runs: the test writes the
// Ready condition it would.
func TestAgentSandboxNativePlanAndSync(t *testing.T) {
	c := kubetest.Need(t, cluster)
	ns := c.Namespace(t)
	token := kubetest.Token(c.Client(t, ns, kubetest.RoleRules(t, "../../../deploy/kubernetes/role.yaml")))
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	must(t, c.WriteKubeconfig(kc, token))
	cfg := filepath.Join(dir, "reclaimer.toml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`
[ledger]
path = %q
[archive]
dir = %q
[[agent_sandbox]]
namespace = %q
selector = "owner=reclaimer-test"
kubeconfig = %q
idle_suspend = "2h"
max_lifetime = "24h"
`, filepath.Join(dir, "state", "ledger.db"), filepath.Join(dir, "archives"), ns, kc)), 0o600))
	ctx := context.Background()
	sandboxes := c.AdminDynamic(t).Resource(kubetest.Sandboxes).Namespace(ns)
	early := time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": "sb", "labels": map[string]any{"owner": "reclaimer-test"}},
		"spec": map[string]any{"shutdownTime": early, "podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "agent", "image": "sandbox"}}}}}}}
	_, err := sandboxes.Create(ctx, u, metav1.CreateOptions{})
	must(t, err)
	ready := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"DependenciesReady","message":"ready","lastTransitionTime":%q}]}}`,
		time.Now().UTC().Format(time.RFC3339))
	_, err = sandboxes.Patch(ctx, "sb", types.MergePatchType, []byte(ready), metav1.PatchOptions{}, "status")
	must(t, err)
	shutdown := func() time.Time {
		got, err := sandboxes.Get(ctx, "sb", metav1.GetOptions{})
		must(t, err)
		s, _, _ := unstructured.NestedString(got.Object, "spec", "shutdownTime")
		at, err := time.Parse(time.RFC3339, s)
		must(t, err)
		return at
	}

	out, errOut, code := run("--config", cfg, "native", "plan")
	if code != 0 || !strings.Contains(out, "stricter") || !strings.Contains(out, "spec.shutdownTime holds the policy") {
		t.Fatalf("native plan: exit %d\n%s%s", code, out, errOut)
	}
	if got := shutdown().Format(time.RFC3339); got != early {
		t.Fatalf("native plan wrote shutdownTime %s", got)
	}
	if out, errOut, code = run("--config", cfg, "native", "sync"); code != 0 {
		t.Fatalf("native sync: exit %d\n%s%s", code, out, errOut)
	}
	if d := time.Until(shutdown()); d < 110*time.Minute || d > 130*time.Minute {
		t.Fatalf("after sync shutdownTime is in %s, want about 2h", d)
	}
	// A lease of 6 hours moves it to the lease's end (a pass first: the
	// ledger knows the runtimes a pass has seen).
	if out, errOut, code = run("--config", cfg, "apply"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = run("--config", cfg, "lease", "--for", "6h", "sb"); code != 0 {
		t.Fatalf("lease: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = run("--config", cfg, "native", "sync"); code != 0 {
		t.Fatalf("native sync after the lease: exit %d\n%s%s", code, out, errOut)
	}
	if d := time.Until(shutdown()); d < 350*time.Minute || d > 370*time.Minute {
		t.Fatalf("after the lease shutdownTime is in %s, want about 6h", d)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitFor polls what a controller reaches by itself (no event to wait on
// from outside).
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
