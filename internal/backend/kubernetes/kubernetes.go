package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/kubeclient"
)

// Name is the backend's name in keys.
const Name = "kubernetes"

// Archive modes.
const (
	ArchiveSnapshot = kubeclient.ArchiveSnapshot // a VolumeSnapshot of each volume before deletion
	ArchiveNone     = kubeclient.ArchiveNone     // volumes are deleted without a snapshot
)

// Defaults of Options.
const (
	DefaultIDLabel         = "runtime_id"
	DefaultSnapshotTimeout = kubeclient.DefaultSnapshotTimeout
	DefaultPodGrace        = 2 * time.Minute
)

// Resources of the custom kinds the backend uses where the cluster serves
// them.
var (
	VolumeSnapshots = kubeclient.VolumeSnapshots
	HTTPRoutes      = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
)

// Options configure the backend: the keys of a [[kubernetes]] source.
type Options struct {
	// Namespace holds the runtimes (runtime-api's sandbox_namespace).
	Namespace string
	// Selector is a label selector every object of a runtime matches
	// ("runtime_id", "app=openhands-runtime"); required: nothing outside
	// it is ever touched.
	Selector string
	// IDLabel groups objects into runtimes; its value is the runtime's ID.
	IDLabel string
	// SnapshotClass is the VolumeSnapshotClass of archives; empty: the
	// cluster's default class.
	SnapshotClass string
	// SnapshotTimeout bounds the wait for a snapshot to become ready.
	SnapshotTimeout time.Duration
	// PodGrace bounds the wait for a deleted Deployment's pods to end
	// before its volume is deleted.
	PodGrace time.Duration
	// Archive is ArchiveSnapshot (default) or ArchiveNone.
	Archive string
	// ReadyTimeout bounds how long a listing waits for the caches to sync
	// or a broken watch to heal.
	ReadyTimeout time.Duration
}

// core is what both variants share: the caches and every role but the
// archive ones.
type core struct {
	client *kubeclient.Client
	opts   Options
	sel    labels.Selector

	deployments, pvcs, pods *kubeclient.Kind
	// ordered is every kind in deletion order (the runtime-api's: the
	// workload first, the volume last); optional kinds are nil while the
	// cluster does not serve them.
	mu      sync.Mutex
	ordered []*kindSlot
}

type kindSlot struct {
	name     string
	optional *schema.GroupVersionResource // looked up in discovery
	kind     *kubeclient.Kind
}

// Backend is the backend with snapshot archives.
type Backend struct{ *core }

// NoArchive is the backend for archive = "none": no Exporter, no Restorer.
type NoArchive struct{ *core }

// New checks opts and returns the backend (a *Backend, or a *NoArchive for
// archive = "none"). It sends nothing: the caches start at the first
// listing.
func New(client *kubeclient.Client, opts Options) (backend.Backend, error) {
	c, err := newCore(client, opts)
	if err != nil {
		return nil, err
	}
	if c.opts.Archive == ArchiveNone {
		return &NoArchive{c}, nil
	}
	return &Backend{c}, nil
}

func newCore(client *kubeclient.Client, opts Options) (*core, error) {
	sel, err := kubeclient.ParseScope(opts.Namespace, opts.Selector)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	if opts.IDLabel == "" {
		opts.IDLabel = DefaultIDLabel
	}
	if errs := validation.IsQualifiedName(opts.IDLabel); len(errs) > 0 {
		return nil, fmt.Errorf("kubernetes: id_label %q: %s", opts.IDLabel, strings.Join(errs, "; "))
	}
	if opts.Archive, err = kubeclient.ParseArchive(opts.Archive); err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	if opts.SnapshotTimeout <= 0 {
		opts.SnapshotTimeout = DefaultSnapshotTimeout
	}
	if opts.PodGrace <= 0 {
		opts.PodGrace = DefaultPodGrace
	}
	// Objects without the id label are not part of any runtime.
	req, err := labels.NewRequirement(opts.IDLabel, "exists", nil)
	if err != nil {
		return nil, err
	}
	sel = sel.Add(*req)
	c := &core{client: client, opts: opts, sel: sel}
	c.build()
	return c, nil
}

// selector ANDs the backend's selector with more ("" for none).
func (c *core) selector(more string) string { return kubeclient.AndSelector(c.sel, more) }

