package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/kubeclient"
)

// current reads the runtime's objects afresh (every kind with all, see
// fresh); a runtime with none is backend.ErrNotFound.
func (c *core) current(ctx context.Context, rt backend.Runtime, all bool) ([]*kubeclient.Kind, *group, error) {
	kinds, err := c.kinds(ctx)
	if err != nil {
		return nil, nil, err
	}
	g, err := c.fresh(ctx, kinds, rt.ID, all)
	if err != nil {
		return nil, nil, err
	}
	if len(g.objs) == 0 {
		return nil, nil, fmt.Errorf("%s has no objects %s: %w", rt.Key, c.where(), backend.ErrNotFound)
	}
	return kinds, g, nil
}

// Suspend implements backend.Suspender: every Deployment of the runtime
// is scaled to 0 through its /scale subresource; the volume and every
// other object stay. A runtime already at 0 succeeds.
func (c *core) Suspend(ctx context.Context, rt backend.Runtime, _ backend.SuspendOptions) error {
	_, g, err := c.current(ctx, rt, false)
	if err != nil {
		return fmt.Errorf("suspend %s: %w", rt.Key, err)
	}
	deps := g.deployments()
	if len(deps) == 0 {
		return fmt.Errorf("suspend %s: it has no Deployment to scale to 0: %w", rt.Key, errors.ErrUnsupported)
	}
	for _, d := range deps {
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
			continue
		}
		_, err := c.client.Typed.AppsV1().Deployments(c.opts.Namespace).Patch(ctx, d.Name, types.MergePatchType,
			[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}, "scale")
		if err != nil {
			return fmt.Errorf("suspend %s: %w", rt.Key, kubeclient.Classify("scale to 0", "Deployment "+d.Name, err))
		}
	}
	return nil
}

// Delete implements backend.Deleter: every object of the runtime, in the
// runtime-api's order, the volume last and only once no pod uses it.
func (c *core) Delete(ctx context.Context, rt backend.Runtime, _ backend.DeleteOptions) error {
	// Every kind afresh: what is deleted is what the API server has now.
	kinds, g, err := c.current(ctx, rt, true)
	if errors.Is(err, backend.ErrNotFound) {
		return nil // gone already (an earlier, interrupted delete)
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	for _, dep := range g.deployments() {
		if ptrOr(dep.Spec.Replicas, 1) > 0 && dep.Status.ReadyReplicas > 0 {
			return fmt.Errorf("delete %s: Deployment %s has %d ready replicas: %w", rt.Key, dep.Name, dep.Status.ReadyReplicas, backend.ErrBusy)
		}
	}
	pvcs := g.pvcs()
	// A volume another pod uses stops the whole deletion before anything
	// goes: half a runtime is worse than a whole one.
	if users, err := c.volumeUsers(ctx, rt.ID, pvcs); err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	} else if len(users.foreign) > 0 {
		return fmt.Errorf("delete %s: nothing deleted: volume %s: %w", rt.Key, strings.Join(users.foreign, ", "), backend.ErrBusy)
	}
	for _, k := range kinds {
		if k == c.pvcs {
			break
		}
		for _, o := range g.objs[k.Name] {
			if k == c.pods && len(o.GetOwnerReferences()) > 0 {
				continue // its owner's deletion takes it
			}
			if o.GetDeletionTimestamp() != nil {
				continue
			}
			// The workload in the foreground: its pods are deleted before
			// it disappears. Everything else in the background.
			policy := metav1.DeletePropagationBackground
			if k == c.deployments {
				policy = metav1.DeletePropagationForeground
			}
			if err := k.Delete(ctx, o, policy); err != nil && !errors.Is(err, backend.ErrNotFound) {
				return fmt.Errorf("delete %s: %w", rt.Key, err)
			}
		}
	}
	if len(pvcs) == 0 {
		return nil
	}
	if err := c.waitVolumesFree(ctx, rt, pvcs); err != nil {
		return fmt.Errorf("delete %s: its other objects are deleted, its volumes kept: %w", rt.Key, err)
	}
	for _, pvc := range pvcs {
		if pvc.DeletionTimestamp != nil {
			continue
		}
		if err := c.pvcs.Delete(ctx, pvc, metav1.DeletePropagationBackground); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("delete %s: %w", rt.Key, err)
		}
	}
	return nil
}

// users are the pods using a runtime's volumes: its own (ending with
// its Deployment) and any other.
type users struct{ own, foreign []string }

// volumeUsers lists every pod of the namespace, not only the selector's (a
// debugging pod mounting the volume counts too), that has not ended and
// mounts one of the claims.
func (c *core) volumeUsers(ctx context.Context, id string, pvcs []*corev1.PersistentVolumeClaim) (users, error) {
	var u users
	if len(pvcs) == 0 {
		return u, nil
	}
	list, err := c.client.Typed.CoreV1().Pods(c.opts.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return u, kubeclient.Classify("list", "pods of namespace "+c.opts.Namespace, err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if podEnded(p) {
			continue
		}
		for _, pvc := range pvcs {
			if !mounts(p, pvc.Name) {
				continue
			}
			use := fmt.Sprintf("%s is used by pod %s", pvc.Name, p.Name)
			if p.Labels[c.opts.IDLabel] == id {
				u.own = append(u.own, use)
			} else {
				u.foreign = append(u.foreign, use)
			}
		}
	}
	return u, nil
}

// waitVolumesFree waits, at most PodGrace, until no pod mounts one of the
// claims. A volume is never taken from under a pod, and no finalizer is
// removed.
func (c *core) waitVolumesFree(ctx context.Context, rt backend.Runtime, pvcs []*corev1.PersistentVolumeClaim) error {
	deadline := time.Now().Add(c.opts.PodGrace)
	wait := 100 * time.Millisecond
	for {
		u, err := c.volumeUsers(ctx, rt.ID, pvcs)
		if err != nil {
			return err
		}
		inUse := append(u.own, u.foreign...)
		if len(inUse) == 0 {
			return nil
		}
		if len(u.foreign) > 0 || time.Now().After(deadline) {
			return fmt.Errorf("volume %s (waited %s): %w", strings.Join(inUse, ", "), c.opts.PodGrace, backend.ErrBusy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}
