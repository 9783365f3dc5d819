package fakes

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/reclaimer/reclaimer/internal/backend/modal/modalpb"
)

// ModalSandbox is one sandbox the Modal fake keeps. Times are what Modal
// reports (zero: unset).
type ModalSandbox struct {
	ID, AppID, Name string
	Tags            map[string]string
	CreatedAt       time.Time
	StartedAt       time.Time // zero: enqueued, not started
	FinishedAt      time.Time
	Result          modalpb.GenericStatus
	TimeoutSecs     uint32
	IdleTimeoutSecs *uint32
}

// ModalRPCs are the RPCs reclaimer may call; a fake allows them all unless
// told otherwise.
var ModalRPCs = []string{"SandboxList", "SandboxTerminate", "SandboxTagsGet", "SandboxWait", "SandboxSnapshotFs", "SandboxGetResourceUsage"}

// Modal is a contract fake of Modal's gRPC API on loopback: it serves
// service modal.client.ModalClient, checks the two token headers and every
// request's fields, fails the test on an RPC it was not told to allow (or
// one outside the service, as an exec or a create would be), and keeps
// sandboxes as Modal does (terminated sandboxes end and leave listings).
type Modal struct {
	modalpb.UnimplementedModalClientServer
	t   testing.TB
	URL string // http://127.0.0.1:port, for modal.ClientOptions.Endpoint
	Now func() time.Time

	mu             sync.Mutex
	tokenID        string
	secret         string
	allowed        map[string]bool
	sandboxes      map[string]*ModalSandbox
	images         map[string]string // image id → sandbox it snapshots
	faults         []fault
	calls          map[string]int
	total          int
	snapshotStatus modalpb.GenericStatus
}

type fault struct {
	code     codes.Code
	pushback string // grpc-retry-pushback-ms, "" none
}

// NewModal starts a Modal fake that accepts the token id and secret.
func NewModal(t testing.TB, tokenID, secret string, now func() time.Time) *Modal {
	t.Helper()
	f := &Modal{t: t, Now: now, tokenID: tokenID, secret: secret, allowed: map[string]bool{},
		sandboxes: map[string]*ModalSandbox{}, images: map[string]string{}, calls: map[string]int{}}
	for _, rpc := range ModalRPCs {
		f.allowed[rpc] = true
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(f.check), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		m, _ := grpc.MethodFromServerStream(stream)
		f.t.Errorf("modal fake: %s is not a call reclaimer may make", m)
		return status.Error(codes.Unimplemented, "not served by the fake")
	}))
	modalpb.RegisterModalClientServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	f.URL = "http://" + lis.Addr().String()
	return f
}

// Allow limits the RPCs the test allows; any other fails the test.
func (f *Modal) Allow(rpcs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allowed = map[string]bool{}
	for _, r := range rpcs {
		f.allowed[r] = true
	}
}

// Add puts a sandbox in the fake.
func (f *Modal) Add(s ModalSandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.AppID == "" {
		s.AppID = "ap-reclaimer"
	}
	f.sandboxes[s.ID] = &s
}

// Get returns a copy of a sandbox.
func (f *Modal) Get(id string) (ModalSandbox, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sandboxes[id]
	if !ok {
		return ModalSandbox{}, false
	}
	return *s, true
}

// Image tells which sandbox an image snapshots ("" none).
func (f *Modal) Image(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images[id]
}

// Remove deletes a sandbox behind reclaimer's back.
func (f *Modal) Remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sandboxes, id)
}

// Fail answers the next n calls with code (RESOURCE_EXHAUSTED carries a
// pushback of 0 ms: retry at once).
func (f *Modal) Fail(code codes.Code, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		fl := fault{code: code}
		if code == codes.ResourceExhausted {
			fl.pushback = "0"
		}
		f.faults = append(f.faults, fl)
	}
}

// FailSnapshots makes SandboxSnapshotFs answer status instead of success.
func (f *Modal) FailSnapshots(st modalpb.GenericStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snapshotStatus = st
}

// Calls returns how often an RPC was called.
func (f *Modal) Calls(rpc string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[rpc]
}

// Total returns how many calls reached the fake.
func (f *Modal) Total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

// ResetCalls forgets the counts.
func (f *Modal) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.total = map[string]int{}, 0
}

