package kubeclient

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// IDIndex is the index of a Kind's cache by the backend's grouping label.
const IDIndex = "id"

// DeleteFunc deletes one object by name.
type DeleteFunc func(ctx context.Context, name string, opts metav1.DeleteOptions) error

// Kind is one kind of object a backend watches (a cache indexed by the
// grouping label), lists afresh (apply's re-observation) and deletes,
// seen through metav1.Object so a backend handles every kind alike.
type Kind struct {
	// Name is the kind ("Deployment"), Resource its resource
	// ("deployments"), for messages and RBAC.
	Name, Resource string

	watched interface {
		Ready(context.Context, time.Duration) error
		Healthy() bool
		Close()
	}
	all    func() []metav1.Object
	byID   func(id string) []metav1.Object
	ids    func() []string
	list   ListFunc
	delete DeleteFunc
}

// ByLabel groups objects by the value of label name ("" when absent).
func ByLabel(name string) func(metav1.Object) string {
	return func(o metav1.Object) string { return o.GetLabels()[name] }
}

// ByName makes each object a runtime of its own.
func ByName(o metav1.Object) string { return o.GetName() }

// NewKind makes a Kind whose cache lists and watches with list and watch
// (already narrowed to the backend's namespace and selector) and is
// indexed by idOf (objects for which it is "" belong to no runtime).
func NewKind[T interface {
	runtime.Object
	metav1.Object
}](name, resource, where string, idOf func(metav1.Object) string, example T, list ListFunc, watch WatchFunc, del DeleteFunc) *Kind {
	w := NewWatched(resource+" "+where, example, list, watch, cache.Indexers{IDIndex: func(obj any) ([]string, error) {
		if o, ok := obj.(metav1.Object); ok {
			if v := idOf(o); v != "" {
				return []string{v}, nil
			}
		}
		return nil, nil
	}})
	return &Kind{Name: name, Resource: resource, watched: w, list: list, delete: del,
		all:  func() []metav1.Object { return objects(w.List()) },
		byID: func(id string) []metav1.Object { return objects(w.ByIndex(IDIndex, id)) },
		ids:  func() []string { return w.IndexValues(IDIndex) },
	}
}

func objects[T metav1.Object](in []T) []metav1.Object {
	out := make([]metav1.Object, len(in))
	for i, o := range in {
		out[i] = o
	}
	return out
}

// Ready waits for the cache (see Watched.Ready).
func (k *Kind) Ready(ctx context.Context, timeout time.Duration) error {
	return k.watched.Ready(ctx, timeout)
}

// Healthy tells whether the cache is synced and watching.
func (k *Kind) Healthy() bool { return k.watched.Healthy() }

// Close stops the cache.
func (k *Kind) Close() { k.watched.Close() }

// All is every cached object.
func (k *Kind) All() []metav1.Object { return k.all() }

// ByID is the cached objects labelled with id.
func (k *Kind) ByID(id string) []metav1.Object { return k.byID(id) }

// IDs are the grouping label's values among the cached objects.
func (k *Kind) IDs() []string { return k.ids() }

// Fresh lists, from the API server rather than the cache, the objects
// that also match opts (its label selector is added to the backend's own).
func (k *Kind) Fresh(ctx context.Context, opts metav1.ListOptions) ([]metav1.Object, error) {
	obj, err := k.list(ctx, opts)
	if err != nil {
		return nil, Classify("list", k.Resource, err)
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Object, 0, len(items))
	for _, it := range items {
		if o, ok := it.(metav1.Object); ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// Delete deletes one object, only if it is still the one seen (its UID).
func (k *Kind) Delete(ctx context.Context, o metav1.Object, policy metav1.DeletionPropagation) error {
	uid := o.GetUID()
	err := k.delete(ctx, o.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy})
	return Classify("delete", k.Name+" "+o.GetName(), err)
}
