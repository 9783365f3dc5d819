package e2b

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Name is the backend's name in keys.
const Name = "e2b"

// MaxTimeout is the longest timeout E2B accepts (24 hours on the Pro plan);
// a wanted deadline further away is written as this and refreshed on later
// passes.
const MaxTimeout = 24 * time.Hour

// Backend lists and acts on the E2B sandboxes that match Metadata.
type Backend struct {
	Client *remote.Client
	// Metadata selects the sandboxes reclaimer manages: every key and value
	// must match. Only these are ever touched.
	Metadata map[string]string
	// Bounds limit every listing (zero: remote's defaults).
	Bounds remote.Bounds
	// Now is the clock; default time.Now.
	Now func() time.Time

	// onTimeout remembers, per sandbox, what E2B does at its timeout
	// (fixed at creation), so that later listings carry the timers
	// (Runtime.Native) without a request per sandbox.
	onTimeout sync.Map // id → backend.Step
}

// Name returns "e2b".
func (b *Backend) Name() string { return Name }

func (b *Backend) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// sandbox is what both GET /v2/sandboxes and GET /sandboxes/{id} return.
type sandbox struct {
	SandboxID string            `json:"sandboxID"`
	Template  string            `json:"templateID"`
	StartedAt time.Time         `json:"startedAt"`
	EndAt     time.Time         `json:"endAt"`
	State     string            `json:"state"`
	Metadata  map[string]string `json:"metadata"`
	Lifecycle *struct {
		OnTimeout string `json:"onTimeout"`
	} `json:"lifecycle"`
}

// timeoutStep says what E2B does at the timeout. A sandbox that does not
// say is taken as killed: its deadline is then only ever extended.
func (s sandbox) timeoutStep() backend.Step {
	if s.Lifecycle != nil && s.Lifecycle.OnTimeout == "pause" {
		return backend.StepSuspend
	}
	return backend.StepDelete
}

// native returns the timers of a listed sandbox when its timeout step is
// known, nil otherwise.
func (b *Backend) native(s sandbox) *backend.Lifecycle {
	if s.State != "running" {
		return &backend.Lifecycle{} // a paused sandbox's timer does not run
	}
	step, ok := b.onTimeout.Load(s.SandboxID)
	if !ok {
		return nil
	}
	return &backend.Lifecycle{Deadline: s.EndAt.UTC(), DeadlineStep: step.(backend.Step), Can: []string{backend.TimerDeadline}}
}

func (s sandbox) runtime() backend.Runtime {
	state := backend.StateUnknown
	switch s.State {
	case "running":
		state = backend.StateRunning
	case "paused":
		state = backend.StateSuspended
	}
	// E2B reports no activity. Its start (or resume) is the one use it
	// vouches for; anything newer comes from the ledger. Without this floor
	// a sandbox nobody reported on would never count as idle.
	return backend.Runtime{Key: backend.Key{Backend: Name, ID: s.SandboxID}, State: state,
		LastActivity: s.StartedAt.UTC(), CreatedAt: s.StartedAt.UTC(), Labels: maps.Clone(s.Metadata), Fingerprint: s.State}
}

// metadataQuery encodes the selector as E2B's metadata parameter: a query
// string of its own, "k1=v1&k2=v2", keys sorted.
func (b *Backend) metadataQuery() string {
	v := url.Values{}
	keys := make([]string, 0, len(b.Metadata))
	for k := range b.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v.Set(k, b.Metadata[k])
	}
	return v.Encode()
}

// List lists the matching sandboxes, running and paused.
func (b *Backend) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	if len(opts.IDs) > 0 {
		return b.listIDs(ctx, opts.IDs)
	}
	// The provider filters by metadata; checking each page again keeps a
	// filter it ignored from widening what reclaimer touches, or what it
	// holds in memory while paging.
	inScope := func(s sandbox) bool { return remote.MatchLabels(s.Metadata, b.Metadata) }
	sbs, err := remote.Pages(ctx, b.Bounds, inScope, func(ctx context.Context, cursor string) ([]sandbox, string, error) {
		q := url.Values{"state": {"running,paused"}, "limit": {"100"}}
		if m := b.metadataQuery(); m != "" {
			q.Set("metadata", m)
		}
		if cursor != "" {
			q.Set("nextToken", cursor)
		}
		var page []sandbox
		h, err := b.Client.Do(ctx, remote.Request{Method: http.MethodGet, Path: "/v2/sandboxes", Query: q}, &page)
		if err != nil {
			return nil, "", fmt.Errorf("list e2b sandboxes: %w", err)
		}
		return page, h.Get("X-Next-Token"), nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]backend.Runtime, 0, len(sbs))
	seen := map[string]bool{}
	for _, s := range sbs {
		// The provider filtered already; checking again keeps a filter it
		// ignored from widening what reclaimer touches.
		if seen[s.SandboxID] || !remote.MatchLabels(s.Metadata, b.Metadata) {
			continue
		}
		seen[s.SandboxID] = true
		rt := s.runtime()
		rt.Native = b.native(s)
		out = append(out, rt)
	}
	// Forget the sandboxes that are gone, so a long-running process does
	// not keep every ID it ever saw.
	b.onTimeout.Range(func(id, _ any) bool {
		if !seen[id.(string)] {
			b.onTimeout.Delete(id)
		}
		return true
	})
	return out, nil
}

