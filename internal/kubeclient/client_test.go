package kubeclient

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// TestBoundedTransport: at most Concurrency requests are in flight, a
// watch takes no slot, and every request is counted.
func TestBoundedTransport(t *testing.T) {
	var inFlight, peak atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			<-release
			return
		}
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
	}))
	defer srv.Close()
	defer close(release)
	b := &bounded{rt: http.DefaultTransport, slots: make(chan struct{}, 2), sent: new(atomic.Int64)}
	client := &http.Client{Transport: b}
	// Two watches hold their connections open: the requests still run.
	for range 2 {
		go func() {
			if resp, err := client.Get(srv.URL + "/api/v1/pods?watch=true"); err == nil {
				resp.Body.Close()
			}
		}()
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, err := client.Get(srv.URL + "/api/v1/pods")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	if peak.Load() > 2 || peak.Load() == 0 {
		t.Fatalf("peak in flight %d, want 1..2", peak.Load())
	}
	if b.sent.Load() < 8 {
		t.Fatalf("counted %d requests", b.sent.Load())
	}
}

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments/scale"}
	err := Classify("scale to 0", "Deployment x", apierrors.NewForbidden(gr, "x", errors.New(`User "system:serviceaccount:ns:r" cannot patch resource "deployments/scale"`)))
	if !errors.Is(err, backend.ErrProtected) || !strings.Contains(err.Error(), `cannot patch resource "deployments/scale"`) || !strings.Contains(err.Error(), "role.yaml") {
		t.Fatalf("forbidden: %v", err)
	}
	if err := Classify("delete", "Pod p", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p")); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("not found: %v", err)
	}
	if err := Classify("create", "PVC c", apierrors.NewAlreadyExists(schema.GroupResource{Resource: "persistentvolumeclaims"}, "c")); !errors.Is(err, backend.ErrConflict) {
		t.Fatalf("exists: %v", err)
	}
	if Classify("x", "y", nil) != nil {
		t.Fatal("nil error classified")
	}
}
