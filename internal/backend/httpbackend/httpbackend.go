package httpbackend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Name is the backend's name in keys.
const Name = "http"

// Operations a server may advertise.
const (
	OpSuspend        = "suspend"
	OpDelete         = "delete"
	OpArchive        = "archive"
	OpLifecycle      = "lifecycle"
	OpLifecycleWrite = "lifecycle_write"
	OpTouch          = "touch"
)

// Backend speaks the http backend protocol to one server.
type Backend struct {
	Client *remote.Client
	// Labels select the runtimes reclaimer manages.
	Labels map[string]string
	// Bounds limit every listing (zero: remote's defaults).
	Bounds remote.Bounds

	mu  sync.Mutex
	ops map[string]bool // nil until read
}

// Name returns "http".
func (b *Backend) Name() string { return Name }

// Capabilities returns the operations the server advertises.
func (b *Backend) Capabilities(ctx context.Context) (map[string]bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ops != nil {
		return b.ops, nil
	}
	var doc struct {
		Protocol   int      `json:"protocol"`
		Operations []string `json:"operations"`
	}
	if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodGet, Path: "/capabilities"}, &doc); err != nil {
		return nil, fmt.Errorf("read capabilities of %s: %w", b.Client.Endpoint(), err)
	}
	if doc.Protocol != 1 {
		return nil, fmt.Errorf("read capabilities of %s: protocol %d, want 1", b.Client.Endpoint(), doc.Protocol)
	}
	ops := map[string]bool{}
	for _, o := range doc.Operations {
		ops[o] = true
	}
	b.ops = ops
	return ops, nil
}

func (b *Backend) need(ctx context.Context, op, verb string) error {
	ops, err := b.Capabilities(ctx)
	if err != nil {
		return err
	}
	if !ops[op] {
		return fmt.Errorf("%s: the server at %s does not support %q: %w", verb, b.Client.Endpoint(), op, errors.ErrUnsupported)
	}
	return nil
}

type runtimeDoc struct {
	ID           string            `json:"id"`
	State        string            `json:"state"`
	LastActivity *time.Time        `json:"last_activity"`
	CreatedAt    *time.Time        `json:"created_at"`
	Labels       map[string]string `json:"labels"`
}

func (r runtimeDoc) runtime() backend.Runtime {
	st := backend.State(r.State)
	switch st {
	case backend.StateRunning, backend.StateStarting, backend.StateStopped, backend.StateSuspended,
		backend.StateArchived, backend.StateDeleted:
	default:
		st = backend.StateUnknown
	}
	rt := backend.Runtime{Key: backend.Key{Backend: Name, ID: r.ID}, State: st, Labels: maps.Clone(r.Labels)}
	if r.LastActivity != nil {
		rt.LastActivity = r.LastActivity.UTC()
	}
	if r.CreatedAt != nil {
		rt.CreatedAt = r.CreatedAt.UTC()
	}
	rt.Fingerprint = r.State + "@" + rt.LastActivity.Format(time.RFC3339Nano)
	return rt
}

