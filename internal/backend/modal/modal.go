package modal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/modal/modalpb"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Name is the backend's name in keys.
const Name = "modal"

// DefaultSnapshotTimeout bounds a filesystem snapshot.
const DefaultSnapshotTimeout = 10 * time.Minute

// Unsaved is what every Modal sandbox holds that a removal would lose.
const Unsaved = "its filesystem exists only in the running sandbox"

// Backend lists and acts on the Modal sandboxes whose tags match Tags.
type Backend struct {
	Client *Client
	// Tags select the sandboxes reclaimer manages; every tag must match.
	// Only these are ever touched.
	Tags map[string]string
	// AppID and Environment narrow the listing (optional).
	AppID, Environment string
	// SnapshotTimeout bounds SandboxSnapshotFs.
	SnapshotTimeout time.Duration
	// RestoreApp names the app the printed restore command starts a
	// sandbox in (default "reclaimer-restore").
	RestoreApp string

	// known remembers each listed sandbox, so a narrowed listing costs two
	// small calls instead of a whole listing.
	known sync.Map // id → *modalpb.SandboxInfo
}

// Name returns "modal".
func (b *Backend) Name() string { return Name }

func unix(f float64) time.Time {
	if f <= 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

func tagMap(tags []*modalpb.SandboxTag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[t.GetTagName()] = t.GetTagValue()
	}
	return m
}

// finished tells whether the sandbox's task ended.
func finished(s *modalpb.SandboxInfo) bool {
	ti := s.GetTaskInfo()
	return ti.GetFinishedAt() > 0 || ti.GetResult().GetStatus() != modalpb.GenericStatus_GENERIC_STATUS_UNSPECIFIED
}

// lifecycle is what Modal was told at creation.
func lifecycle(s *modalpb.SandboxInfo) backend.Lifecycle {
	var l backend.Lifecycle
	start := unix(s.GetTaskInfo().GetStartedAt())
	if start.IsZero() {
		start = unix(s.GetCreatedAt())
	}
	if t := s.GetTimeoutSecs(); t > 0 && !start.IsZero() {
		l.Deadline, l.DeadlineStep = start.Add(time.Duration(t)*time.Second), backend.StepDelete
	}
	if s.IdleTimeoutSecs != nil && s.GetIdleTimeoutSecs() > 0 {
		l.IdleSuspend, l.Delete = time.Duration(s.GetIdleTimeoutSecs())*time.Second, backend.Immediately
	}
	return l // Can empty: fixed at creation
}

func (b *Backend) runtime(s *modalpb.SandboxInfo) backend.Runtime {
	st := backend.StateRunning
	started := unix(s.GetTaskInfo().GetStartedAt())
	if started.IsZero() {
		st = backend.StateStarting
	}
	labels := tagMap(s.GetTags())
	for k, v := range map[string]string{"app_id": s.GetAppId(), "name": s.GetName(), "image_id": s.GetImageId()} {
		if _, taken := labels[k]; !taken && v != "" {
			labels[k] = v
		}
	}
	created := unix(s.GetCreatedAt())
	last := started
	if last.IsZero() {
		last = created
	}
	native := lifecycle(s)
	return backend.Runtime{Key: backend.Key{Backend: Name, ID: s.GetId()}, State: st, CreatedAt: created, LastActivity: last,
		Labels: labels, Unsaved: Unsaved, Native: &native,
		Fingerprint: string(st) + "@" + strconv.FormatFloat(s.GetTaskInfo().GetStartedAt(), 'f', -1, 64)}
}

func (b *Backend) selector() []*modalpb.SandboxTag {
	keys := slices.Sorted(maps.Keys(b.Tags))
	out := make([]*modalpb.SandboxTag, 0, len(keys))
	for _, k := range keys {
		out = append(out, &modalpb.SandboxTag{TagName: k, TagValue: b.Tags[k]})
	}
	return out
}

// listAll pages SandboxList newest first by before_timestamp.
func (b *Backend) listAll(ctx context.Context) ([]*modalpb.SandboxInfo, error) {
	var all []*modalpb.SandboxInfo
	before := 0.0
	for {
		resp, err := b.Client.RPC().SandboxList(ctx, &modalpb.SandboxListRequest{AppId: b.AppID, EnvironmentName: b.Environment,
			BeforeTimestamp: before, Tags: b.selector()})
		if err != nil {
			return nil, fmt.Errorf("list modal sandboxes: %w", err)
		}
		page := resp.GetSandboxes()
		if len(page) == 0 {
			return all, nil
		}
		all = append(all, page...)
		next := page[len(page)-1].GetCreatedAt()
		if next <= 0 || (before != 0 && next >= before) {
			return nil, fmt.Errorf("list modal sandboxes: the page after %v does not go back in time (%v)", before, next)
		}
		before = next
	}
}

