package cloudflare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Name is the backend's name in keys.
const Name = "cloudflare"

// Unsaved is what an awake sandbox holds that a removal would lose.
const Unsaved = "its workspace exists only in the awake container (Cloudflare discards it when the sandbox sleeps)"

// DefaultExcludes are the dependency folders persist leaves out unless an
// archive includes dependencies: rebuildable from the lock files kept.
var DefaultExcludes = []string{"node_modules", ".venv", "venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".gradle", ".next", ".turbo"}

// DefaultStreamTimeout bounds one persist or hydrate.
const DefaultStreamTimeout = 30 * time.Minute

// Backend acts on the Cloudflare sandboxes hosts registered.
type Backend struct {
	// Bridge is the bridge Worker's endpoint, with its bearer key.
	Bridge *remote.Client
	// Key is the bridge's bearer key, for the streamed calls (persist and
	// hydrate) that go around Bridge's JSON client.
	Key remote.Secret
	// HTTP carries the streamed calls; default a client that refuses
	// redirects (the key would follow them).
	HTTP *http.Client
	// StreamTimeout bounds one persist or hydrate.
	StreamTimeout time.Duration
	// Names returns the sandbox names hosts registered for this source.
	Names func(ctx context.Context) ([]string, error)
	// Containers, when set, reads the instances' states.
	Containers *Containers
	// Excludes are left out of persist unless the archive includes
	// dependencies; nil means DefaultExcludes.
	Excludes []string

	// destroyed remembers when each sandbox was destroyed here, so that it
	// is not listed again while its registration is still in the ledger
	// (until the pass records the deletion); an instance started since
	// (a host made it again) brings it back.
	mu        sync.Mutex
	destroyed map[string]time.Time
}

// Containers is the account-level Containers API.
type Containers struct {
	Client    *remote.Client // https://api.cloudflare.com/client/v4, API token
	AccountID string
	// Application names the Sandbox's containers application; empty
	// means every application of the account.
	Application string
	// Bounds limit every listing (zero: remote's defaults).
	Bounds remote.Bounds
}

// Name returns "cloudflare".
func (b *Backend) Name() string { return Name }

// instance is the part of a ContainerInstance read here.
type instance struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	StartedAt time.Time `json:"started_at"`
	Status    struct {
		State     string    `json:"state"`
		UpdatedAt time.Time `json:"updated_at"`
	} `json:"status"`
}

type v4Page[T any] struct {
	Result     []T `json:"result"`
	ResultInfo struct {
		Next string `json:"next_page_token"`
	} `json:"result_info"`
}

func v4List[T any](ctx context.Context, c *remote.Client, bounds remote.Bounds, keep func(T) bool, path string, q url.Values, what string) ([]T, error) {
	return remote.Pages(ctx, bounds, keep, func(ctx context.Context, cursor string) ([]T, string, error) {
		qq := url.Values{}
		for k, v := range q {
			qq[k] = v
		}
		if cursor != "" {
			qq.Set("page_token", cursor)
		}
		var p v4Page[T]
		if _, err := c.Do(ctx, remote.Request{Method: http.MethodGet, Path: path, Query: qq}, &p); err != nil {
			return nil, "", fmt.Errorf("list cloudflare %s: %w", what, err)
		}
		return p.Result, p.ResultInfo.Next, nil
	})
}

// instances reads the instances named in names (a prefix narrows the
// listing when there is one name).
func (c *Containers) instances(ctx context.Context, names []string) (map[string]instance, error) {
	base := "/accounts/" + url.PathEscape(c.AccountID) + "/containers/applications"
	q := url.Values{}
	if c.Application != "" {
		q.Set("name", c.Application)
	}
	apps, err := v4List[struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}](ctx, c.Client, c.Bounds, nil, base, q, "containers applications")
	if err != nil {
		return nil, err
	}
	if c.Application != "" && !slices.ContainsFunc(apps, func(a struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}) bool {
		return a.Name == c.Application
	}) {
		return nil, fmt.Errorf("list cloudflare containers: no application %q in account %s: %w", c.Application, c.AccountID, backend.ErrNotFound)
	}
	wanted := map[string]bool{}
	for _, n := range names {
		wanted[n] = true
	}
	out := map[string]instance{}
	for _, a := range apps {
		if c.Application != "" && a.Name != c.Application {
			continue
		}
		iq := url.Values{"per_page": {"1000"}}
		if len(names) == 1 {
			iq.Set("name_prefix", names[0])
		}
		// Only registered names are kept while paging: never ours otherwise.
		insts, err := v4List(ctx, c.Client, c.Bounds, func(in instance) bool { return wanted[in.Name] }, base+"/"+url.PathEscape(a.ID)+"/instances-v2", iq, "container instances")
		if err != nil {
			return nil, err
		}
		for _, in := range insts {
			if !wanted[in.Name] {
				continue // not a registered name: never ours
			}
			if prev, dup := out[in.Name]; dup && prev.ID != in.ID {
				return nil, fmt.Errorf("list cloudflare containers: two instances are named %q: %w", in.Name, backend.ErrConflict)
			}
			out[in.Name] = in
		}
	}
	return out, nil
}