func (c *core) where() string {
	return fmt.Sprintf("in namespace %s (%s)", c.opts.Namespace, c.opts.Selector)
}

// build makes the caches of the typed kinds; the optional kinds are made
// when discovery finds them.
func (c *core) build() {
	ns := c.opts.Namespace
	t := c.client.Typed
	sel := func(o metav1.ListOptions) metav1.ListOptions { o.LabelSelector = c.selector(o.LabelSelector); return o }
	mk := func(k *kubeclient.Kind) *kindSlot { return &kindSlot{name: k.Name, kind: k} }
	w := c.where()
	idl := kubeclient.ByLabel(c.opts.IDLabel)
	c.deployments = kubeclient.NewKind("Deployment", "deployments", w, idl, &appsv1.Deployment{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return t.AppsV1().Deployments(ns).List(ctx, sel(o))
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return t.AppsV1().Deployments(ns).Watch(ctx, sel(o))
		}, t.AppsV1().Deployments(ns).Delete)
	c.pods = kubeclient.NewKind("Pod", "pods", w, idl, &corev1.Pod{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return t.CoreV1().Pods(ns).List(ctx, sel(o))
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return t.CoreV1().Pods(ns).Watch(ctx, sel(o))
		}, t.CoreV1().Pods(ns).Delete)
	c.pvcs = kubeclient.NewKind("PersistentVolumeClaim", "persistentvolumeclaims", w, idl, &corev1.PersistentVolumeClaim{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return t.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel(o))
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return t.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, sel(o))
		}, t.CoreV1().PersistentVolumeClaims(ns).Delete)
	ingresses := kubeclient.NewKind("Ingress", "ingresses", w, idl, &networkingv1.Ingress{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return t.NetworkingV1().Ingresses(ns).List(ctx, sel(o))
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return t.NetworkingV1().Ingresses(ns).Watch(ctx, sel(o))
		}, t.NetworkingV1().Ingresses(ns).Delete)
	services := kubeclient.NewKind("Service", "services", w, idl, &corev1.Service{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return t.CoreV1().Services(ns).List(ctx, sel(o))
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return t.CoreV1().Services(ns).Watch(ctx, sel(o))
		}, t.CoreV1().Services(ns).Delete)
	pdbs := kubeclient.NewKind("PodDisruptionBudget", "poddisruptionbudgets", w, idl, &policyv1.PodDisruptionBudget{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return t.PolicyV1().PodDisruptionBudgets(ns).List(ctx, sel(o))
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return t.PolicyV1().PodDisruptionBudgets(ns).Watch(ctx, sel(o))
		}, t.PolicyV1().PodDisruptionBudgets(ns).Delete)
	accounts := kubeclient.NewKind("ServiceAccount", "serviceaccounts", w, idl, &corev1.ServiceAccount{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return t.CoreV1().ServiceAccounts(ns).List(ctx, sel(o))
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return t.CoreV1().ServiceAccounts(ns).Watch(ctx, sel(o))
		}, t.CoreV1().ServiceAccounts(ns).Delete)
	route, snap := HTTPRoutes, VolumeSnapshots
	c.ordered = []*kindSlot{
		mk(c.deployments),
		{name: "HTTPRoute", optional: &route},
		mk(ingresses),
		mk(services),
		mk(pdbs),
		mk(accounts),
		{name: "VolumeSnapshot", optional: &snap},
		mk(c.pods), // bare pods; a Deployment's go with it
		mk(c.pvcs), // the volume last
	}
}

// dynamicKind makes the cache of a custom kind.
func (c *core) dynamicKind(name string, gvr schema.GroupVersionResource) *kubeclient.Kind {
	r := c.client.Dynamic.Resource(gvr).Namespace(c.opts.Namespace)
	return kubeclient.NewKind(name, gvr.Resource, c.where(), kubeclient.ByLabel(c.opts.IDLabel), &unstructured.Unstructured{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = c.selector(o.LabelSelector)
			return r.List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = c.selector(o.LabelSelector)
			return r.Watch(ctx, o)
		}, func(ctx context.Context, name string, o metav1.DeleteOptions) error { return r.Delete(ctx, name, o) })
}