// List lists the running sandboxes with the tags.
func (b *Backend) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	if len(opts.IDs) > 0 {
		return b.listIDs(ctx, opts.IDs)
	}
	all, err := b.listAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]backend.Runtime, 0, len(all))
	seen := map[string]bool{}
	for _, s := range all {
		id := s.GetId()
		// The server filtered; checking again keeps a filter it ignored
		// from widening what reclaimer touches.
		if id == "" || seen[id] || finished(s) || !remote.MatchLabels(tagMap(s.GetTags()), b.Tags) {
			continue
		}
		seen[id] = true
		b.known.Store(id, s)
		out = append(out, b.runtime(s))
	}
	b.known.Range(func(id, _ any) bool {
		if !seen[id.(string)] {
			b.known.Delete(id)
		}
		return true
	})
	return out, nil
}

// listIDs re-reads known sandboxes with two small calls each; one not seen
// in a listing before costs a whole listing.
func (b *Backend) listIDs(ctx context.Context, ids []string) ([]backend.Runtime, error) {
	var out []backend.Runtime
	for _, id := range ids {
		v, ok := b.known.Load(id)
		if !ok {
			all, err := b.List(ctx, backend.ListOptions{})
			if err != nil {
				return nil, err
			}
			for _, rt := range all {
				if rt.ID == id {
					out = append(out, rt)
				}
			}
			continue
		}
		s := v.(*modalpb.SandboxInfo)
		tags, err := b.Client.RPC().SandboxTagsGet(ctx, &modalpb.SandboxTagsGetRequest{SandboxId: id})
		if errors.Is(err, backend.ErrNotFound) {
			b.known.Delete(id)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read tags of modal sandbox %s: %w", id, err)
		}
		if !remote.MatchLabels(tagMap(tags.GetTags()), b.Tags) {
			b.known.Delete(id)
			continue
		}
		wait, err := b.Client.RPC().SandboxWait(ctx, &modalpb.SandboxWaitRequest{SandboxId: id, Timeout: 0})
		if errors.Is(err, backend.ErrNotFound) {
			b.known.Delete(id)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read state of modal sandbox %s: %w", id, err)
		}
		if wait.GetResult().GetStatus() != modalpb.GenericStatus_GENERIC_STATUS_UNSPECIFIED {
			b.known.Delete(id)
			continue // it ended
		}
		out = append(out, b.runtime(s))
	}
	return out, nil
}

// Delete terminates the sandbox; one that ended already is not an error.
func (b *Backend) Delete(ctx context.Context, rt backend.Runtime, _ backend.DeleteOptions) error {
	_, err := b.Client.RPC().SandboxTerminate(ctx, &modalpb.SandboxTerminateRequest{SandboxId: rt.ID})
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("terminate modal sandbox %s: %w", rt.ID, err)
	}
	b.known.Delete(rt.ID)
	return nil
}

// StartCommand is Restore's answer: reclaimer does not start sandboxes, and
// this is how a person starts one from the archived filesystem.
type StartCommand struct {
	Runtime, Image, Command string
}

func (s *StartCommand) Error() string {
	return fmt.Sprintf("modal sandbox %s was archived as image %s; reclaimer does not start sandboxes: start one from it with:\n  %s",
		s.Runtime, s.Image, s.Command)
}

// Unwrap says the backend cannot restore by itself.
func (s *StartCommand) Unwrap() error { return errors.ErrUnsupported }

// RestoreCommand is the command that starts a sandbox from the archived
// image (backend.ManualRestore).
func (s *StartCommand) RestoreCommand() string { return s.Command }

var _ backend.ManualRestore = (*StartCommand)(nil)

func startCommand(image, app string) string {
	if app == "" {
		app = "reclaimer-restore"
	}
	return fmt.Sprintf(`python3 -c 'import modal; app = modal.App.lookup(%q, create_if_missing=True); `+
		`sb = modal.Sandbox.create(image=modal.Image.from_id(%q), app=app); print(sb.object_id)'`, app, image)
}

