package kubetest_test

import (
	"context"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reclaimer/reclaimer/internal/kubetest"
)

var cluster *kubetest.Cluster

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, kubetest.Options{}, &cluster)) }

// TestControlPlane checks what the backends' tests rely on: the controller
// manager makes a Deployment's pods, a test marks one running, and a client
// bound to a Role is refused what the Role does not grant.
func TestControlPlane(t *testing.T) {
	c := kubetest.Need(t, cluster)
	ns := c.Namespace(t)
	admin := c.AdminClient(t)
	ctx := context.Background()
	one := int32(1)
	labels := map[string]string{"app": "x"}
	_, err := admin.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	waitFor(t, "the deployment's pod", func() bool {
		pods, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
		if err != nil || len(pods.Items) == 0 {
			return false
		}
		pod = pods.Items[0]
		return true
	})
	c.MarkPodRunning(t, ns, pod.Name, time.Now())
	waitFor(t, "a ready replica", func() bool {
		d, err := admin.AppsV1().Deployments(ns).Get(ctx, "x", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 1
	})

	cfg := c.Client(t, ns, []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list"}}})
	limited, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := limited.AppsV1().Deployments(ns).Get(ctx, "x", metav1.GetOptions{}); err != nil {
		t.Fatalf("a granted verb was refused: %v", err)
	}
	err = limited.AppsV1().Deployments(ns).Delete(ctx, "x", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("delete without the verb: %v, want forbidden", err)
	}
}

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