func state(s string) backend.State {
	switch s {
	case "running":
		return backend.StateRunning
	case "provisioning":
		return backend.StateStarting
	case "stopping", "stopped", "inactive":
		return backend.StateStopped
	}
	return backend.StateUnknown
}

func runtimeOf(name string, in *instance) backend.Runtime {
	rt := backend.Runtime{Key: backend.Key{Backend: Name, ID: name}, State: backend.StateUnknown, Labels: map[string]string{}}
	if in == nil {
		rt.Fingerprint = "no-instance"
		rt.Labels["instance"] = "none seen"
		return rt
	}
	rt.State = state(in.Status.State)
	rt.Labels["instance"], rt.Labels["instance_state"] = in.ID, in.Status.State
	rt.Fingerprint = in.Status.State + "@" + in.ID + "@" + in.StartedAt.UTC().Format(time.RFC3339Nano)
	switch rt.State {
	case backend.StateRunning, backend.StateStarting:
		rt.LastActivity, rt.CreatedAt = in.StartedAt.UTC(), in.StartedAt.UTC()
		rt.Unsaved = Unsaved
	case backend.StateStopped:
		// It slept then: its files went with it.
		rt.LastActivity = in.Status.UpdatedAt.UTC()
		rt.Labels["workspace"] = "lost when it slept"
	}
	return rt
}

// List lists the registered sandboxes with their states.
func (b *Backend) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	if b.Names == nil {
		return nil, errors.New("list cloudflare sandboxes: no source of registered names")
	}
	names, err := b.Names(ctx)
	if err != nil {
		return nil, fmt.Errorf("list cloudflare sandboxes: registered names: %w", err)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(opts.IDs) > 0 {
		names = slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(opts.IDs, n) })
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == "" })
	var insts map[string]instance
	if b.Containers != nil && len(names) > 0 {
		if insts, err = b.Containers.instances(ctx, names); err != nil {
			return nil, err
		}
	}
	out := make([]backend.Runtime, 0, len(names))
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range names {
		var in *instance
		if i, ok := insts[n]; ok {
			in = &i
		}
		if at, ok := b.destroyed[n]; ok {
			if in == nil || !in.StartedAt.After(at) {
				continue // destroyed here; the ledger has not caught up
			}
			delete(b.destroyed, n)
		}
		out = append(out, runtimeOf(n, in))
	}
	return out, nil
}

func sandboxPath(id string) string { return "/v1/sandbox/" + url.PathEscape(id) }

