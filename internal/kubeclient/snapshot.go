package kubeclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
)

// Labels and annotations reclaimer puts on the snapshots it takes. They do
// not carry the runtime's id label: a snapshot is the archive, not part of
// the runtime, and deleting the runtime leaves it.
const (
	ArchiveLabel      = "reclaimer.io/archive"       // a hash of the runtime's id
	RuntimeAnnotation = "reclaimer.io/runtime"       // the runtime's id
	VolumeAnnotation  = "reclaimer.io/volume"        // the claim it was taken of
	SnapshotAPI       = "snapshot.storage.k8s.io/v1" // for messages
)

// VolumeSnapshots is the snapshot API's resource.
var VolumeSnapshots = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}

// Snapshots say what to archive: the claims of one runtime.
type Snapshots struct {
	Namespace string
	// Key is the runtime's; Claims its volumes, read afresh.
	Key    backend.Key
	Claims []*corev1.PersistentVolumeClaim
	// Class is the VolumeSnapshotClass (empty: the cluster's default);
	// Timeout bounds the wait for every snapshot to be ready.
	Class   string
	Timeout time.Duration
	// NotKept says what of the runtime the snapshots leave out.
	NotKept []string
	// NoAPI is said when the cluster serves no snapshot API (what to set
	// to delete without).
	NoAPI string
}

// ExportSnapshots is a Kubernetes runtime's archive: a VolumeSnapshot of
// each claim, each waited for until status.readyToUse is true (at most
// s.Timeout), then a manifest naming them stored in the archive storage
// and read back. When the cluster serves no snapshot API, or a snapshot
// fails or is not ready in time, the export fails, the snapshots it took
// are deleted again, and the runtime is to stay as it is.
func (c *Client) ExportSnapshots(ctx context.Context, s Snapshots, opts backend.ExportOptions) (backend.Export, error) {
	fail := func(err error) (backend.Export, error) {
		return backend.Export{}, fmt.Errorf("archive %s: %w", s.Key, err)
	}
	ok, err := c.Serves(ctx, VolumeSnapshots)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(fmt.Errorf("the cluster serves no VolumeSnapshot API (%s): its volumes cannot be archived, so it is kept"+
			" (install the snapshot CRDs and a CSI snapshot controller, or %s)", SnapshotAPI, s.NoAPI))
	}
	pvcs := s.Claims
	snaps := c.Dynamic.Resource(VolumeSnapshots).Namespace(s.Namespace)
	var taken []archive.VolumeSnapshot
	cleanup := func() {
		// What a failed export took would only cost storage.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, s := range taken {
			_ = snaps.Delete(dctx, s.Name, metav1.DeleteOptions{})
		}
	}
	stamp := opts.CreatedAt.UTC().Format("20060102t150405z")
	for _, pvc := range pvcs {
		name := snapshotName(pvc.Name, stamp)
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": SnapshotAPI, "kind": "VolumeSnapshot",
			"metadata": map[string]any{"name": name, "namespace": s.Namespace,
				"labels":      map[string]any{ArchiveLabel: idHash(s.Key.ID)},
				"annotations": map[string]any{RuntimeAnnotation: s.Key.ID, VolumeAnnotation: pvc.Name}},
			"spec": map[string]any{"source": map[string]any{"persistentVolumeClaimName": pvc.Name}},
		}}
		if s.Class != "" {
			_ = unstructured.SetNestedField(u.Object, s.Class, "spec", "volumeSnapshotClassName")
		}
		if _, err := snaps.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			cleanup()
			return fail(Classify("create", "VolumeSnapshot "+name, err))
		}
		v := archive.VolumeSnapshot{Namespace: s.Namespace, Name: name, Volume: pvc.Name, Class: s.Class}
		if pvc.Spec.StorageClassName != nil {
			v.StorageClass = *pvc.Spec.StorageClassName
		}
		for _, m := range pvc.Spec.AccessModes {
			v.AccessModes = append(v.AccessModes, string(m))
		}
		if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			v.Requested = q.String()
		}
		taken = append(taken, v)
	}
	wctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	for i := range taken {
		if err := c.waitReady(wctx, s.Namespace, s.Timeout, &taken[i]); err != nil {
			cleanup()
			return fail(err)
		}
	}
	req := archive.Request{Sink: opts.Sink, Base: opts.Name, Runtime: s.Key.ID, Backend: s.Key.Backend,
		Conversations: opts.Conversations, CreatedAt: opts.CreatedAt, Staging: opts.Dir, Snapshots: taken,
		NotKept: s.NotKept}
	if len(taken) == 0 {
		req.NotKept = append(req.NotKept, "nothing else: the runtime has no volume")
	}
	m, err := archive.ExportFolders(ctx, req, nil)
	if err != nil {
		cleanup()
		return fail(err)
	}
	exp := m.BackendExport()
	exp.Formats = []string{"volumesnapshot"}
	exp.Restore = "reclaimer restore " + s.Key.String()
	return exp, nil
}

// snapshotName is "<claim>-<stamp>", cut to fit a name with a hash kept.
func snapshotName(claim, stamp string) string {
	name := claim + "-" + stamp
	if len(name) <= 253 {
		return name
	}
	return claim[:253-len(stamp)-10] + "-" + idHash(claim)[:8] + "-" + stamp
}

