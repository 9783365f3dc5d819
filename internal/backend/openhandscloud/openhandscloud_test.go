package openhandscloud_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/agentserver"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/openhandscloud"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

const (
	key      = "oh_test_key_0123456789"
	otherKey = "oh_other_key_9876543210"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	f     *fakes.OpenHands
	clock *fakes.Clock
	b     *openhandscloud.Backend
	eng   *engine.Engine
	store ledger.Store
}

func setup(t *testing.T, set policy.Settings, opt func(*openhandscloud.Backend)) *env {
	t.Helper()
	clock := fakes.NewClock(t0)
	f := fakes.NewOpenHands(t, map[string]string{key: "alice", otherKey: "bob"}, clock.Now)
	b := &openhandscloud.Backend{Client: fakes.Client(t, f.URL, remote.HeaderAuth("X-Access-Token", remote.NewSecret(key)))}
	if opt != nil {
		opt(b)
	}
	eng, store := fakes.Engine(t, clock, engine.Source{Name: "openhands-cloud[0]", Backend: b, Settings: set})
	return &env{f, clock, b, eng, store}
}

// sandbox adds a sandbox of alice's with one conversation last updated at
// updated (none when updated is zero).
func (e *env) sandbox(id, status string, updated time.Time, tags map[string]string) {
	e.f.AddSandbox(fakes.OpenHandsSandbox{ID: id, User: "alice", Status: status, CreatedAt: t0.Add(-30 * 24 * time.Hour)})
	if !updated.IsZero() {
		e.f.AddConversation(fakes.OpenHandsConversation{ID: "c-" + id, User: "alice", SandboxID: id, Tags: tags,
			CreatedAt: updated.Add(-time.Hour), UpdatedAt: updated, Execution: "idle"})
	}
}

func (e *env) pass(t *testing.T) (*plan.Plan, *plan.Applied) { return fakes.Pass(t, e.eng) }

var outcome = fakes.Outcome

func actions(p *plan.Plan) map[string]backend.Step {
	out := map[string]backend.Step{}
	for _, a := range p.Actions {
		out[a.Runtime] = a.Step
	}
	return out
}

func TestCapabilities(t *testing.T) {
	want := []string{"Lister", "Suspender", "Deleter", "NativeLifecycle"}
	if got := backend.Capabilities(&openhandscloud.Backend{}); !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

func TestIdleSandboxPausedNotBusyOrForeign(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, nil)
	e.sandbox("idle", "RUNNING", t0.Add(-2*time.Hour), nil)
	e.sandbox("fresh", "RUNNING", t0.Add(-5*time.Minute), nil)
	e.sandbox("asleep", "PAUSED", t0.Add(-2*time.Hour), nil)
	// Busy: its conversation's agent is running, whatever its age.
	e.sandbox("working", "RUNNING", t0.Add(-2*time.Hour), nil)
	e.f.AddConversation(fakes.OpenHandsConversation{ID: "c-working-2", User: "alice", SandboxID: "working",
		CreatedAt: t0.Add(-3 * time.Hour), UpdatedAt: t0.Add(-2 * time.Hour), Execution: "running"})
	// Bob's sandbox: alice's key never sees it.
	e.f.AddSandbox(fakes.OpenHandsSandbox{ID: "bobs", User: "bob", Status: "RUNNING", CreatedAt: t0.Add(-48 * time.Hour)})
	p, res := e.pass(t)
	if got := actions(p); len(got) != 1 || got["idle"] != backend.StepSuspend {
		t.Fatalf("plan: %+v", p.Actions)
	}
	if r := outcome(res, "idle"); r.Outcome != plan.Done {
		t.Fatalf("apply: %+v", r)
	}
	for id, want := range map[string]string{"idle": "PAUSED", "fresh": "RUNNING", "asleep": "PAUSED", "working": "RUNNING", "bobs": "RUNNING"} {
		if s, _ := e.f.Sandbox(id); s.Status != want {
			t.Errorf("%s is %s, want %s", id, s.Status, want)
		}
	}
	if n := e.f.Calls("POST /api/v1/sandboxes/{sandbox_id}/resume"); n != 0 {
		t.Errorf("%d resumes", n)
	}
}