// Export snapshots the sandbox's filesystem into a Modal image and stores
// a manifest naming it in the sink (read back). Memory and processes are
// not kept.
func (b *Backend) Export(ctx context.Context, rt backend.Runtime, opts backend.ExportOptions) (backend.Export, error) {
	timeout := b.SnapshotTimeout
	if timeout <= 0 {
		timeout = DefaultSnapshotTimeout
	}
	resp, err := b.Client.RPC().SandboxSnapshotFs(ctx, &modalpb.SandboxSnapshotFsRequest{SandboxId: rt.ID, Timeout: float32(timeout.Seconds())})
	if err != nil {
		return backend.Export{}, fmt.Errorf("snapshot modal sandbox %s: %w", rt.ID, err)
	}
	if st := resp.GetResult().GetStatus(); st != modalpb.GenericStatus_GENERIC_STATUS_SUCCESS {
		return backend.Export{}, fmt.Errorf("snapshot modal sandbox %s: %s %s", rt.ID, st, b.Client.scrub(resp.GetResult().GetException()))
	}
	image := resp.GetImageId()
	if !strings.HasPrefix(image, "im-") || strings.ContainsAny(image, " '\"\\\n") {
		return backend.Export{}, fmt.Errorf("snapshot modal sandbox %s: the answer names no image (%q)", rt.ID, image)
	}
	cmd := startCommand(image, b.RestoreApp)
	m, err := archive.ExportStreams(ctx, archive.Request{Sink: opts.Sink, Base: opts.Name, Runtime: rt.ID, Backend: Name,
		Conversations: opts.Conversations, CreatedAt: opts.CreatedAt, Staging: opts.Dir}, nil, archive.Manifest{
		Image: image, Restore: cmd,
		Survives: []string{"the sandbox's whole filesystem, as Modal image " + image + " (kept by Modal, not in this archive's storage)"},
		Excluded: []string{"memory and running processes", "the sandbox's tags and timeouts (set them again when starting it)"},
	})
	if err != nil {
		return backend.Export{}, err
	}
	exp := m.BackendExport()
	exp.Restore = cmd
	return exp, nil
}

// Restore answers the command that starts a sandbox from the archived
// image (StartCommand): reclaimer calls no RPC that creates sandboxes.
func (b *Backend) Restore(_ context.Context, k backend.Key, opts backend.RestoreOptions) (string, error) {
	m, err := archive.ParseManifest(opts.Manifest)
	if err != nil {
		return "", err
	}
	if m.Image == "" {
		return "", fmt.Errorf("restore %s: the archive names no image: %w", k, errors.ErrUnsupported)
	}
	return "", &StartCommand{Runtime: k.ID, Image: m.Image, Command: m.Restore}
}

// Lifecycle reports the lifetime and idle timeout fixed at creation; it
// makes no request and can change nothing.
func (b *Backend) Lifecycle(_ context.Context, rt backend.Runtime, opts backend.LifecycleOptions) (backend.Lifecycle, error) {
	if opts.Current != nil {
		return *opts.Current, nil
	}
	v, ok := b.known.Load(rt.ID)
	if !ok {
		return backend.Lifecycle{}, fmt.Errorf("modal sandbox %s: not in the last listing: %w", rt.ID, backend.ErrNotFound)
	}
	if rt.Native != nil {
		return *rt.Native, nil
	}
	return lifecycle(v.(*modalpb.SandboxInfo)), nil
}

// String names the backend and its selector in messages.
func (b *Backend) String() string {
	var tags []string
	for _, t := range b.selector() {
		tags = append(tags, t.GetTagName()+"="+t.GetTagValue())
	}
	return fmt.Sprintf("modal at %s (tags %s)", b.Client.Endpoint(), strings.Join(tags, ", "))
}

var (
	_ backend.Backend         = (*Backend)(nil)
	_ backend.Lister          = (*Backend)(nil)
	_ backend.Deleter         = (*Backend)(nil)
	_ backend.Exporter        = (*Backend)(nil)
	_ backend.Restorer        = (*Backend)(nil)
	_ backend.NativeLifecycle = (*Backend)(nil)
)

// Close closes the backend's connection (a reload replacing the source,
// the end of the program).
func (b *Backend) Close() error {
	if b.Client == nil {
		return nil
	}
	return b.Client.Close()
}

// NativeExplanation: Modal's timeouts are fixed when a sandbox is created.
func (b *Backend) NativeExplanation() string {
	return "timeout_secs and idle_timeout_secs are fixed when the sandbox is created: shown against the policy, they cannot be changed (create sandboxes with the values the policy wants)"
}

var _ backend.NativeExplainer = (*Backend)(nil)