// idHash fits any runtime id into a label value.
func idHash(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])[:40]
}

// waitReady watches one snapshot until it is ready to use, reports an
// error, or ctx ends.
func (c *Client) waitReady(ctx context.Context, namespace string, timeout time.Duration, v *archive.VolumeSnapshot) error {
	snaps := c.Dynamic.Resource(VolumeSnapshots).Namespace(namespace)
	sel := fields.OneTermEqualSelector("metadata.name", v.Name).String()
	notReady := func(why string) error {
		return fmt.Errorf("VolumeSnapshot %s of volume %s not ready within %s (%s): the runtime is kept",
			v.Name, v.Volume, timeout, why)
	}
	last := "no status yet"
	for {
		list, err := snaps.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			if ctx.Err() != nil {
				return notReady(last)
			}
			return Classify("read", "VolumeSnapshot "+v.Name, err)
		}
		for _, it := range list.Items {
			done, why, err := snapshotStatus(&it, v)
			if done || err != nil {
				return err
			}
			last = why
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("VolumeSnapshot %s of volume %s disappeared: the runtime is kept", v.Name, v.Volume)
		}
		w, err := snaps.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			if ctx.Err() != nil {
				return notReady(last)
			}
			return Classify("watch", "VolumeSnapshot "+v.Name, err)
		}
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			done, why, err := snapshotStatus(u, v)
			if done || err != nil {
				w.Stop()
				return err
			}
			last = why
		}
		w.Stop()
		if ctx.Err() != nil {
			return notReady(last)
		}
		// The watch ended (a timeout, a restart): list and watch again.
	}
}

// snapshotStatus reads a snapshot's status into v: done when ready to use,
// an error when the snapshot controller reports one.
func snapshotStatus(u *unstructured.Unstructured, v *archive.VolumeSnapshot) (bool, string, error) {
	if msg, ok, _ := unstructured.NestedString(u.Object, "status", "error", "message"); ok && msg != "" {
		return false, "", fmt.Errorf("VolumeSnapshot %s of volume %s failed: %s: the runtime is kept", v.Name, v.Volume, msg)
	}
	ready, _, _ := unstructured.NestedBool(u.Object, "status", "readyToUse")
	if !ready {
		return false, "readyToUse is not true", nil
	}
	v.Content, _, _ = unstructured.NestedString(u.Object, "status", "boundVolumeSnapshotContentName")
	switch rs := nestedAny(u.Object, "status", "restoreSize").(type) {
	case string:
		v.RestoreSize = rs
	case int64:
		v.RestoreSize = fmt.Sprint(rs)
	}
	return true, "", nil
}

func nestedAny(obj map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	return v
}

// RestoreClaims brings back the volumes of an archive ExportSnapshots
// wrote: a new claim from each snapshot (spec.dataSource), with the old
// claim's storage class and access modes and at least its size, in
// namespace (the source's). The claims are named as the old ones (opts.To
// empty) or "<To>-<old name>"; an existing claim is never replaced. The
// runtime's other objects are its owner's to recreate.
func (c *Client) RestoreClaims(ctx context.Context, k backend.Key, namespace string, opts backend.RestoreOptions) (string, error) {
	m, err := archive.ParseManifest(opts.Manifest)
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	if len(m.Snapshots) == 0 {
		return "", fmt.Errorf("restore %s: the archive holds no volume snapshot: %w", k, errors.ErrUnsupported)
	}
	claims := c.Typed.CoreV1().PersistentVolumeClaims(namespace)
	var made []string
	for _, v := range m.Snapshots {
		if v.Namespace != namespace {
			return "", fmt.Errorf("restore %s: snapshot %s is in namespace %s, the source's is %s", k, v.Name, v.Namespace, namespace)
		}
		name := v.Volume
		if opts.To != "" {
			name = opts.To + "-" + v.Volume
		}
		size := v.Requested
		if rs, err := resource.ParseQuantity(v.RestoreSize); err == nil {
			if req, err := resource.ParseQuantity(size); err != nil || rs.Cmp(req) > 0 {
				size = rs.String()
			}
		}
		q, err := resource.ParseQuantity(size)
		if err != nil {
			return "", fmt.Errorf("restore %s: the archive records no size for volume %s", k, v.Volume)
		}
		group := "snapshot.storage.k8s.io"
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
				Annotations: map[string]string{RuntimeAnnotation: k.ID, "reclaimer.io/restored-from": v.Name}},
			Spec: corev1.PersistentVolumeClaimSpec{
				DataSource: &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: v.Name},
				Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
			},
		}
		for _, am := range v.AccessModes {
			pvc.Spec.AccessModes = append(pvc.Spec.AccessModes, corev1.PersistentVolumeAccessMode(am))
		}
		if len(pvc.Spec.AccessModes) == 0 {
			pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		}
		if v.StorageClass != "" {
			sc := v.StorageClass
			pvc.Spec.StorageClassName = &sc
		}
		if _, err := claims.Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			return strings.Join(made, ", "), fmt.Errorf("restore %s: %w", k, Classify("create", "PersistentVolumeClaim "+name, err))
		}
		made = append(made, fmt.Sprintf("PersistentVolumeClaim %s/%s (from VolumeSnapshot %s)", namespace, name, v.Name))
	}
	return strings.Join(made, ", "), nil
}