// check authenticates, refuses what is not allowed, validates the request
// and injects faults, around every call.
func (f *Modal) check(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	rpc := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	f.mu.Lock()
	f.calls[rpc]++
	f.total++
	allowed := f.allowed[rpc]
	var fl *fault
	if len(f.faults) > 0 {
		fl, f.faults = &f.faults[0], f.faults[1:]
	}
	f.mu.Unlock()
	if !strings.HasPrefix(info.FullMethod, "/modal.client.ModalClient/") {
		f.t.Errorf("modal fake: call outside modal.client.ModalClient: %s", info.FullMethod)
	}
	if !allowed {
		f.t.Errorf("modal fake: %s was called, but the test does not allow it", rpc)
		return nil, status.Error(codes.PermissionDenied, "not allowed by the test")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if first(md.Get("x-modal-token-id")) != f.tokenID || first(md.Get("x-modal-token-secret")) != f.secret {
		return nil, status.Error(codes.Unauthenticated, "invalid token")
	}
	if m, ok := req.(proto.Message); !ok || len(m.ProtoReflect().GetUnknown()) > 0 {
		f.t.Errorf("modal fake: %s request has fields Modal does not publish", rpc)
	}
	if err := f.validate(rpc, req); err != nil {
		f.t.Errorf("modal fake: %s request: %v", rpc, err)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if fl != nil {
		if fl.pushback != "" {
			grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", fl.pushback))
		}
		return nil, status.Error(fl.code, "injected "+fl.code.String())
	}
	return handler(ctx, req)
}

// validate checks a request's fields as Modal's server would, and the
// rules reclaimer promises (never wait, never list finished sandboxes).
func (f *Modal) validate(rpc string, req any) error {
	id := func(s string) error {
		if !strings.HasPrefix(s, "sb-") || strings.ContainsAny(s, "/ \x00") {
			return fmt.Errorf("sandbox_id %q is not a sandbox id", s)
		}
		return nil
	}
	switch r := req.(type) {
	case *modalpb.SandboxListRequest:
		if r.GetBeforeTimestamp() < 0 {
			return fmt.Errorf("before_timestamp %v", r.GetBeforeTimestamp())
		}
		if r.GetIncludeFinished() {
			return fmt.Errorf("include_finished: reclaimer lists running sandboxes only")
		}
		for _, t := range r.GetTags() {
			if t.GetTagName() == "" {
				return fmt.Errorf("a tag without a name")
			}
		}
	case *modalpb.SandboxWaitRequest:
		if r.GetTimeout() != 0 {
			return fmt.Errorf("timeout %v: inspecting must not wait", r.GetTimeout())
		}
		return id(r.GetSandboxId())
	case *modalpb.SandboxSnapshotFsRequest:
		if r.GetTimeout() <= 0 || r.GetTimeout() > 3600 {
			return fmt.Errorf("timeout %v", r.GetTimeout())
		}
		return id(r.GetSandboxId())
	case interface{ GetSandboxId() string }:
		return id(r.GetSandboxId())
	default:
		return fmt.Errorf("unexpected request %T", req)
	}
	return nil
}

func unixSecs(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

func (f *Modal) info(s *ModalSandbox) *modalpb.SandboxInfo {
	var tags []*modalpb.SandboxTag
	for _, k := range slices.Sorted(maps.Keys(s.Tags)) {
		tags = append(tags, &modalpb.SandboxTag{TagName: k, TagValue: s.Tags[k]})
	}
	ti := &modalpb.TaskInfo{Id: "ta-" + strings.TrimPrefix(s.ID, "sb-"), SandboxId: s.ID, EnqueuedAt: unixSecs(s.CreatedAt),
		StartedAt: unixSecs(s.StartedAt), FinishedAt: unixSecs(s.FinishedAt)}
	if s.Result != modalpb.GenericStatus_GENERIC_STATUS_UNSPECIFIED {
		ti.Result = &modalpb.GenericResult{Status: s.Result}
	}
	return &modalpb.SandboxInfo{Id: s.ID, CreatedAt: unixSecs(s.CreatedAt), TaskInfo: ti, AppId: s.AppID, Tags: tags, Name: s.Name,
		ImageId: "im-base", TimeoutSecs: s.TimeoutSecs, IdleTimeoutSecs: s.IdleTimeoutSecs}
}

func (s *ModalSandbox) ended() bool {
	return !s.FinishedAt.IsZero() || s.Result != modalpb.GenericStatus_GENERIC_STATUS_UNSPECIFIED
}

// SandboxList answers at most 100 sandboxes, newest first, created before
// before_timestamp, with every tag asked for.
func (f *Modal) SandboxList(_ context.Context, r *modalpb.SandboxListRequest) (*modalpb.SandboxListResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	want := map[string]string{}
	for _, t := range r.GetTags() {
		want[t.GetTagName()] = t.GetTagValue()
	}
	var all []*ModalSandbox
	for _, s := range f.sandboxes {
		if s.ended() && !r.GetIncludeFinished() || r.GetAppId() != "" && s.AppID != r.GetAppId() {
			continue
		}
		if b := r.GetBeforeTimestamp(); b > 0 && unixSecs(s.CreatedAt) >= b {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && s.Tags[k] == v
		}
		if ok {
			all = append(all, s)
		}
	}
	slices.SortFunc(all, func(a, b *ModalSandbox) int { return b.CreatedAt.Compare(a.CreatedAt) })
	out := &modalpb.SandboxListResponse{}
	for _, s := range all[:min(100, len(all))] {
		out.Sandboxes = append(out.Sandboxes, f.info(s))
	}
	return out, nil
}

func (f *Modal) sandbox(id string) (*ModalSandbox, error) {
	s := f.sandboxes[id]
	if s == nil {
		return nil, status.Error(codes.NotFound, "Sandbox "+id+" not found")
	}
	return s, nil
}

// SandboxTerminate ends a sandbox; one that ended answers its result.
func (f *Modal) SandboxTerminate(_ context.Context, r *modalpb.SandboxTerminateRequest) (*modalpb.SandboxTerminateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sandbox(r.GetSandboxId())
	if err != nil {
		return nil, err
	}
	out := &modalpb.SandboxTerminateResponse{}
	if s.ended() {
		out.ExistingResult = &modalpb.GenericResult{Status: s.Result}
		return out, nil
	}
	s.FinishedAt, s.Result = f.Now(), modalpb.GenericStatus_GENERIC_STATUS_TERMINATED
	return out, nil
}

// SandboxTagsGet answers a sandbox's tags.
func (f *Modal) SandboxTagsGet(_ context.Context, r *modalpb.SandboxTagsGetRequest) (*modalpb.SandboxTagsGetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sandbox(r.GetSandboxId())
	if err != nil {
		return nil, err
	}
	return &modalpb.SandboxTagsGetResponse{Tags: f.info(s).GetTags()}, nil
}

// SandboxWait answers at once: a result when it ended, none while it runs.
func (f *Modal) SandboxWait(_ context.Context, r *modalpb.SandboxWaitRequest) (*modalpb.SandboxWaitResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sandbox(r.GetSandboxId())
	if err != nil {
		return nil, err
	}
	out := &modalpb.SandboxWaitResponse{}
	if s.ended() {
		out.Result = &modalpb.GenericResult{Status: s.Result}
	}
	return out, nil
}

// SandboxSnapshotFs makes an image of a running sandbox's filesystem.
func (f *Modal) SandboxSnapshotFs(_ context.Context, r *modalpb.SandboxSnapshotFsRequest) (*modalpb.SandboxSnapshotFsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sandbox(r.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if s.ended() {
		return &modalpb.SandboxSnapshotFsResponse{Result: &modalpb.GenericResult{Status: modalpb.GenericStatus_GENERIC_STATUS_FAILURE,
			Exception: "sandbox has finished"}}, nil
	}
	if f.snapshotStatus != modalpb.GenericStatus_GENERIC_STATUS_UNSPECIFIED {
		return &modalpb.SandboxSnapshotFsResponse{Result: &modalpb.GenericResult{Status: f.snapshotStatus, Exception: "snapshot failed"}}, nil
	}
	img := "im-" + strconv.Itoa(len(f.images)+1) + "-" + strings.TrimPrefix(s.ID, "sb-")
	f.images[img] = s.ID
	return &modalpb.SandboxSnapshotFsResponse{ImageId: img, Result: &modalpb.GenericResult{Status: modalpb.GenericStatus_GENERIC_STATUS_SUCCESS}}, nil
}

// SandboxGetResourceUsage answers what a sandbox used so far.
func (f *Modal) SandboxGetResourceUsage(_ context.Context, r *modalpb.SandboxGetResourceUsageRequest) (*modalpb.SandboxGetResourceUsageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sandbox(r.GetSandboxId())
	if err != nil {
		return nil, err
	}
	ran := f.Now().Sub(s.StartedAt)
	return &modalpb.SandboxGetResourceUsageResponse{CpuCoreNanosecs: uint64(max(ran, 0))}, nil
}
