package agentsandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/kubeclient"
)

// Name is the backend's name in keys.
const Name = "agent-sandbox"

// Sandboxes is the resource of agent-sandbox's Sandbox.
var Sandboxes = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

// Archive modes, as for the kubernetes backend.
const (
	ArchiveSnapshot = kubeclient.ArchiveSnapshot
	ArchiveNone     = kubeclient.ArchiveNone
)

// Options configure the backend: the keys of an [[agent_sandbox]] source.
type Options struct {
	Namespace string
	// Selector is a label selector the Sandboxes match; required.
	Selector string
	// SnapshotClass, SnapshotTimeout: archives, as for kubernetes.
	SnapshotClass   string
	SnapshotTimeout time.Duration
	// Archive is ArchiveSnapshot (default) or ArchiveNone.
	Archive string
	// ReadyTimeout bounds how long a listing waits for the cache.
	ReadyTimeout time.Duration
}

// core holds every role but the archive ones.
type core struct {
	client    *kubeclient.Client
	opts      Options
	sel       labels.Selector
	sandboxes *kubeclient.Kind
	now       func() time.Time
}

// Backend is the backend with snapshot archives.
type Backend struct{ *core }

// NoArchive is the backend for archive = "none".
type NoArchive struct{ *core }

// New checks opts and returns the backend (*Backend, or *NoArchive for
// archive = "none"). It sends nothing until the first listing.
func New(client *kubeclient.Client, opts Options) (backend.Backend, error) {
	sel, err := kubeclient.ParseScope(opts.Namespace, opts.Selector)
	if err != nil {
		return nil, fmt.Errorf("agent_sandbox: %w", err)
	}
	if opts.Archive, err = kubeclient.ParseArchive(opts.Archive); err != nil {
		return nil, fmt.Errorf("agent_sandbox: %w", err)
	}
	if opts.SnapshotTimeout <= 0 {
		opts.SnapshotTimeout = kubeclient.DefaultSnapshotTimeout
	}
	c := &core{client: client, opts: opts, sel: sel, now: time.Now}
	r := client.Dynamic.Resource(Sandboxes).Namespace(opts.Namespace)
	narrow := func(o metav1.ListOptions) metav1.ListOptions {
		o.LabelSelector = kubeclient.AndSelector(sel, o.LabelSelector)
		return o
	}
	c.sandboxes = kubeclient.NewKind("Sandbox", "sandboxes", fmt.Sprintf("in namespace %s (%s)", opts.Namespace, opts.Selector),
		kubeclient.ByName, &unstructured.Unstructured{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return r.List(ctx, narrow(o)) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return r.Watch(ctx, narrow(o))
		},
		func(ctx context.Context, name string, o metav1.DeleteOptions) error { return r.Delete(ctx, name, o) })
	if opts.Archive == ArchiveNone {
		return &NoArchive{c}, nil
	}
	return &Backend{c}, nil
}

// Name returns "agent-sandbox".
func (c *core) Name() string { return Name }

// String names the backend in messages.
func (c *core) String() string {
	return fmt.Sprintf("agent-sandbox at %s, namespace %s, selector %q", c.client.Host(), c.opts.Namespace, c.opts.Selector)
}

// Close stops the cache.
func (c *core) Close() error {
	c.sandboxes.Close()
	return nil
}

// sandbox is what the backend reads of one Sandbox.
type sandbox struct {
	u                *unstructured.Unstructured
	mode, policy     string
	shutdown         time.Time
	ready, finished  *metav1.Condition
	claims           []string // the claims its templates make
	requested        int64
	createdAt, lastT time.Time
}

