package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Name is the backend's name in keys.
const Name = "daytona"

// Backend lists and acts on the Daytona sandboxes that match Labels.
type Backend struct {
	Client *remote.Client
	// Labels select the sandboxes reclaimer manages; only these are ever
	// touched.
	Labels map[string]string
	// Bounds limit every listing (zero: remote's defaults).
	Bounds remote.Bounds
}

// Name returns "daytona".
func (b *Backend) Name() string { return Name }

// sandbox is the part of Sandbox and SandboxListItem reclaimer reads.
type sandbox struct {
	ID             string            `json:"id"`
	State          string            `json:"state"`
	Labels         map[string]string `json:"labels"`
	CreatedAt      string            `json:"createdAt"`
	LastActivityAt string            `json:"lastActivityAt"`
	AutoStop       *float64          `json:"autoStopInterval"`
	AutoPause      *float64          `json:"autoPauseInterval"`
	AutoArchive    *float64          `json:"autoArchiveInterval"`
	AutoDelete     *float64          `json:"autoDeleteInterval"`
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// state maps Daytona's states onto reclaimer's.
func state(s string) backend.State {
	switch s {
	case "started":
		return backend.StateRunning
	case "creating", "restoring", "starting", "pulling_snapshot", "pending_build", "building_snapshot", "resuming", "resizing", "snapshotting", "forking":
		return backend.StateStarting
	case "stopped", "stopping", "paused", "pausing":
		return backend.StateSuspended
	case "archived", "archiving":
		return backend.StateArchived
	case "destroyed", "destroying":
		return backend.StateDeleted
	}
	return backend.StateUnknown // error, build_failed, unknown: may still run
}

func (s sandbox) runtime() backend.Runtime {
	native := lifecycleOf(s)
	return backend.Runtime{Key: backend.Key{Backend: Name, ID: s.ID}, State: state(s.State),
		LastActivity: parseTime(s.LastActivityAt), CreatedAt: parseTime(s.CreatedAt), Labels: maps.Clone(s.Labels),
		Fingerprint: s.State + "@" + s.LastActivityAt, Native: &native}
}

// List lists the matching sandboxes.
func (b *Backend) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	if len(opts.IDs) > 0 {
		return b.listIDs(ctx, opts.IDs)
	}
	labels := "{}"
	if len(b.Labels) > 0 {
		j, err := json.Marshal(b.Labels)
		if err != nil {
			return nil, err
		}
		labels = string(j)
	}
	inScope := func(s sandbox) bool { return remote.MatchLabels(s.Labels, b.Labels) }
	sbs, err := remote.Pages(ctx, b.Bounds, inScope, func(ctx context.Context, cursor string) ([]sandbox, string, error) {
		q := url.Values{"limit": {"200"}, "labels": {labels}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Items      []sandbox `json:"items"`
			NextCursor *string   `json:"nextCursor"`
		}
		if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodGet, Path: "/sandbox", Query: q}, &page); err != nil {
			return nil, "", fmt.Errorf("list daytona sandboxes: %w", err)
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
	out := make([]backend.Runtime, 0, len(sbs))
	seen := map[string]bool{}
	for _, s := range sbs {
		if seen[s.ID] || !remote.MatchLabels(s.Labels, b.Labels) {
			continue
		}
		seen[s.ID] = true
		out = append(out, s.runtime())
	}
	return out, nil
}

func (b *Backend) listIDs(ctx context.Context, ids []string) ([]backend.Runtime, error) {
	out := make([]*backend.Runtime, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			s, err := b.get(ctx, id)
			switch {
			case errors.Is(err, backend.ErrNotFound):
			case err != nil:
				errs[i] = err
			case remote.MatchLabels(s.Labels, b.Labels) && state(s.State) != backend.StateDeleted:
				rt := s.runtime()
				out[i] = &rt
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var res []backend.Runtime
	for _, rt := range out {
		if rt != nil {
			res = append(res, *rt)
		}
	}
	return res, nil
}

func sandboxPath(id string) string { return "/sandbox/" + url.PathEscape(id) }

func (b *Backend) get(ctx context.Context, id string) (sandbox, error) {
	var s sandbox
	if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodGet, Path: sandboxPath(id)}, &s); err != nil {
		return sandbox{}, fmt.Errorf("get daytona sandbox %s: %w", id, err)
	}
	return s, nil
}

// Suspend stops the sandbox (disk kept).
func (b *Backend) Suspend(ctx context.Context, rt backend.Runtime, _ backend.SuspendOptions) error {
	if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodPost, Path: sandboxPath(rt.ID) + "/stop"}, nil); err != nil {
		return fmt.Errorf("stop daytona sandbox %s: %w", rt.ID, err)
	}
	return nil
}