// Delete destroys the sandbox; an unknown name is not an error (the bridge
// answers 204 for it without starting anything).
func (b *Backend) Delete(ctx context.Context, rt backend.Runtime, _ backend.DeleteOptions) error {
	if _, err := b.Bridge.Do(ctx, remote.Request{Method: http.MethodDelete, Path: sandboxPath(rt.ID)}, nil); err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("destroy cloudflare sandbox %s: %w", rt.ID, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.destroyed == nil {
		b.destroyed = map[string]time.Time{}
	}
	b.destroyed[rt.ID] = time.Now()
	return nil
}

func (b *Backend) excludes(include bool) []string {
	if include {
		return nil
	}
	if b.Excludes != nil {
		return b.Excludes
	}
	return DefaultExcludes
}

// Export archives an awake sandbox's /workspace into the sink (verified
// by reading it back), and records that nothing survived of a sleeping
// one. A sandbox whose state is unknown is refused.
func (b *Backend) Export(ctx context.Context, rt backend.Runtime, opts backend.ExportOptions) (backend.Export, error) {
	req := archive.Request{Sink: opts.Sink, Base: opts.Name, Runtime: rt.ID, Backend: Name, Conversations: opts.Conversations,
		CreatedAt: opts.CreatedAt, Staging: opts.Dir, IncludeDependencies: opts.IncludeDependencies}
	switch rt.State {
	case backend.StateStopped:
		m, err := archive.ExportStreams(ctx, req, nil, archive.Manifest{
			Survives: []string{"nothing: the sandbox was asleep, and Cloudflare discards a sleeping sandbox's files"},
			Excluded: []string{"/workspace (lost when the sandbox slept, before this archive)"},
		})
		if err != nil {
			return backend.Export{}, err
		}
		exp := m.BackendExport()
		exp.Restore = "nothing to restore"
		return exp, nil
	case backend.StateRunning:
	default:
		return backend.Export{}, fmt.Errorf("archive cloudflare sandbox %s: its state is %s; persist would start it if it sleeps: %w",
			rt.ID, rt.State, errors.ErrUnsupported)
	}
	excl := b.excludes(opts.IncludeDependencies)
	survives := "the /workspace tree as a tar (files, folders, links)"
	if len(excl) > 0 {
		survives += "; dependency folders named " + strings.Join(excl, ", ") + " left out (rebuild them from their lock files)"
	}
	stream := archive.Stream{Ext: "workspace.tar", Kind: archive.KindPlainTar, Folder: "workspace", Path: "/workspace",
		Open: func(ctx context.Context) (io.ReadCloser, error) {
			q := url.Values{}
			if len(excl) > 0 {
				q.Set("excludes", strings.Join(excl, ","))
			}
			return b.stream(ctx, http.MethodPost, sandboxPath(rt.ID)+"/persist", q, nil)
		}}
	var deps []archive.Dependency
	for _, e := range excl {
		deps = append(deps, archive.Dependency{Folder: "workspace", Path: e})
	}
	m, err := archive.ExportStreams(ctx, req, []archive.Stream{stream}, archive.Manifest{
		Survives:     []string{survives},
		Excluded:     []string{"anything outside /workspace (the home folder, installed packages)", "running processes and memory"},
		Dependencies: deps,
	})
	if err != nil {
		return backend.Export{}, err
	}
	exp := m.BackendExport()
	exp.Restore = "reclaimer restore cloudflare/" + rt.ID + " (a new sandbox, hydrated from the archive)"
	return exp, nil
}

// Restore verifies the archive, creates a sandbox (or takes the name in
// opts.To) and hydrates its /workspace from the archive. It returns the
// sandbox's name.
func (b *Backend) Restore(ctx context.Context, k backend.Key, opts backend.RestoreOptions) (string, error) {
	m, err := archive.ParseManifest(opts.Manifest)
	if err != nil {
		return "", err
	}
	var obj *archive.Object
	for i := range m.Objects {
		if m.Objects[i].Kind == archive.KindPlainTar {
			obj = &m.Objects[i]
		}
	}
	if obj == nil {
		return "", fmt.Errorf("restore %s: the archive holds no workspace (%s): %w", k, strings.Join(m.Survives, "; "), errors.ErrUnsupported)
	}
	if err := m.VerifyIn(ctx, opts.Sink); err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	name := opts.To
	if name == "" {
		var created struct {
			ID string `json:"id"`
		}
		if _, err := b.Bridge.Do(ctx, remote.Request{Method: http.MethodPost, Path: "/v1/sandbox"}, &created); err != nil {
			return "", fmt.Errorf("restore %s: create a sandbox: %w", k, err)
		}
		if created.ID == "" {
			return "", fmt.Errorf("restore %s: the bridge created a sandbox without an id", k)
		}
		name = created.ID
	}
	r, err := opts.Sink.Open(ctx, obj.Name)
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	defer r.Close()
	// The object was verified just now; what is sent is counted and
	// hashed again, and a difference fails the restore.
	check := newChecker(r)
	resp, err := b.stream(ctx, http.MethodPost, sandboxPath(name)+"/hydrate", nil, check)
	if err != nil {
		return "", fmt.Errorf("restore %s into sandbox %s: %w", k, name, err)
	}
	resp.Close()
	if err := check.verify(*obj); err != nil {
		return "", fmt.Errorf("restore %s into sandbox %s: %w", k, name, err)
	}
	return "cloudflare sandbox " + name, nil
}

// client is the transport of the streamed calls. Rule "no redirect carries
// a credential" (remote.RefuseRedirects): the bridge key never follows one,
// an injected client included.
func (b *Backend) client() *http.Client {
	return remote.RefuseRedirects(b.HTTP)
}

// stream makes a call whose body (sent or answered) is a tar: the answer's
// body is returned open on success.
func (b *Backend) stream(ctx context.Context, method, path string, q url.Values, body io.Reader) (io.ReadCloser, error) {
	timeout := b.StreamTimeout
	if timeout <= 0 {
		timeout = DefaultStreamTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	u := strings.TrimRight(b.Bridge.Endpoint(), "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.Key.Reveal())
	req.Header.Set("User-Agent", "reclaimer")
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := b.client().Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%s %s: %w: %s", method, path, remote.ErrUnavailable, b.scrub(err.Error()))
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("%s %s: %d: %w", method, path, resp.StatusCode, remote.ErrRedirect)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		cancel()
		return nil, &remote.StatusError{Method: method, Path: path, Status: resp.StatusCode, Message: remote.Quote(b.Key, data)}
	}
	return &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}, nil
}

func (b *Backend) scrub(s string) string { return b.Key.Scrub(s) }

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
	once   sync.Once
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.once.Do(c.cancel)
	return err
}

// String names the backend in messages.
func (b *Backend) String() string {
	s := "cloudflare bridge at " + b.Bridge.Endpoint()
	if b.Containers != nil {
		s += " (containers of account " + b.Containers.AccountID + ")"
	}
	return s
}

var (
	_ backend.Backend  = (*Backend)(nil)
	_ backend.Lister   = (*Backend)(nil)
	_ backend.Deleter  = (*Backend)(nil)
	_ backend.Exporter = (*Backend)(nil)
	_ backend.Restorer = (*Backend)(nil)

	_ backend.IdleLosesFiles = (*Backend)(nil)
)

// IdleLosesFiles says why idle reclaiming archives, then destroys, instead
// of suspending: the bridge cannot make a sandbox sleep, and a sleeping
// sandbox loses every file.
func (b *Backend) IdleLosesFiles() string {
	return "a sleeping Cloudflare sandbox loses every file: idle reclaiming archives it (persist, read back), then destroys it"
}