func (b *Backend) selector() []string {
	var out []string
	for k, v := range b.Labels {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func runtimePath(id string) string { return "/runtimes/" + url.PathEscape(id) }

// List lists the server's runtimes that match Labels.
func (b *Backend) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	if _, err := b.Capabilities(ctx); err != nil {
		return nil, err
	}
	var docs []runtimeDoc
	if len(opts.IDs) > 0 {
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		for _, id := range opts.IDs {
			wg.Go(func() {
				var d runtimeDoc
				_, err := b.Client.Do(ctx, remote.Request{Method: http.MethodGet, Path: runtimePath(id)}, &d)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, backend.ErrNotFound):
				case err != nil:
					errs = append(errs, fmt.Errorf("get runtime %s: %w", id, err))
				default:
					docs = append(docs, d)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	} else {
		var err error
		inScope := func(d runtimeDoc) bool { return d.ID != "" && remote.MatchLabels(d.Labels, b.Labels) }
		docs, err = remote.Pages(ctx, b.Bounds, inScope, func(ctx context.Context, cursor string) ([]runtimeDoc, string, error) {
			q := url.Values{"limit": {"1000"}}
			if sel := b.selector(); len(sel) > 0 {
				q["label"] = sel
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var page struct {
				Items      []runtimeDoc `json:"items"`
				NextCursor *string      `json:"next_cursor"`
			}
			if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodGet, Path: "/runtimes", Query: q}, &page); err != nil {
				return nil, "", fmt.Errorf("list runtimes of %s: %w", b.Client.Endpoint(), err)
			}
			next := ""
			if page.NextCursor != nil {
				next = *page.NextCursor
			}
			return page.Items, next, nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]backend.Runtime, 0, len(docs))
	seen := map[string]bool{}
	for _, d := range docs {
		if d.ID == "" || seen[d.ID] || !remote.MatchLabels(d.Labels, b.Labels) {
			continue
		}
		seen[d.ID] = true
		rt := d.runtime()
		if len(opts.IDs) > 0 && !rt.State.Present() {
			continue
		}
		out = append(out, rt)
	}
	slices.SortFunc(out, func(a, b backend.Runtime) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out, nil
}

// suspend asks the server to suspend the runtime.
func (b *Backend) suspend(ctx context.Context, rt backend.Runtime, opts backend.SuspendOptions) error {
	if err := b.need(ctx, OpSuspend, "suspend "+rt.ID); err != nil {
		return err
	}
	body := map[string]string{}
	if opts.Reason != "" {
		body["reason"] = opts.Reason
	}
	if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodPost, Path: runtimePath(rt.ID) + "/suspend", Body: body}, nil); err != nil {
		return fmt.Errorf("suspend %s: %w", rt.ID, err)
	}
	return nil
}

// remove removes the runtime; for StepArchive on a server that supports
// it, the server archives it to its own storage instead.
func (b *Backend) remove(ctx context.Context, rt backend.Runtime, opts backend.DeleteOptions) error {
	if err := b.need(ctx, OpDelete, "delete "+rt.ID); err != nil {
		return err
	}
	q := url.Values{}
	if opts.Step == backend.StepArchive {
		if ops, _ := b.Capabilities(ctx); ops[OpArchive] {
			q.Set("mode", "archive")
		}
	}
	_, err := b.Client.Do(ctx, remote.Request{Method: http.MethodDelete, Path: runtimePath(rt.ID), Query: q}, nil)
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("delete %s: %w", rt.ID, err)
	}
	return nil
}

type lifecycleDoc struct {
	IdleSuspend    *int64     `json:"idle_suspend_seconds,omitempty"`
	Archive        *int64     `json:"archive_seconds,omitempty"`
	Delete         *int64     `json:"delete_seconds,omitempty"`
	Deadline       *time.Time `json:"deadline,omitempty"`
	DeadlineAction string     `json:"deadline_action,omitempty"`
	Changeable     []string   `json:"changeable,omitempty"`
}

func seconds(p *int64) time.Duration {
	if p == nil || *p <= 0 {
		return 0
	}
	return time.Duration(*p) * time.Second
}

func (d lifecycleDoc) lifecycle(write, touch bool) backend.Lifecycle {
	l := backend.Lifecycle{IdleSuspend: seconds(d.IdleSuspend), Archive: seconds(d.Archive), Delete: seconds(d.Delete)}
	if d.Delete != nil && *d.Delete == -1 {
		l.Delete = backend.Immediately
	}
	if d.Deadline != nil {
		l.Deadline = d.Deadline.UTC()
		l.DeadlineStep = backend.StepSuspend
		if d.DeadlineAction == "delete" {
			l.DeadlineStep = backend.StepDelete
		}
	}
	if write {
		l.Can = append(l.Can, d.Changeable...)
	}
	if touch {
		l.Can = append(l.Can, backend.TimerTouch)
	}
	return l
}

func secondsOf(d time.Duration) *int64 {
	v := int64(0)
	switch {
	case d == backend.Immediately:
		v = -1
	case d > 0:
		v = int64((d + time.Second - 1) / time.Second)
	}
	return &v
}

// lifecycle reads, writes and touches the runtime's native timers, as far
// as the server advertises them.
func (b *Backend) lifecycle(ctx context.Context, rt backend.Runtime, opts backend.LifecycleOptions) (backend.Lifecycle, error) {
	if err := b.need(ctx, OpLifecycle, "read timers of "+rt.ID); err != nil {
		return backend.Lifecycle{}, err
	}
	ops, _ := b.Capabilities(ctx)
	var cur backend.Lifecycle
	if opts.Current != nil {
		cur = *opts.Current
	} else {
		var doc lifecycleDoc
		if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodGet, Path: runtimePath(rt.ID) + "/lifecycle"}, &doc); err != nil {
			return backend.Lifecycle{}, fmt.Errorf("read timers of %s: %w", rt.ID, err)
		}
		cur = doc.lifecycle(ops[OpLifecycleWrite], ops[OpTouch])
	}
	if opts.Touch {
		if err := b.need(ctx, OpTouch, "record activity of "+rt.ID); err != nil {
			return cur, err
		}
		if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodPost, Path: runtimePath(rt.ID) + "/activity"}, nil); err != nil {
			return cur, fmt.Errorf("record activity of %s: %w", rt.ID, err)
		}
	}
	if opts.Set == nil {
		return cur, nil
	}
	if err := b.need(ctx, OpLifecycleWrite, "set timers of "+rt.ID); err != nil {
		return cur, err
	}
	want, change, n := *opts.Set, lifecycleDoc{}, 0
	can := func(t string) bool { return slices.Contains(cur.Can, t) }
	if want.IdleSuspend != cur.IdleSuspend && can(backend.TimerIdleSuspend) {
		change.IdleSuspend, n = secondsOf(want.IdleSuspend), n+1
	}
	if want.Archive != cur.Archive && can(backend.TimerArchive) {
		change.Archive, n = secondsOf(want.Archive), n+1
	}
	if want.Delete != cur.Delete && can(backend.TimerDelete) {
		change.Delete, n = secondsOf(want.Delete), n+1
	}
	if !want.Deadline.IsZero() && !want.Deadline.Equal(cur.Deadline) && can(backend.TimerDeadline) {
		if cur.DeadlineStep == backend.StepDelete && want.Deadline.Before(cur.Deadline) {
			return cur, fmt.Errorf("set deadline of %s: it deletes at its deadline; an earlier one would delete it sooner without an archive: %w",
				rt.ID, backend.ErrProtected)
		}
		d := want.Deadline.UTC()
		change.Deadline, n = &d, n+1
	}
	if n == 0 {
		return cur, nil
	}
	var got lifecycleDoc
	if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodPut, Path: runtimePath(rt.ID) + "/lifecycle", Body: change}, &got); err != nil {
		return cur, fmt.Errorf("set timers of %s: %w", rt.ID, err)
	}
	return got.lifecycle(ops[OpLifecycleWrite], ops[OpTouch]), nil
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Lister  = (*Backend)(nil)
)