// Delete archives the sandbox to cold storage for StepArchive, and deletes
// it otherwise. A sandbox already gone is not an error.
func (b *Backend) Delete(ctx context.Context, rt backend.Runtime, opts backend.DeleteOptions) error {
	if opts.Step == backend.StepArchive {
		if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodPost, Path: sandboxPath(rt.ID) + "/archive"}, nil); err != nil {
			return fmt.Errorf("archive daytona sandbox %s: %w", rt.ID, err)
		}
		return nil
	}
	_, err := b.Client.Do(ctx, remote.Request{Method: http.MethodDelete, Path: sandboxPath(rt.ID)}, nil)
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("delete daytona sandbox %s: %w", rt.ID, err)
	}
	return nil
}

func minutes(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}

func lifecycleOf(s sandbox) backend.Lifecycle {
	l := backend.Lifecycle{Can: []string{backend.TimerIdleSuspend, backend.TimerIdlePause, backend.TimerArchive, backend.TimerDelete, backend.TimerTouch}}
	if m := minutes(s.AutoStop); m > 0 {
		l.IdleSuspend = time.Duration(m * float64(time.Minute))
	}
	if m := minutes(s.AutoPause); m > 0 {
		l.IdlePause = time.Duration(m * float64(time.Minute))
	}
	if m := minutes(s.AutoArchive); m > 0 {
		l.Archive = time.Duration(m * float64(time.Minute))
	}
	switch m := s.AutoDelete; {
	case m == nil || *m < 0:
	case *m == 0:
		l.Delete = backend.Immediately
	default:
		l.Delete = time.Duration(*m * float64(time.Minute))
	}
	return l
}

// toMinutes rounds a duration up to whole minutes, at least 1.
func toMinutes(d time.Duration) int64 {
	return max(1, int64((d+time.Minute-1)/time.Minute))
}

// Lifecycle reads the intervals, writes those of opts.Set that differ, and
// records activity when opts.Touch is set.
func (b *Backend) Lifecycle(ctx context.Context, rt backend.Runtime, opts backend.LifecycleOptions) (backend.Lifecycle, error) {
	var cur backend.Lifecycle
	if opts.Current != nil {
		cur = *opts.Current // from a listing, which applied the selector
	} else {
		s, err := b.get(ctx, rt.ID)
		if err != nil {
			return backend.Lifecycle{}, err
		}
		if !remote.MatchLabels(s.Labels, b.Labels) {
			return backend.Lifecycle{}, fmt.Errorf("daytona sandbox %s is outside the label selector: %w", rt.ID, backend.ErrNotFound)
		}
		cur = lifecycleOf(s)
	}
	if opts.Touch {
		if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodPost, Path: sandboxPath(rt.ID) + "/last-activity",
			Body: map[string]string{"activityType": "reclaimer-lease"}}, nil); err != nil {
			return cur, fmt.Errorf("record activity of daytona sandbox %s: %w", rt.ID, err)
		}
	}
	if opts.Set == nil {
		return cur, nil
	}
	want := *opts.Set
	set := func(what string, value int64) error {
		path := sandboxPath(rt.ID) + "/" + what + "/" + strconv.FormatInt(value, 10)
		var got sandbox
		if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodPost, Path: path}, &got); err != nil {
			return fmt.Errorf("set %s of daytona sandbox %s: %w", what, rt.ID, err)
		}
		cur = lifecycleOf(got)
		return nil
	}
	if want.IdleSuspend != cur.IdleSuspend {
		v := int64(0) // 0: disabled
		if want.IdleSuspend > 0 {
			v = toMinutes(want.IdleSuspend)
		}
		if err := set("autostop", v); err != nil {
			return cur, err
		}
	}
	if want.IdlePause != cur.IdlePause {
		v := int64(0) // 0: disabled
		if want.IdlePause > 0 {
			v = toMinutes(want.IdlePause)
		}
		if err := set("autopause", v); err != nil {
			return cur, err
		}
	}
	if want.Archive != cur.Archive {
		v := int64(0) // 0: the provider's maximum, "never"
		if want.Archive > 0 {
			v = toMinutes(want.Archive)
		}
		if err := set("autoarchive", v); err != nil {
			return cur, err
		}
	}
	if want.Delete != cur.Delete {
		v := int64(-1) // negative: disabled
		switch {
		case want.Delete == backend.Immediately:
			v = 0
		case want.Delete > 0:
			v = toMinutes(want.Delete)
		}
		if err := set("autodelete", v); err != nil {
			return cur, err
		}
	}
	return cur, nil
}

var (
	_ backend.Backend         = (*Backend)(nil)
	_ backend.Lister          = (*Backend)(nil)
	_ backend.Suspender       = (*Backend)(nil)
	_ backend.Deleter         = (*Backend)(nil)
	_ backend.NativeLifecycle = (*Backend)(nil)
)