// listIDs reads each sandbox; one that is gone or outside the selector is
// left out (the engine then sees it as gone).
func (b *Backend) listIDs(ctx context.Context, ids []string) ([]backend.Runtime, error) {
	out := make([]backend.Runtime, len(ids))
	errs := make([]error, len(ids))
	found := make([]bool, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			s, err := b.get(ctx, id)
			switch {
			case errors.Is(err, backend.ErrNotFound):
			case err != nil:
				errs[i] = err
			case remote.MatchLabels(s.Metadata, b.Metadata):
				out[i], found[i] = s.runtime(), true
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var res []backend.Runtime
	for i := range out {
		if found[i] {
			res = append(res, out[i])
		}
	}
	return res, nil
}

func (b *Backend) get(ctx context.Context, id string) (sandbox, error) {
	var s sandbox
	_, err := b.Client.Do(ctx, remote.Request{Method: http.MethodGet, Path: "/sandboxes/" + url.PathEscape(id)}, &s)
	if err != nil {
		return sandbox{}, fmt.Errorf("get e2b sandbox %s: %w", id, err)
	}
	b.onTimeout.Store(s.SandboxID, s.timeoutStep())
	return s, nil
}

// Suspend pauses a running sandbox (memory and files kept). Pausing one
// that is already paused succeeds.
func (b *Backend) Suspend(ctx context.Context, rt backend.Runtime, _ backend.SuspendOptions) error {
	_, err := b.Client.Do(ctx, remote.Request{Method: http.MethodPost, Path: "/sandboxes/" + url.PathEscape(rt.ID) + "/pause"}, nil)
	if errors.Is(err, backend.ErrConflict) {
		if s, gerr := b.get(ctx, rt.ID); gerr == nil && s.State == "paused" {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("pause e2b sandbox %s: %w", rt.ID, err)
	}
	return nil
}

// Delete kills the sandbox: its files are gone. E2B keeps no archive, so
// StepArchive kills too; policy only gets here after the notice and grace.
// A sandbox already gone is not an error.
func (b *Backend) Delete(ctx context.Context, rt backend.Runtime, _ backend.DeleteOptions) error {
	_, err := b.Client.Do(ctx, remote.Request{Method: http.MethodDelete, Path: "/sandboxes/" + url.PathEscape(rt.ID)}, nil)
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("kill e2b sandbox %s: %w", rt.ID, err)
	}
	return nil
}

// Lifecycle reads the sandbox's timeout (Deadline, with DeadlineStep
// suspend for auto-pause or delete for kill) or moves it. Only a running
// sandbox has a timer that runs; a paused one reports none.
func (b *Backend) Lifecycle(ctx context.Context, rt backend.Runtime, opts backend.LifecycleOptions) (backend.Lifecycle, error) {
	var cur backend.Lifecycle
	running := false
	if opts.Current != nil {
		// From a listing, which applied the selector.
		cur, running = *opts.Current, !opts.Current.Deadline.IsZero()
	} else {
		s, err := b.get(ctx, rt.ID)
		if err != nil {
			return backend.Lifecycle{}, err
		}
		if !remote.MatchLabels(s.Metadata, b.Metadata) {
			return backend.Lifecycle{}, fmt.Errorf("e2b sandbox %s is outside the metadata selector: %w", rt.ID, backend.ErrNotFound)
		}
		if running = s.State == "running"; running {
			cur = backend.Lifecycle{Deadline: s.EndAt.UTC(), DeadlineStep: s.timeoutStep(), Can: []string{backend.TimerDeadline}}
		}
	}
	if opts.Set == nil || opts.Set.Deadline.IsZero() || opts.Set.Deadline.Equal(cur.Deadline) {
		return cur, nil
	}
	if !running {
		return cur, fmt.Errorf("set timeout of e2b sandbox %s: it is paused; its timer runs only while it runs: %w", rt.ID, errors.ErrUnsupported)
	}
	if cur.DeadlineStep == backend.StepDelete && opts.Set.Deadline.Before(cur.Deadline) {
		return cur, fmt.Errorf("set timeout of e2b sandbox %s: E2B kills it at its timeout; an earlier one would delete it sooner without an archive: %w",
			rt.ID, backend.ErrProtected)
	}
	d := opts.Set.Deadline.Sub(b.now())
	if d < time.Second {
		return cur, fmt.Errorf("set timeout of e2b sandbox %s: the deadline %s has passed", rt.ID, opts.Set.Deadline.UTC().Format(time.RFC3339))
	}
	d = min(d, MaxTimeout)
	secs := int64((d + time.Second - 1) / time.Second)
	_, err := b.Client.Do(ctx, remote.Request{Method: http.MethodPost, Path: "/sandboxes/" + url.PathEscape(rt.ID) + "/timeout",
		Body: map[string]int64{"timeout": secs}}, nil)
	if err != nil {
		return cur, fmt.Errorf("set timeout of e2b sandbox %s: %w", rt.ID, err)
	}
	cur.Deadline = b.now().Add(time.Duration(secs) * time.Second).UTC()
	return cur, nil
}

// String names the backend and its selector in messages.
func (b *Backend) String() string {
	return fmt.Sprintf("e2b at %s (metadata %s)", b.Client.Endpoint(), strings.ReplaceAll(b.metadataQuery(), "&", ", "))
}

var (
	_ backend.Backend         = (*Backend)(nil)
	_ backend.Lister          = (*Backend)(nil)
	_ backend.Suspender       = (*Backend)(nil)
	_ backend.Deleter         = (*Backend)(nil)
	_ backend.NativeLifecycle = (*Backend)(nil)
)
