package openhandscloud

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Name is the backend's name in keys.
const Name = "openhands-cloud"

// OpenHands' documented server-wide defaults (RUNTIME_IDLE_SECONDS 1200,
// RUNTIME_DEAD_SECONDS 60 days).
const (
	DefaultServerIdlePause = 20 * time.Minute
	DefaultServerDelete    = 60 * 24 * time.Hour
)

// Backend lists and acts on the OpenHands sandboxes within its scope.
type Backend struct {
	Client *remote.Client
	// UserID, when set, keeps only sandboxes, and conversations on them,
	// created by this user.
	UserID string
	// Bounds limit every listing (zero: remote's defaults).
	Bounds remote.Bounds
	// ConversationTags, when set, keeps only sandboxes whose every
	// conversation carries all these tags.
	ConversationTags map[string]string
	// DeleteConversations removes a sandbox by deleting its conversations
	// (the gentle path) instead of deleting the sandbox.
	DeleteConversations bool
	// ServerIdlePause and ServerDelete are the server's own idle pause and
	// deletion age, as configured there (zero: OpenHands' defaults;
	// negative: off).
	ServerIdlePause, ServerDelete time.Duration

	// known holds the sandboxes the last listings found, so that reading
	// the server-wide timers of one that went is ErrNotFound without a
	// request.
	known sync.Map // id → struct{}
}

// Name returns "openhands-cloud".
func (b *Backend) Name() string { return Name }

type exposedURL struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// sandbox is the part of SandboxInfo read here.
type sandbox struct {
	ID         string       `json:"id"`
	User       *string      `json:"created_by_user_id"`
	Status     string       `json:"status"`
	SessionKey *string      `json:"session_api_key"`
	Exposed    []exposedURL `json:"exposed_urls"`
	CreatedAt  time.Time    `json:"created_at"`
}