// kinds returns the kinds the cluster serves, in deletion order, looking
// the optional ones up again (one discovery request each while absent).
func (c *core) kinds(ctx context.Context) ([]*kubeclient.Kind, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*kubeclient.Kind
	for _, s := range c.ordered {
		if s.kind == nil && s.optional != nil {
			ok, err := c.client.Serves(ctx, *s.optional)
			if err != nil {
				return nil, err
			}
			if ok {
				s.kind = c.dynamicKind(s.name, *s.optional)
			}
		}
		if s.kind != nil {
			out = append(out, s.kind)
		}
	}
	return out, nil
}

// Close stops the caches.
func (c *core) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.ordered {
		if s.kind != nil {
			s.kind.Close()
		}
	}
	return nil
}

// Name returns "kubernetes".
func (c *core) Name() string { return Name }

// String names the backend in messages.
func (c *core) String() string {
	return fmt.Sprintf("kubernetes at %s, namespace %s, selector %q", c.client.Host(), c.opts.Namespace, c.opts.Selector)
}

// group is one runtime's objects, by kind.
type group struct {
	id   string
	objs map[string][]metav1.Object // kind name → objects
}

func (g *group) deployments() []*appsv1.Deployment {
	return as[*appsv1.Deployment](g.objs["Deployment"])
}
func (g *group) pods() []*corev1.Pod { return as[*corev1.Pod](g.objs["Pod"]) }
func (g *group) pvcs() []*corev1.PersistentVolumeClaim {
	return as[*corev1.PersistentVolumeClaim](g.objs["PersistentVolumeClaim"])
}

func as[T any](objs []metav1.Object) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// List implements backend.Lister: every runtime from the caches, or the
// named ones read afresh.
func (c *core) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	kinds, err := c.kinds(ctx)
	if err != nil {
		return nil, fmt.Errorf("list kubernetes runtimes %s: %w", c.where(), err)
	}
	if len(opts.IDs) > 0 {
		return c.listFresh(ctx, kinds, opts.IDs)
	}
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Go(func() { errs[i] = k.Ready(ctx, c.opts.ReadyTimeout) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("list kubernetes runtimes %s: %w", c.where(), err)
	}
	ids := map[string]bool{}
	for _, k := range kinds {
		for _, id := range k.IDs() {
			ids[id] = true
		}
	}
	out := make([]backend.Runtime, 0, len(ids))
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		g := &group{id: id, objs: map[string][]metav1.Object{}}
		for _, k := range kinds {
			if objs := k.ByID(id); len(objs) > 0 {
				g.objs[k.Name] = objs
			}
		}
		out = append(out, c.runtime(g))
	}
	return out, nil
}

// fresh reads one runtime's objects from the API server. Unless all is
// set, only what decides what may be done (its Deployments, pods and
// claims) is read afresh; the other kinds come from their caches while
// those are healthy (a re-observation then costs 3 requests, not 9).
func (c *core) fresh(ctx context.Context, kinds []*kubeclient.Kind, id string, all bool) (*group, error) {
	if errs := validation.IsValidLabelValue(id); len(errs) > 0 {
		return nil, fmt.Errorf("runtime id %q is not a label value: %w", id, backend.ErrNotFound)
	}
	g := &group{id: id, objs: map[string][]metav1.Object{}}
	for _, k := range kinds {
		var objs []metav1.Object
		if !all && k != c.deployments && k != c.pods && k != c.pvcs && k.Healthy() {
			objs = k.ByID(id)
		} else {
			var err error
			if objs, err = k.Fresh(ctx, metav1.ListOptions{LabelSelector: c.opts.IDLabel + "=" + id}); err != nil {
				return nil, err
			}
		}
		if len(objs) > 0 {
			g.objs[k.Name] = objs
		}
	}
	return g, nil
}

func (c *core) listFresh(ctx context.Context, kinds []*kubeclient.Kind, ids []string) ([]backend.Runtime, error) {
	var out []backend.Runtime
	for _, id := range ids {
		g, err := c.fresh(ctx, kinds, id, false)
		if errors.Is(err, backend.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list kubernetes runtime %s %s: %w", id, c.where(), err)
		}
		if len(g.objs) > 0 {
			out = append(out, c.runtime(g))
		}
	}
	return out, nil
}