func parse(u *unstructured.Unstructured) sandbox {
	s := sandbox{u: u, createdAt: u.GetCreationTimestamp().Time}
	s.mode, _, _ = unstructured.NestedString(u.Object, "spec", "operatingMode")
	s.policy, _, _ = unstructured.NestedString(u.Object, "spec", "shutdownPolicy")
	if st, ok, _ := unstructured.NestedString(u.Object, "spec", "shutdownTime"); ok {
		if t, err := time.Parse(time.RFC3339, st); err == nil {
			s.shutdown = t.UTC()
		}
	}
	s.lastT = s.createdAt
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		m, _ := raw.(map[string]any)
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err != nil {
			continue
		}
		if c.LastTransitionTime.After(s.lastT) {
			s.lastT = c.LastTransitionTime.Time
		}
		switch c.Type {
		case "Ready":
			s.ready = &c
		case "Finished":
			s.finished = &c
		}
	}
	tmpls, _, _ := unstructured.NestedSlice(u.Object, "spec", "volumeClaimTemplates")
	for _, raw := range tmpls {
		m, _ := raw.(map[string]any)
		name, _, _ := unstructured.NestedString(m, "metadata", "name")
		if name != "" {
			// agent-sandbox names each claim "<template>-<sandbox>".
			s.claims = append(s.claims, name+"-"+u.GetName())
		}
		if q, ok, _ := unstructured.NestedString(m, "spec", "resources", "requests", "storage"); ok {
			if v, err := resource.ParseQuantity(q); err == nil {
				s.requested += v.Value()
			}
		}
	}
	return s
}

func (s sandbox) expired() bool {
	return s.ready != nil && s.ready.Status == metav1.ConditionFalse && s.ready.Reason == "SandboxExpired"
}

func (s sandbox) state() backend.State {
	switch {
	case s.mode == "Suspended" || s.expired():
		return backend.StateSuspended
	case s.finished != nil && s.finished.Status == metav1.ConditionTrue:
		return backend.StateStopped
	case s.ready != nil && s.ready.Status == metav1.ConditionTrue:
		return backend.StateRunning
	}
	return backend.StateStarting
}

// deadlineStep is what expiry does: Retain (the default) deletes the pod
// and keeps the Sandbox and its volumes, a suspend; Delete deletes it.
func (s sandbox) deadlineStep() backend.Step {
	if s.policy == "Delete" {
		return backend.StepDelete
	}
	return backend.StepSuspend
}

// native is the Sandbox's timer. A suspended Sandbox that expiry would
// only suspend has nothing to time.
func (s sandbox) native() *backend.Lifecycle {
	if s.state() == backend.StateSuspended && s.deadlineStep() == backend.StepSuspend {
		return &backend.Lifecycle{}
	}
	return &backend.Lifecycle{Deadline: s.shutdown, DeadlineStep: s.deadlineStep(), Can: []string{backend.TimerDeadline}}
}

func (c *core) runtime(s sandbox) backend.Runtime {
	u := s.u
	rt := backend.Runtime{Key: backend.Key{Backend: Name, ID: u.GetName()}, State: s.state(),
		Labels: maps.Clone(u.GetLabels()), CreatedAt: s.createdAt.UTC(), LastActivity: s.lastT.UTC(),
		StorageBytes: s.requested, Native: s.native()}
	if rt.State == backend.StateRunning && s.ready != nil {
		// The current run began when the pod became ready.
		rt.CreatedAt = s.ready.LastTransitionTime.UTC()
	}
	if len(s.claims) > 0 && c.opts.Archive != ArchiveNone {
		rt.Unsaved = "the volumes " + strings.Join(s.claims, ", ")
	}
	h := sha256.Sum256([]byte(string(u.GetUID()) + "\n" + s.mode + "\n" + strings.Join(s.claims, ",")))
	rt.Fingerprint = hex.EncodeToString(h[:12])
	return rt
}