// conversation is the part of AppConversation read here.
type conversation struct {
	ID        string            `json:"id"`
	User      *string           `json:"created_by_user_id"`
	SandboxID string            `json:"sandbox_id"`
	Tags      map[string]string `json:"tags"`
	UpdatedAt time.Time         `json:"updated_at"`
	Execution *string           `json:"execution_status"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// active tells whether a conversation's agent is working or waiting on its
// user right now.
func (c conversation) active() bool {
	switch deref(c.Execution) {
	case "running", "waiting_for_confirmation":
		return true
	}
	return false
}

type page[T any] struct {
	Items []T     `json:"items"`
	Next  *string `json:"next_page_id"`
}

func list[T any](ctx context.Context, c *remote.Client, bounds remote.Bounds, keep func(T) bool, path string, q url.Values, what string) ([]T, error) {
	return remote.Pages(ctx, bounds, keep, func(ctx context.Context, cursor string) ([]T, string, error) {
		qq := maps.Clone(q)
		qq.Set("limit", "100")
		if cursor != "" {
			qq.Set("page_id", cursor)
		}
		var p page[T]
		if _, err := c.Do(ctx, remote.Request{Method: http.MethodGet, Path: path, Query: qq}, &p); err != nil {
			return nil, "", fmt.Errorf("list openhands %s: %w", what, err)
		}
		return p.Items, deref(p.Next), nil
	})
}

// conversations lists the conversations (on sandboxID when set); keep,
// when set, drops while paging those on sandboxes out of scope.
func (b *Backend) conversations(ctx context.Context, sandboxID string, keep func(conversation) bool) ([]conversation, error) {
	q := url.Values{"include_sub_conversations": {"true"}}
	if sandboxID != "" {
		q.Set("sandbox_id__eq", sandboxID)
	}
	return list(ctx, b.Client, b.Bounds, keep, "/api/v1/app-conversations/search", q, "conversations")
}

// inScope tells whether reclaimer may manage s, given the conversations
// on it.
func (b *Backend) inScope(s sandbox, convs []conversation) bool {
	if b.UserID != "" {
		if deref(s.User) != b.UserID {
			return false
		}
		for _, c := range convs {
			if deref(c.User) != b.UserID {
				return false
			}
		}
	}
	if len(b.ConversationTags) > 0 {
		if len(convs) == 0 {
			return false
		}
		for _, c := range convs {
			if !remote.MatchLabels(c.Tags, b.ConversationTags) {
				return false
			}
		}
	}
	return true
}

func state(s string) backend.State {
	switch s {
	case "RUNNING":
		return backend.StateRunning
	case "STARTING":
		return backend.StateStarting
	case "PAUSED":
		return backend.StateSuspended
	case "ERROR":
		// Not serving, files kept: idle, under retention.
		return backend.StateStopped
	case "MISSING":
		return backend.StateMissing
	}
	return backend.StateUnknown
}

// lifecycle is the server-wide native lifecycle.
func (b *Backend) lifecycle() backend.Lifecycle {
	pick := func(d, def time.Duration) time.Duration {
		switch {
		case d == 0:
			return def
		case d < 0:
			return 0
		}
		return d
	}
	return backend.Lifecycle{IdleSuspend: pick(b.ServerIdlePause, DefaultServerIdlePause), Delete: pick(b.ServerDelete, DefaultServerDelete)}
}

func (b *Backend) runtime(s sandbox, convs []conversation) backend.Runtime {
	last := s.CreatedAt.UTC()
	ids := make([]string, 0, len(convs))
	busy := ""
	slices.SortFunc(convs, func(a, c conversation) int { return strings.Compare(a.ID, c.ID) })
	for _, c := range convs {
		ids = append(ids, c.ID)
		if c.UpdatedAt.After(last) {
			last = c.UpdatedAt.UTC()
		}
		if busy == "" && c.active() {
			busy = fmt.Sprintf("conversation %s is %s", c.ID, deref(c.Execution))
		}
	}
	rt := backend.Runtime{Key: backend.Key{Backend: Name, ID: s.ID}, State: state(s.Status), LastActivity: last,
		CreatedAt: s.CreatedAt.UTC(), Busy: busy,
		Labels:      map[string]string{"user": deref(s.User), "status": s.Status},
		Fingerprint: s.Status + "@" + last.Format(time.RFC3339Nano) + "#" + strings.Join(ids, ","),
	}
	if len(ids) > 0 {
		rt.Labels["conversations"] = strings.Join(ids, ",")
	}
	native := b.lifecycle()
	rt.Native = &native
	if rt.State == backend.StateRunning {
		for _, u := range s.Exposed {
			if u.Name == "AGENT_SERVER" && u.URL != "" {
				rt.AgentServer = &backend.AgentServer{URL: u.URL, SessionKey: deref(s.SessionKey)}
			}
		}
	}
	return rt
}

// List lists the sandboxes within the scope, with their activity. A
// sandbox already gone (MISSING) is left out.
func (b *Backend) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	if len(opts.IDs) > 0 {
		return b.listIDs(ctx, opts.IDs)
	}
	// Kept while paging: what may be in scope (the user's, not gone);
	// the conversations, those on these sandboxes only (every one of
	// them, whoever's: inScope needs them all).
	sbs, err := list(ctx, b.Client, b.Bounds, func(s sandbox) bool {
		return s.ID != "" && state(s.Status) != backend.StateMissing && (b.UserID == "" || deref(s.User) == b.UserID)
	}, "/api/v1/sandboxes/search", url.Values{}, "sandboxes")
	if err != nil {
		return nil, err
	}
	kept := make(map[string]bool, len(sbs))
	for _, s := range sbs {
		kept[s.ID] = true
	}
	convs, err := b.conversations(ctx, "", func(c conversation) bool { return kept[c.SandboxID] })
	if err != nil {
		return nil, err
	}
	bySandbox := map[string][]conversation{}
	for _, c := range convs {
		bySandbox[c.SandboxID] = append(bySandbox[c.SandboxID], c)
	}
	out := make([]backend.Runtime, 0, len(sbs))
	seen := map[string]bool{}
	for _, s := range sbs {
		if seen[s.ID] || s.ID == "" || state(s.Status) == backend.StateMissing || !b.inScope(s, bySandbox[s.ID]) {
			continue
		}
		seen[s.ID] = true
		out = append(out, b.runtime(s, bySandbox[s.ID]))
	}
	b.known.Range(func(id, _ any) bool {
		if !seen[id.(string)] {
			b.known.Delete(id)
		}
		return true
	})
	for id := range seen {
		b.known.Store(id, struct{}{})
	}
	return out, nil
}

// listIDs reads the sandboxes in batches and each one's conversations.
func (b *Backend) listIDs(ctx context.Context, ids []string) ([]backend.Runtime, error) {
	var out []backend.Runtime
	for chunk := range slices.Chunk(ids, 100) {
		var got []*sandbox
		if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodGet, Path: "/api/v1/sandboxes",
			Query: url.Values{"id": chunk}}, &got); err != nil {
			return nil, fmt.Errorf("get openhands sandboxes: %w", err)
		}
		for _, s := range got {
			if s == nil || !slices.Contains(chunk, s.ID) || state(s.Status) == backend.StateMissing {
				continue
			}
			convs, err := b.conversations(ctx, s.ID, nil)
			if err != nil {
				return nil, err
			}
			if b.inScope(*s, convs) {
				out = append(out, b.runtime(*s, convs))
			}
		}
	}
	for _, id := range ids {
		if slices.ContainsFunc(out, func(rt backend.Runtime) bool { return rt.ID == id }) {
			b.known.Store(id, struct{}{})
		} else {
			b.known.Delete(id)
		}
	}
	return out, nil
}

func sandboxPath(id string) string { return "/api/v1/sandboxes/" + url.PathEscape(id) }

// Suspend pauses the sandbox: its pod scales to zero, its volume is kept.
func (b *Backend) Suspend(ctx context.Context, rt backend.Runtime, _ backend.SuspendOptions) error {
	if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodPost, Path: sandboxPath(rt.ID) + "/pause"}, nil); err != nil {
		return fmt.Errorf("pause openhands sandbox %s: %w", rt.ID, err)
	}
	return nil
}

// Delete removes the sandbox: by deleting it (forced), or with
// DeleteConversations by deleting its conversations (gentle). A sandbox
// already gone is not an error.
func (b *Backend) Delete(ctx context.Context, rt backend.Runtime, _ backend.DeleteOptions) error {
	if b.DeleteConversations {
		return b.deleteConversations(ctx, rt)
	}
	// The handler deletes the sandbox named by the query parameter; the
	// path carries the same id.
	_, err := b.Client.Do(ctx, remote.Request{Method: http.MethodDelete, Path: sandboxPath(rt.ID),
		Query: url.Values{"sandbox_id": {rt.ID}}}, nil)
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("delete openhands sandbox %s: %w", rt.ID, err)
	}
	b.known.Delete(rt.ID)
	return nil
}

func (b *Backend) deleteConversations(ctx context.Context, rt backend.Runtime) error {
	convs, err := b.conversations(ctx, rt.ID, nil)
	if err != nil {
		return err
	}
	var s *sandbox
	var got []*sandbox
	if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodGet, Path: "/api/v1/sandboxes",
		Query: url.Values{"id": {rt.ID}}}, &got); err != nil {
		return fmt.Errorf("get openhands sandbox %s: %w", rt.ID, err)
	}
	if len(got) == 1 && got[0] != nil && got[0].ID == rt.ID {
		s = got[0]
	}
	if s == nil || state(s.Status) == backend.StateMissing {
		return nil // gone already
	}
	if !b.inScope(*s, convs) {
		return fmt.Errorf("delete conversations of openhands sandbox %s: one is outside the scope: %w", rt.ID, backend.ErrProtected)
	}
	for _, c := range convs {
		if c.active() {
			return fmt.Errorf("delete conversations of openhands sandbox %s: conversation %s is %s: %w", rt.ID, c.ID, deref(c.Execution), backend.ErrBusy)
		}
	}
	for _, c := range convs {
		_, err := b.Client.Do(ctx, remote.Request{Method: http.MethodDelete, Path: "/api/v1/app-conversations/" + url.PathEscape(c.ID)}, nil)
		if err != nil && !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("delete openhands conversation %s of sandbox %s: %w", c.ID, rt.ID, err)
		}
	}
	got = nil
	if _, err := b.Client.Do(ctx, remote.Request{Method: http.MethodGet, Path: "/api/v1/sandboxes",
		Query: url.Values{"id": {rt.ID}}}, &got); err != nil {
		return fmt.Errorf("get openhands sandbox %s after deleting its conversations: %w", rt.ID, err)
	}
	if len(got) == 1 && got[0] != nil && got[0].ID == rt.ID && state(got[0].Status) != backend.StateMissing {
		return fmt.Errorf("openhands kept sandbox %s after its %d conversations were deleted: another conversation reclaimer cannot see uses it; not forced: %w",
			rt.ID, len(convs), backend.ErrConflict)
	}
	return nil
}

// Lifecycle returns the server-wide idle pause and deletion age, as
// configured: OpenHands has no per-sandbox setting to read or write, so it
// makes no request and nothing can be changed (Can is empty).
func (b *Backend) Lifecycle(_ context.Context, rt backend.Runtime, opts backend.LifecycleOptions) (backend.Lifecycle, error) {
	if _, ok := b.known.Load(rt.ID); !ok && opts.Current == nil {
		return backend.Lifecycle{}, fmt.Errorf("openhands sandbox %s: not in the last listing: %w", rt.ID, backend.ErrNotFound)
	}
	return b.lifecycle(), nil
}

// String names the backend and its scope in messages.
func (b *Backend) String() string {
	scope := "the key's user"
	if b.UserID != "" {
		scope = "user " + b.UserID
	}
	if len(b.ConversationTags) > 0 {
		keys := slices.Sorted(maps.Keys(b.ConversationTags))
		for i, k := range keys {
			keys[i] = k + "=" + b.ConversationTags[k]
		}
		scope += ", conversation tags " + strings.Join(keys, ", ")
	}
	return fmt.Sprintf("openhands at %s (%s)", b.Client.Endpoint(), scope)
}

var (
	_ backend.Backend         = (*Backend)(nil)
	_ backend.Lister          = (*Backend)(nil)
	_ backend.Suspender       = (*Backend)(nil)
	_ backend.Deleter         = (*Backend)(nil)
	_ backend.NativeLifecycle = (*Backend)(nil)
)

// NativeExplanation: OpenHands' own lifecycle is server-wide.
func (b *Backend) NativeExplanation() string {
	return "server-wide only: OpenHands' idle pause (RUNTIME_IDLE_SECONDS) and deletion (RUNTIME_DEAD_SECONDS) are set on the server for every sandbox, not per sandbox; native sync changes nothing, the loop pauses and removes by the policy"
}

var _ backend.NativeExplainer = (*Backend)(nil)
