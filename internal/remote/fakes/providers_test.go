package fakes

import (
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/reclaimer/reclaimer/internal/backend/modal/modalpb"
)

func TestNewSpecsLoad(t *testing.T) {
	for name, f := range map[string]func() (any, error){
		"openhands-cloud":       func() (any, error) { return OpenHandsCloudSpec() },
		"agent-server":          func() (any, error) { return AgentServerSpec() },
		"cloudflare-bridge":     func() (any, error) { return CloudflareBridgeSpec() },
		"cloudflare-containers": func() (any, error) { return CloudflareContainersSpec() },
	} {
		if _, err := f(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestProviderFakesReportWakingAndOutOfSpecCalls(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	rec := &recorder{TB: t}

	oh := NewOpenHands(rec, map[string]string{"k": "alice"}, now)
	oh.AddSandbox(OpenHandsSandbox{ID: "s", User: "alice", Status: "PAUSED"})
	auth := map[string]string{"X-Access-Token": "k"}
	if send(t, "POST", oh.URL+"/api/v1/sandboxes/s/resume", auth); !rec.reported("resume wakes") {
		t.Error("resume was not reported")
	}
	// The handler deletes the sandbox named in the query: a call without
	// it is outside the document.
	if code := send(t, "DELETE", oh.URL+"/api/v1/sandboxes/s", auth); code != http.StatusBadRequest || !rec.reported("does not match the spec") {
		t.Errorf("delete without sandbox_id: %d %v", code, rec.errs)
	}
	if code := send(t, "GET", oh.URL+"/api/v1/sandboxes/search?limit=500", auth); code != http.StatusBadRequest {
		t.Errorf("limit over 100: %d", code)
	}
	if code := send(t, "GET", oh.URL+"/api/v1/sandboxes/search", nil); code != http.StatusUnauthorized {
		t.Errorf("no key: %d", code)
	}

	cf := NewCloudflare(rec, "bk", "tok", "acc", now)
	cf.Add(CloudflareSandbox{Name: "n"})
	if send(t, "GET", cf.BridgeURL+"/v1/sandbox/n/running", map[string]string{"Authorization": "Bearer bk"}); !rec.reported("starts a sleeping container") {
		t.Error("/running was not reported")
	}
	if send(t, "POST", cf.BridgeURL+"/v1/sandbox/n/persist", map[string]string{"Authorization": "Bearer bk"}); !rec.reported("not awake") {
		t.Error("persist of a sleeping sandbox was not reported")
	}
	if code := send(t, "GET", cf.APIURL+"/accounts/acc/containers/applications/app-sandbox/instances-v2?per_page=5000",
		map[string]string{"Authorization": "Bearer tok"}); code != http.StatusBadRequest {
		t.Errorf("per_page over 1000: %d", code)
	}

	as := NewAgentServer(rec, "", now, now())
	if send(t, "GET", as.URL+"/api/conversations/search", nil); !rec.reported("only reads the idle clock") {
		t.Error("an agent-server call other than /server_info was not reported")
	}
	as.SetRunning(false)
	if send(t, "GET", as.URL+"/server_info", nil); !rec.reported("not running") {
		t.Error("reading a paused runtime's clock was not reported")
	}
}

func TestModalFakeRefusesWhatItWasNotTold(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	rec := &recorder{TB: t}
	f := NewModal(rec, "id", "secret", now)
	conn, err := grpc.NewClient(f.URL[len("http://"):], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-modal-token-id", "id", "x-modal-token-secret", "secret")
	c := modalpb.NewModalClientClient(conn)
	f.Allow("SandboxList")
	if _, err := c.SandboxTerminate(ctx, &modalpb.SandboxTerminateRequest{SandboxId: "sb-1"}); err == nil || !rec.reported("does not allow") {
		t.Errorf("a call the test did not allow: %v", err)
	}
	f.Allow(ModalRPCs...)
	if _, err := c.SandboxWait(ctx, &modalpb.SandboxWaitRequest{SandboxId: "sb-1", Timeout: 30}); err == nil || !rec.reported("must not wait") {
		t.Errorf("a waiting SandboxWait: %v", err)
	}
	if _, err := c.SandboxList(ctx, &modalpb.SandboxListRequest{IncludeFinished: true}); err == nil || !rec.reported("include_finished") {
		t.Errorf("listing finished sandboxes: %v", err)
	}
	// An RPC outside the service (an exec, say).
	if err := conn.Invoke(ctx, "/modal.client.ModalClient/ContainerExec", &modalpb.SandboxWaitRequest{}, &modalpb.SandboxWaitResponse{}); err == nil || !rec.reported("not a call reclaimer may make") {
		t.Errorf("an unknown RPC: %v", err)
	}
	if _, err := c.SandboxList(context.Background(), &modalpb.SandboxListRequest{}); err == nil {
		t.Error("a call without tokens was served")
	}
}