// List implements backend.Lister.
func (c *core) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	if len(opts.IDs) > 0 {
		var out []backend.Runtime
		for _, id := range opts.IDs {
			s, err := c.fresh(ctx, id)
			if errors.Is(err, backend.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("list agent-sandbox %s: %w", id, err)
			}
			out = append(out, c.runtime(s))
		}
		return out, nil
	}
	if err := c.sandboxes.Ready(ctx, c.opts.ReadyTimeout); err != nil {
		return nil, fmt.Errorf("list agent-sandbox sandboxes: %w", err)
	}
	all := c.sandboxes.All()
	out := make([]backend.Runtime, 0, len(all))
	for _, o := range all {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, c.runtime(parse(u)))
		}
	}
	slices.SortFunc(out, func(a, b backend.Runtime) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// fresh reads one Sandbox from the API server, inside the selector.
func (c *core) fresh(ctx context.Context, name string) (sandbox, error) {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return sandbox{}, fmt.Errorf("sandbox %q: %w", name, backend.ErrNotFound)
	}
	objs, err := c.sandboxes.Fresh(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return sandbox{}, err
	}
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok && u.GetName() == name {
			return parse(u), nil
		}
	}
	return sandbox{}, fmt.Errorf("sandbox %s in namespace %s (%s): %w", name, c.opts.Namespace, c.opts.Selector, backend.ErrNotFound)
}

func (c *core) patch(ctx context.Context, s sandbox, patch string, what string) error {
	_, err := c.client.Dynamic.Resource(Sandboxes).Namespace(c.opts.Namespace).Patch(ctx, s.u.GetName(), types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{})
	return kubeclient.Classify(what, "Sandbox "+s.u.GetName(), err)
}

// Suspend implements backend.Suspender: operatingMode Suspended; the
// controller deletes the pod and keeps the volumes.
func (c *core) Suspend(ctx context.Context, rt backend.Runtime, _ backend.SuspendOptions) error {
	s, err := c.fresh(ctx, rt.ID)
	if err != nil {
		return fmt.Errorf("suspend %s: %w", rt.Key, err)
	}
	if s.mode == "Suspended" {
		return nil
	}
	if err := c.patch(ctx, s, `{"spec":{"operatingMode":"Suspended"}}`, "suspend"); err != nil {
		return fmt.Errorf("suspend %s: %w", rt.Key, err)
	}
	return nil
}