func TestSharedSandboxPausedOnlyWhenNoConversationIsActive(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, nil)
	// Two old conversations share the sandbox; the second one's agent
	// waits for its user.
	e.sandbox("shared", "RUNNING", t0.Add(-2*time.Hour), nil)
	e.f.AddConversation(fakes.OpenHandsConversation{ID: "c-shared-2", User: "alice", SandboxID: "shared",
		CreatedAt: t0.Add(-3 * time.Hour), UpdatedAt: t0.Add(-2 * time.Hour), Execution: "waiting_for_confirmation"})
	p, _ := e.pass(t)
	if len(p.Actions) != 0 || len(p.Skipped) != 1 || !strings.Contains(p.Skipped[0].Reason, "c-shared-2 is waiting_for_confirmation") {
		t.Fatalf("a shared sandbox with an active conversation: %+v %+v", p.Actions, p.Skipped)
	}
	rts, err := e.b.List(context.Background(), backend.ListOptions{})
	if err != nil || len(rts) != 1 || rts[0].Labels["conversations"] != "c-shared,c-shared-2" {
		t.Fatalf("list: %v %+v", err, rts)
	}
	// Both idle now: paused.
	e.f.SetExecution("c-shared-2", "finished")
	p, res := e.pass(t)
	if got := actions(p); got["shared"] != backend.StepSuspend || outcome(res, "shared").Outcome != plan.Done {
		t.Fatalf("plan %+v, results %+v", p.Actions, res.Results)
	}
}

func TestRetentionForcedPathKeepsConversations(t *testing.T) {
	e := setup(t, policy.Settings{Retention: 7 * 24 * time.Hour, Grace: 24 * time.Hour}, nil)
	e.sandbox("stale", "PAUSED", t0.Add(-10*24*time.Hour), nil)
	e.sandbox("recent", "PAUSED", t0.Add(-2*24*time.Hour), nil)
	p, _ := e.pass(t)
	if len(p.Actions) != 0 || len(p.Scheduled) != 1 || p.Scheduled[0].Runtime != "stale" {
		t.Fatalf("first pass must only announce: %+v %+v", p.Actions, p.Scheduled)
	}
	e.clock.Advance(25 * time.Hour)
	p, res := e.pass(t)
	if got := actions(p); len(got) != 1 || outcome(res, "stale").Outcome != plan.Done {
		t.Fatalf("after the notice: %+v %+v", p.Actions, res.Results)
	}
	if e.f.Deleted("stale") != "sandbox deleted" || e.f.Deleted("recent") != "" {
		t.Fatalf("deleted: stale %q, recent %q", e.f.Deleted("stale"), e.f.Deleted("recent"))
	}
	if !e.f.Conversation("c-stale") {
		t.Fatal("the forced path deleted the conversation (its transcript)")
	}
	// The record knows which conversations used it.
	rec, err := e.store.Runtime(context.Background(), ledger.Key{Source: "openhands-cloud[0]", Backend: "openhands-cloud", ID: "stale"})
	if err != nil || rec.State != string(backend.StateArchived) {
		t.Fatalf("record: %+v %v", rec, err)
	}
}

func TestGentlePathDeletesConversationsAndNeverForces(t *testing.T) {
	e := setup(t, policy.Settings{}, func(b *openhandscloud.Backend) { b.DeleteConversations = true })
	ctx := context.Background()
	e.sandbox("mine", "PAUSED", t0.Add(-10*24*time.Hour), nil)
	rt := backend.Runtime{Key: backend.Key{Backend: "openhands-cloud", ID: "mine"}}
	if err := e.b.Delete(ctx, rt, backend.DeleteOptions{Step: backend.StepDelete}); err != nil {
		t.Fatal(err)
	}
	if e.f.Conversation("c-mine") || e.f.Deleted("mine") != "freed by its last conversation's deletion" {
		t.Fatalf("gentle path: conversation left %v, sandbox %q", e.f.Conversation("c-mine"), e.f.Deleted("mine"))
	}
	if n := e.f.Calls("DELETE /api/v1/sandboxes/{id}"); n != 0 {
		t.Fatalf("the gentle path forced %d deletes", n)
	}
	// Again: gone already, not an error.
	if err := e.b.Delete(ctx, rt, backend.DeleteOptions{Step: backend.StepDelete}); err != nil {
		t.Fatalf("second delete: %v", err)
	}

	// A conversation alice cannot see (bob's) shares the sandbox: hers go,
	// the sandbox stays, and that is an error, not a forced delete.
	e.sandbox("shared", "PAUSED", t0.Add(-10*24*time.Hour), nil)
	e.f.AddConversation(fakes.OpenHandsConversation{ID: "c-bob", User: "bob", SandboxID: "shared", CreatedAt: t0, UpdatedAt: t0})
	err := e.b.Delete(ctx, backend.Runtime{Key: backend.Key{Backend: "openhands-cloud", ID: "shared"}}, backend.DeleteOptions{Step: backend.StepDelete})
	if !errors.Is(err, backend.ErrConflict) {
		t.Fatalf("a sandbox kept by an invisible conversation: %v", err)
	}
	if _, ok := e.f.Sandbox("shared"); !ok || !e.f.Conversation("c-bob") {
		t.Fatal("bob's conversation or the sandbox went")
	}

	// An active conversation refuses the gentle path.
	e.sandbox("live", "RUNNING", t0, nil)
	e.f.Touch("c-live", "running")
	err = e.b.Delete(ctx, backend.Runtime{Key: backend.Key{Backend: "openhands-cloud", ID: "live"}}, backend.DeleteOptions{Step: backend.StepDelete})
	if !errors.Is(err, backend.ErrBusy) || !e.f.Conversation("c-live") {
		t.Fatalf("active conversation: %v", err)
	}
}