// runtime turns a runtime's objects into what the engine sees.
func (c *core) runtime(g *group) backend.Runtime {
	rt := backend.Runtime{Key: backend.Key{Backend: Name, ID: g.id}}
	deps, pods, pvcs := g.deployments(), g.pods(), g.pvcs()

	var created, last, runStart time.Time
	newest := func(t time.Time) {
		if t.After(last) {
			last = t
		}
	}
	var ids []string
	for _, kind := range slices.Sorted(maps.Keys(g.objs)) {
		for _, o := range g.objs[kind] {
			t := o.GetCreationTimestamp().Time
			if created.IsZero() || t.Before(created) {
				created = t
			}
			newest(t)
			ids = append(ids, kind+"/"+o.GetName()+"/"+string(o.GetUID()))
			if rt.Labels == nil || kind == "Deployment" {
				rt.Labels = maps.Clone(o.GetLabels())
			}
		}
	}
	wanted, ready := int32(0), int32(0)
	for _, d := range deps {
		if d.Spec.Replicas == nil || *d.Spec.Replicas > 0 {
			wanted += ptrOr(d.Spec.Replicas, 1)
		}
		ready += d.Status.ReadyReplicas
		for _, cond := range d.Status.Conditions {
			// Transitions move when replicas come or go: a start, a stop.
			newest(cond.LastTransitionTime.Time)
		}
		ids = append(ids, fmt.Sprintf("replicas/%s/%d", d.Name, ptrOr(d.Spec.Replicas, 1)))
	}
	runningPods := 0
	for _, p := range pods {
		if p.Status.StartTime != nil {
			newest(p.Status.StartTime.Time)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil {
				newest(cs.State.Running.StartedAt.Time)
			}
			if cs.State.Terminated != nil {
				newest(cs.State.Terminated.FinishedAt.Time)
			}
		}
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			runningPods++
			if st := p.Status.StartTime; st != nil && (runStart.IsZero() || st.Time.Before(runStart)) {
				runStart = st.Time
			}
		}
	}
	switch {
	case wanted > 0 && ready > 0:
		rt.State = backend.StateRunning
	case wanted > 0:
		rt.State = backend.StateStarting
	case len(deps) > 0:
		rt.State = backend.StateSuspended
	case runningPods > 0:
		rt.State = backend.StateRunning // bare pods
	case len(pods) > 0 && slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodPending }):
		rt.State = backend.StateStarting
	default:
		rt.State = backend.StateStopped // a volume or leftovers only
	}
	rt.CreatedAt = created.UTC()
	if rt.State == backend.StateRunning && !runStart.IsZero() {
		rt.CreatedAt = runStart.UTC()
	}
	rt.LastActivity = last.UTC()

	var names []string
	for _, pvc := range pvcs {
		rt.StorageBytes += claimBytes(pvc)
		names = append(names, pvc.Name)
	}
	if len(names) > 0 && c.opts.Archive != ArchiveNone {
		rt.Unsaved = "the workspace volumes " + strings.Join(names, ", ")
	}
	if why := c.usedElsewhere(g); why != "" {
		rt.Busy = why
	}
	sort.Strings(ids)
	h := sha256.Sum256([]byte(strings.Join(ids, "\n")))
	rt.Fingerprint = hex.EncodeToString(h[:12])
	return rt
}

// usedElsewhere names a pod of another runtime (or none) that mounts one of
// g's volumes: the runtime is busy while it does.
func (c *core) usedElsewhere(g *group) string {
	pvcs := g.pvcs()
	if len(pvcs) == 0 {
		return ""
	}
	for _, p := range as[*corev1.Pod](c.pods.All()) {
		if p.Labels[c.opts.IDLabel] == g.id || podEnded(p) {
			continue
		}
		for _, pvc := range pvcs {
			if mounts(p, pvc.Name) {
				return fmt.Sprintf("its volume %s is used by pod %s", pvc.Name, p.Name)
			}
		}
	}
	return ""
}

func podEnded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func mounts(p *corev1.Pod, claim string) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}

// claimBytes is a claim's capacity once bound, its request before.
func claimBytes(pvc *corev1.PersistentVolumeClaim) int64 {
	if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
		return q.Value()
	}
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		return q.Value()
	}
	return 0
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