// Delete implements backend.Deleter: the Sandbox, only the one observed
// (its UID), never while it runs; its claims go with it (owner
// references). One already gone is not an error.
func (c *core) Delete(ctx context.Context, rt backend.Runtime, _ backend.DeleteOptions) error {
	s, err := c.fresh(ctx, rt.ID)
	if errors.Is(err, backend.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	if s.state().Active() {
		return fmt.Errorf("delete %s: the sandbox is %s: %w", rt.Key, s.state(), backend.ErrBusy)
	}
	if err := c.sandboxes.Delete(ctx, s.u, metav1.DeletePropagationBackground); err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	return nil
}

// Lifecycle implements backend.NativeLifecycle: spec.shutdownTime. A
// shutdownTime that deletes is only ever moved later: never earlier, never
// set where there is none (that would delete sooner, without an archive).
func (c *core) Lifecycle(ctx context.Context, rt backend.Runtime, opts backend.LifecycleOptions) (backend.Lifecycle, error) {
	var s sandbox
	var cur backend.Lifecycle
	if opts.Current != nil {
		cur = *opts.Current
	} else {
		var err error
		if s, err = c.fresh(ctx, rt.ID); err != nil {
			return backend.Lifecycle{}, fmt.Errorf("read shutdownTime of %s: %w", rt.Key, err)
		}
		cur = *s.native()
	}
	if opts.Set == nil || opts.Set.Deadline.IsZero() || opts.Set.Deadline.Equal(cur.Deadline) {
		return cur, nil
	}
	if !slices.Contains(cur.Can, backend.TimerDeadline) {
		return cur, fmt.Errorf("set shutdownTime of %s: it is suspended and expiry would only suspend it: %w", rt.Key, errors.ErrUnsupported)
	}
	want := opts.Set.Deadline.UTC().Truncate(time.Second)
	if cur.DeadlineStep == backend.StepDelete && (cur.Deadline.IsZero() || want.Before(cur.Deadline)) {
		return cur, fmt.Errorf("set shutdownTime of %s: its shutdownPolicy is Delete; an earlier expiry would delete it sooner without an archive: %w",
			rt.Key, backend.ErrProtected)
	}
	if !want.After(c.now().Add(time.Second)) {
		return cur, fmt.Errorf("set shutdownTime of %s: %s has passed", rt.Key, want.Format(time.RFC3339))
	}
	if s.u == nil {
		var err error
		if s, err = c.fresh(ctx, rt.ID); err != nil {
			return cur, fmt.Errorf("set shutdownTime of %s: %w", rt.Key, err)
		}
	}
	if err := c.patch(ctx, s, fmt.Sprintf(`{"spec":{"shutdownTime":%q}}`, want.Format(time.RFC3339)), "set shutdownTime of"); err != nil {
		return cur, fmt.Errorf("set shutdownTime of %s: %w", rt.Key, err)
	}
	cur.Deadline = want
	return cur, nil
}

// claims reads the Sandbox's claims afresh (a claim not made yet is left
// out).
func (c *core) claims(ctx context.Context, s sandbox) ([]*corev1.PersistentVolumeClaim, error) {
	var out []*corev1.PersistentVolumeClaim
	pvcs := c.client.Typed.CoreV1().PersistentVolumeClaims(c.opts.Namespace)
	for _, name := range s.claims {
		list, err := pvcs.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			return nil, kubeclient.Classify("list", "persistentvolumeclaims", err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// Export implements backend.Exporter: a VolumeSnapshot of each claim of
// the Sandbox, waited for until ready (kubeclient.ExportSnapshots).
func (b *Backend) Export(ctx context.Context, rt backend.Runtime, opts backend.ExportOptions) (backend.Export, error) {
	s, err := b.fresh(ctx, rt.ID)
	if err != nil {
		return backend.Export{}, fmt.Errorf("archive %s: %w", rt.Key, err)
	}
	pvcs, err := b.claims(ctx, s)
	if err != nil {
		return backend.Export{}, fmt.Errorf("archive %s: %w", rt.Key, err)
	}
	return b.client.ExportSnapshots(ctx, kubeclient.Snapshots{Namespace: b.opts.Namespace, Key: rt.Key, Claims: pvcs,
		Class: b.opts.SnapshotClass, Timeout: b.opts.SnapshotTimeout,
		NotKept: []string{"the Sandbox object (its owner recreates it; one of the same name adopts the restored claims)"},
		NoAPI:   `set archive = "none" to delete without`}, opts)
}

// Restore implements backend.Restorer: the claims again, from their
// snapshots, under their names.
func (b *Backend) Restore(ctx context.Context, k backend.Key, opts backend.RestoreOptions) (string, error) {
	return b.client.RestoreClaims(ctx, k, b.opts.Namespace, opts)
}

var (
	_ backend.Backend         = (*Backend)(nil)
	_ backend.Lister          = (*Backend)(nil)
	_ backend.Suspender       = (*Backend)(nil)
	_ backend.Deleter         = (*Backend)(nil)
	_ backend.NativeLifecycle = (*Backend)(nil)
	_ backend.Exporter        = (*Backend)(nil)
	_ backend.Restorer        = (*Backend)(nil)

	_ backend.Backend         = (*NoArchive)(nil)
	_ backend.Lister          = (*NoArchive)(nil)
	_ backend.Suspender       = (*NoArchive)(nil)
	_ backend.Deleter         = (*NoArchive)(nil)
	_ backend.NativeLifecycle = (*NoArchive)(nil)
)

// NativeExplanation: the policy lives in spec.shutdownTime.
func (c *core) NativeExplanation() string {
	return "spec.shutdownTime holds the policy (last activity + idle_suspend, capped by max_lifetime): drift is shown here and native sync repairs it; a lease or hold moves it later; a shutdownTime that deletes is only ever moved later"
}

var _ backend.NativeExplainer = (*Backend)(nil)