func TestTagScope(t *testing.T) {
	tags := map[string]string{"team": "agents"}
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, func(b *openhandscloud.Backend) { b.ConversationTags = tags; b.UserID = "alice" })
	e.sandbox("tagged", "RUNNING", t0.Add(-2*time.Hour), tags)
	e.sandbox("untagged", "RUNNING", t0.Add(-2*time.Hour), map[string]string{"team": "web"})
	e.sandbox("none", "RUNNING", time.Time{}, nil)
	// Mixed: one conversation with the tag, one without: not ours alone.
	e.sandbox("mixed", "RUNNING", t0.Add(-2*time.Hour), tags)
	e.f.AddConversation(fakes.OpenHandsConversation{ID: "c-mixed-2", User: "alice", SandboxID: "mixed", CreatedAt: t0.Add(-3 * time.Hour), UpdatedAt: t0.Add(-2 * time.Hour)})
	p, _ := e.pass(t)
	if got := actions(p); len(got) != 1 || got["tagged"] != backend.StepSuspend {
		t.Fatalf("plan: %+v", p.Actions)
	}
	for _, id := range []string{"untagged", "none", "mixed"} {
		if s, _ := e.f.Sandbox(id); s.Status != "RUNNING" {
			t.Errorf("%s outside the scope was touched: %s", id, s.Status)
		}
	}
}

