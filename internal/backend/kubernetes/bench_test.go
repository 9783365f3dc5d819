package kubernetes_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reclaimer/reclaimer/internal/backend"
	kbackend "github.com/reclaimer/reclaimer/internal/backend/kubernetes"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/kubetest"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// BenchmarkPass10000 is a pass over N runtimes (RECLAIMER_BENCH_RUNTIMES,
// default 10,000) laid out in the real API server as the runtime-api lays
// out paused ones: a Deployment at 0 replicas, its claim and its Service.
// It reports the first pass of a new backend (the caches list everything),
// and a pass with nothing changed (the caches answer), each with the
// requests it sent to the API server.
func BenchmarkPass10000(b *testing.B) {
	c := kubetest.Need(b, cluster)
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("RECLAIMER_BENCH_RUNTIMES")); err == nil && v > 0 {
		n = v
	}
	ns := c.Namespace(b)
	start := time.Now()
	createRuntimes(b, c, ns, n)
	b.Logf("created %d runtimes (%d objects) in %s", n, 3*n, time.Since(start).Round(time.Millisecond))

	set := policy.Settings{IdleSuspend: 30 * time.Minute, Retention: 30 * 24 * time.Hour, Grace: 24 * time.Hour}
	ctx := context.Background()
	pass := func(e *env) (time.Duration, int64) {
		before, t0 := e.client.Sent(), time.Now()
		p, w, err := e.eng.Plan(ctx, engine.PlanOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.eng.Apply(ctx, p, engine.ApplyOptions{World: w}); err != nil {
			b.Fatal(err)
		}
		took, sent := time.Since(t0), e.client.Sent()-before
		if got := p.Seen[kbackend.Name][string(backend.StateSuspended)]; got != n || len(p.Actions) != 0 || len(p.Skipped) != 0 {
			b.Fatalf("pass saw %d suspended runtimes of %d, %d actions, problems %+v", got, n, len(p.Actions), p.Skipped)
		}
		return took, sent
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// A new backend each round: its caches start empty.
		e := setupIn(b, c, ns, set, c.Admin(), kbackend.Options{ReadyTimeout: 2 * time.Minute})
		b.StartTimer()
		first, firstSent := pass(e)
		again, againSent := pass(e)
		b.ReportMetric(first.Seconds(), "first-pass-s")
		b.ReportMetric(float64(firstSent), "first-pass-requests")
		b.ReportMetric(again.Seconds(), "unchanged-pass-s")
		b.ReportMetric(float64(againSent), "unchanged-pass-requests")
		b.Logf("%d runtimes: first pass %s with %d requests, unchanged pass %s with %d requests",
			n, first.Round(time.Millisecond), firstSent, again.Round(time.Millisecond), againSent)
	}
}

// createRuntimes creates n paused runtimes with 16 writers.
func createRuntimes(b *testing.B, c *kubetest.Cluster, ns string, n int) {
	admin := c.AdminClient(b)
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	zero := int32(0)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				id := fmt.Sprintf("r%05d", i)
				lbl := map[string]string{"app": "openhands-runtime", "runtime_id": id}
				name := "runtime-" + id
				sel := map[string]string{"runtime_id": id}
				_, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: name + "-pvc", Labels: lbl},
					Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}},
					metav1.CreateOptions{})
				if err == nil {
					_, err = admin.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl},
						Spec: appsv1.DeploymentSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: sel},
							Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
								Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runtime", Image: "openhands-runtime"}}}}}},
						metav1.CreateOptions{})
				}
				if err == nil {
					_, err = admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl},
						Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 60000}}}}, metav1.CreateOptions{})
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}
