package kubeclient

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListFunc and WatchFunc are a kind's list and watch calls, already
// narrowed to a namespace and selector.
type (
	ListFunc  func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	WatchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
)

// DefaultReadyTimeout bounds how long Ready waits for a first sync or a
// broken watch to heal.
const DefaultReadyTimeout = 15 * time.Second

// Watched is an informer's cache of one kind, with its health.
type Watched[T runtime.Object] struct {
	// What names it in errors: "deployments in runtime-pods".
	What string

	informer cache.SharedIndexInformer
	once     sync.Once
	stop     context.CancelFunc

	mu     sync.Mutex
	broken error     // the last list or watch failure, nil once one succeeds
	since  time.Time // when it broke
}

// NewWatched makes the cache; it sends nothing until Start or Ready.
func NewWatched[T runtime.Object](what string, example T, list ListFunc, watchFn WatchFunc, indexers cache.Indexers) *Watched[T] {
	w := &Watched[T]{What: what}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			obj, err := list(ctx, opts)
			w.mark(err)
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			wi, err := watchFn(ctx, opts)
			w.mark(err)
			return wi, err
		},
	}
	w.informer = cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{Indexers: indexers,
		ObjectDescription: what})
	_ = w.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) { w.mark(err) })
	return w
}

func (w *Watched[T]) mark(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
		w.broken = nil
	case w.broken == nil:
		w.broken, w.since = err, time.Now()
	default:
		w.broken = err
	}
}

// Start runs the informer until Close.
func (w *Watched[T]) Start() {
	w.once.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		w.stop = cancel
		go w.informer.RunWithContext(ctx)
	})
}

// Close stops the informer.
func (w *Watched[T]) Close() {
	w.Start() // so that stop is set and a later Start does nothing
	w.stop()
}

// Ready starts the informer if needed and waits, at most timeout, until
// it has listed once and its watch is not broken.
func (w *Watched[T]) Ready(ctx context.Context, timeout time.Duration) error {
	w.Start()
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		w.mu.Lock()
		broken, since := w.broken, w.since
		w.mu.Unlock()
		if broken == nil && w.informer.HasSynced() {
			return nil
		}
		if apierrors.IsForbidden(broken) || apierrors.IsUnauthorized(broken) {
			// Waiting will not grant the right.
			return Classify("list and watch", w.What, broken)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			if broken != nil {
				return fmt.Errorf("read %s: failing since %s: %w", w.What, since.UTC().Format(time.RFC3339), broken)
			}
			return fmt.Errorf("read %s: not listed after %s", w.What, timeout)
		case <-tick.C:
		}
	}
}

// Healthy tells whether the cache has listed once and its watch is not
// broken: what it holds is as current as a watch makes it.
func (w *Watched[T]) Healthy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.broken == nil && w.informer.HasSynced()
}

// List is every cached object.
func (w *Watched[T]) List() []T { return typed[T](w.informer.GetStore().List()) }

// ByIndex is the cached objects whose index name has value.
func (w *Watched[T]) ByIndex(name, value string) []T {
	objs, err := w.informer.GetIndexer().ByIndex(name, value)
	if err != nil {
		return nil
	}
	return typed[T](objs)
}

// IndexValues are the values index name holds.
func (w *Watched[T]) IndexValues(name string) []string {
	return w.informer.GetIndexer().ListIndexFuncValues(name)
}

// OnChange calls f with each object added, changed or deleted after the
// first listing.
func (w *Watched[T]) OnChange(f func(obj T)) error {
	call := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if t, ok := obj.(T); ok {
			f(t)
		}
	}
	_, err := w.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if !isInInitialList {
				call(obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			// A relist after a broken watch delivers every object again.
			if o, ok := old.(metav1.Object); ok {
				if n, ok := obj.(metav1.Object); ok && o.GetResourceVersion() == n.GetResourceVersion() {
					return
				}
			}
			call(obj)
		},
		DeleteFunc: call,
	})
	return err
}

func typed[T runtime.Object](objs []any) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