func TestHeldLeasedPinnedUntouched(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute, Retention: 24 * time.Hour}, nil)
	for _, id := range []string{"leased", "held", "pinned"} {
		e.sandbox(id, "RUNNING", t0.Add(-48*time.Hour), nil)
	}
	ctx := context.Background()
	if _, err := e.eng.Observe(ctx, engine.ObserveOptions{Record: true, Light: true}); err != nil {
		t.Fatal(err)
	}
	lk := func(id string) ledger.Key {
		return ledger.Key{Source: "openhands-cloud[0]", Backend: "openhands-cloud", ID: id}
	}
	if _, err := e.store.Update(ctx, lk("leased"), func(r *ledger.RuntimeRecord) error { r.LeaseUntil = t0.Add(2 * time.Hour); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Update(ctx, lk("pinned"), func(r *ledger.RuntimeRecord) error { r.Pinned = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.TakeHold(ctx, ledger.HoldRequest{Key: lk("held"), Holder: "agent-7", TTL: time.Hour, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if p, _ := e.pass(t); len(p.Actions) != 0 {
		t.Fatalf("acted on protected sandboxes: %+v", p.Actions)
	}
}

func TestConversationJoinsBetweenPlanAndApply(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, nil)
	e.sandbox("idle", "RUNNING", t0.Add(-2*time.Hour), nil)
	ctx := context.Background()
	p, _, err := e.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil || len(p.Actions) != 1 {
		t.Fatalf("plan: %v %+v", err, p.Actions)
	}
	// A second, old conversation joins: no newer activity, but the set of
	// conversations changed.
	e.f.AddConversation(fakes.OpenHandsConversation{ID: "c-late", User: "alice", SandboxID: "idle", CreatedAt: t0.Add(-3 * time.Hour), UpdatedAt: t0.Add(-3 * time.Hour)})
	res, err := e.eng.Apply(ctx, p, engine.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := outcome(res, "idle"); r.Outcome != plan.Skip || !strings.HasPrefix(r.Reason, "changed since plan") {
		t.Fatalf("want changed since plan: %+v", r)
	}
	if s, _ := e.f.Sandbox("idle"); s.Status != "RUNNING" {
		t.Fatal("paused anyway")
	}
}

func TestPauseAndDeleteAreIdempotent(t *testing.T) {
	e := setup(t, policy.Settings{}, nil)
	ctx := context.Background()
	e.sandbox("s", "RUNNING", t0, nil)
	rt := backend.Runtime{Key: backend.Key{Backend: "openhands-cloud", ID: "s"}}
	for range 2 {
		if err := e.b.Suspend(ctx, rt, backend.SuspendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := e.b.Delete(ctx, rt, backend.DeleteOptions{Step: backend.StepDelete}); err != nil {
			t.Fatal(err)
		}
	}
	if e.f.Deleted("s") == "" {
		t.Fatal("not deleted")
	}
}

func TestBurstOutageAndCredentials(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, nil)
	e.sandbox("idle", "RUNNING", t0.Add(-2*time.Hour), nil)
	e.f.Fail(http.StatusTooManyRequests, 3) // with Retry-After
	_, res := e.pass(t)
	if r := outcome(res, "idle"); r.Outcome != plan.Done {
		t.Fatalf("a 429 burst the retries cover failed the pass: %+v", r)
	}
	e.sandbox("idle2", "RUNNING", t0.Add(-2*time.Hour), nil)
	e.f.Fail(http.StatusServiceUnavailable, 100)
	p, _, err := e.eng.Plan(context.Background(), engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 0 || len(p.Problems) == 0 || p.Problems[0].Code != plan.SourceUnreadable {
		t.Fatalf("outage not reported: %+v %+v", p.Actions, p.Problems)
	}
	// After three failed requests in a row the client cools down: the
	// next listing fails at once, without a request.
	for range 2 {
		if _, err := e.b.List(context.Background(), backend.ListOptions{}); !errors.Is(err, remote.ErrUnavailable) {
			t.Fatalf("during the outage: %v", err)
		}
	}
	before := e.f.Total()
	_, err = e.b.List(context.Background(), backend.ListOptions{})
	if !errors.Is(err, remote.ErrUnavailable) || !strings.Contains(err.Error(), "not calling it again") {
		t.Fatalf("during the cool-down: %v", err)
	}
	if e.f.Total() != before {
		t.Fatalf("%d requests during the cool-down", e.f.Total()-before)
	}
	if strings.Contains(fmt.Sprint(p.Skipped, err), key) {
		t.Fatal("the key leaked")
	}
}

func TestPausedSandboxNeverWokenAndAgentServerOnlyWhenRunning(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: time.Minute, Retention: 24 * time.Hour}, nil)
	e.f.AddSandbox(fakes.OpenHandsSandbox{ID: "run", User: "alice", Status: "RUNNING", CreatedAt: t0, SessionKey: "sess-0123456789", AgentServer: "http://127.0.0.1:9/agent"})
	e.f.AddSandbox(fakes.OpenHandsSandbox{ID: "asleep", User: "alice", Status: "PAUSED", CreatedAt: t0.Add(-time.Hour), SessionKey: "sess-x", AgentServer: "http://127.0.0.1:9/other"})
	ctx := context.Background()
	for range 3 {
		e.pass(t)
		if _, err := e.b.List(ctx, backend.ListOptions{IDs: []string{"asleep"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.b.Lifecycle(ctx, backend.Runtime{Key: backend.Key{Backend: "openhands-cloud", ID: "asleep"}}, backend.LifecycleOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if s, _ := e.f.Sandbox("asleep"); s.Status != "PAUSED" {
		t.Fatalf("inspection changed a paused sandbox: %s", s.Status)
	}
	e.f.AddSandbox(fakes.OpenHandsSandbox{ID: "run", User: "alice", Status: "RUNNING", CreatedAt: t0, SessionKey: "sess-0123456789", AgentServer: "http://127.0.0.1:9/agent"})
	rts, err := e.b.List(ctx, backend.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range rts {
		switch rt.ID {
		case "run":
			if rt.AgentServer == nil || rt.AgentServer.URL != "http://127.0.0.1:9/agent" || rt.AgentServer.SessionKey != "sess-0123456789" {
				t.Fatalf("agent-server of a running sandbox: %+v", rt.AgentServer)
			}
			j, _ := json.Marshal(rt)
			if strings.Contains(string(j)+fmt.Sprintf("%v %+v", rt, *rt.AgentServer), "sess-0123456789") {
				t.Fatalf("the session key is printed: %s", j)
			}
		case "asleep":
			if rt.AgentServer != nil {
				t.Fatal("a paused sandbox's agent-server would be contacted")
			}
		}
	}
}

func TestNativeLifecycleIsServerWide(t *testing.T) {
	e := setup(t, policy.Settings{}, func(b *openhandscloud.Backend) { b.ServerDelete = -1 })
	e.sandbox("s", "RUNNING", t0, nil)
	if _, err := e.b.List(context.Background(), backend.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	before := e.f.Total()
	l, err := e.b.Lifecycle(context.Background(), backend.Runtime{Key: backend.Key{Backend: "openhands-cloud", ID: "s"}},
		backend.LifecycleOptions{Set: &backend.Lifecycle{IdleSuspend: time.Hour}})
	if err != nil || l.IdleSuspend != openhandscloud.DefaultServerIdlePause || l.Delete != 0 || len(l.Can) != 0 {
		t.Fatalf("lifecycle: %+v %v", l, err)
	}
	if e.f.Total() != before {
		t.Fatal("the server-wide lifecycle made a request")
	}
}

func TestPagination(t *testing.T) {
	e := setup(t, policy.Settings{}, nil)
	for i := range 250 {
		e.sandbox(fmt.Sprintf("sb-%03d", i), "RUNNING", t0.Add(-time.Duration(i)*time.Minute), nil)
	}
	rts, err := e.b.List(context.Background(), backend.ListOptions{})
	if err != nil || len(rts) != 250 {
		t.Fatalf("listed %d: %v", len(rts), err)
	}
	if s, c := e.f.Calls("GET /api/v1/sandboxes/search"), e.f.Calls("GET /api/v1/app-conversations/search"); s != 3 || c != 3 {
		t.Errorf("pages: %d sandboxes, %d conversations; want 3 and 3", s, c)
	}
	if rts[5].LastActivity.IsZero() || !rts[5].LastActivity.Equal(t0.Add(-5*time.Minute)) {
		t.Errorf("activity from the newest conversation: %v", rts[5].LastActivity)
	}
}

// TestAgentServerClockRefinesActivity is the hook the engine will call:
// the listing carries the running sandbox's agent-server, the clock reads
// it (with the session key) and moves LastActivity forward; the paused
// sandbox's server is never contacted.
func TestAgentServerClockRefinesActivity(t *testing.T) {
	e := setup(t, policy.Settings{}, nil)
	running := fakes.NewAgentServer(t, "sess-0123456789", e.clock.Now, t0.Add(-2*time.Minute))
	paused := fakes.NewAgentServer(t, "sess-other", e.clock.Now, t0.Add(-time.Minute))
	paused.SetRunning(false) // a read fails the test
	e.f.AddSandbox(fakes.OpenHandsSandbox{ID: "run", User: "alice", Status: "RUNNING", CreatedAt: t0.Add(-5 * time.Hour), SessionKey: "sess-0123456789", AgentServer: running.URL})
	e.f.AddConversation(fakes.OpenHandsConversation{ID: "c-run", User: "alice", SandboxID: "run", CreatedAt: t0.Add(-5 * time.Hour), UpdatedAt: t0.Add(-3 * time.Hour)})
	e.f.AddSandbox(fakes.OpenHandsSandbox{ID: "asleep", User: "alice", Status: "PAUSED", CreatedAt: t0.Add(-5 * time.Hour), SessionKey: "sess-other", AgentServer: paused.URL})
	rts, err := e.b.List(context.Background(), backend.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&agentserver.Clock{Now: e.clock.Now}).Refine(context.Background(), rts); err != nil {
		t.Fatal(err)
	}
	for _, rt := range rts {
		switch rt.ID {
		case "run":
			if !rt.LastActivity.Equal(t0.Add(-2 * time.Minute)) {
				t.Errorf("the agent-server's clock was not used: %v", rt.LastActivity)
			}
		case "asleep":
			if !rt.LastActivity.Equal(t0.Add(-5 * time.Hour)) {
				t.Errorf("a paused sandbox's activity changed: %v", rt.LastActivity)
			}
		}
	}
	if running.Calls("GET /server_info") != 1 || paused.Total() != 0 {
		t.Fatalf("reads: running %d, paused %d", running.Calls("GET /server_info"), paused.Total())
	}
}
