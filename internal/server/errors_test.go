package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// raw sends one request with an optional token and returns status and the
// decoded error body (zero when the body is not an error).
func raw(t *testing.T, h *daemon, method, path, body, token string) (int, openapi.Error, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e openapi.Error
	_ = json.Unmarshal(data, &e)
	return resp.StatusCode, e, resp.Header
}

func runFolders(t *testing.T, dir string, names ...string) string {
	t.Helper()
	runs := filepath.Join(dir, "runs")
	for _, n := range names {
		testtree.Write(t, filepath.Join(runs, n, "persistence", "notes.txt"), "work of "+n)
	}
	if err := os.MkdirAll(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestAuth: every endpoint but /healthz needs the token; the token made
// at first start is private to its owner.
func TestAuth(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n"), server.Options{})
	fi, err := os.Stat(h.d.TokenFile())
	if err != nil || fi.Mode().Perm() != 0o600 || len(h.token) < 32 {
		t.Fatalf("token file: %v, mode %v, %d characters", err, fi.Mode(), len(h.token))
	}
	if code, _, _ := raw(t, h, "GET", "/healthz", "", ""); code != 200 {
		t.Fatalf("healthz without a token: %d", code)
	}
	for _, tc := range []struct{ name, header string }{
		{"none", ""}, {"wrong", "Bearer " + strings.Repeat("x", len(h.token))}, {"prefix", "Bearer " + h.token[:10]},
		{"basic", "Basic " + h.token}, {"bare", h.token},
	} {
		for _, path := range []string{"/v1/status", "/v1/runtimes", "/metrics", "/openapi.json", "/v1/nothing"} {
			req, _ := http.NewRequest("GET", h.url+path, nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var e openapi.Error
			_ = json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			if resp.StatusCode != 401 || e.Error.Code != openapi.Unauthorized || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s token, GET %s: %d %+v", tc.name, path, resp.StatusCode, e)
			}
		}
	}
	if code, _, _ := raw(t, h, "GET", "/v1/status", "", h.token); code != 200 {
		t.Fatalf("with the token: %d", code)
	}
}

// TestRefusesOpenListenWithoutToken: listening beyond loopback needs a
// token file set explicitly.
func TestRefusesOpenListenWithoutToken(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	testtree.Write(t, cfg, "[ledger]\npath = \""+filepath.Join(dir, "l.db")+"\"\n[server]\nlisten = \"0.0.0.0:0\"\n")
	_, err := server.Open(context.Background(), server.Options{ConfigPath: cfg, Logs: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "token_file") {
		t.Fatalf("open with 0.0.0.0 and no token file: %v", err)
	}
	tok := filepath.Join(dir, "token")
	testtree.Write(t, tok, "a-token-of-enough-length\n")
	testtree.Write(t, cfg, "[ledger]\npath = \""+filepath.Join(dir, "l.db")+"\"\n[server]\nlisten = \"0.0.0.0:0\"\ntoken_file = \""+tok+"\"\n")
	d, err := server.Open(context.Background(), server.Options{ConfigPath: cfg, Logs: io.Discard})
	if err != nil {
		t.Fatalf("with a token file: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Serve(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestErrorCodes drives each error status through the real server.
func TestErrorCodes(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1", "r2")
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\nmax_lifetime = \"1h\"\n"), server.Options{})
	h.waitFor("the start pass to record r1", func() bool {
		code, _, _ := raw(t, h, "GET", "/v1/runtimes/r1", "", h.token)
		return code == 200
	})
	tok := h.token
	hold := func(body string) (int, openapi.Error) {
		code, e, _ := raw(t, h, "POST", "/v1/runtimes/r1/holds", body, tok)
		return code, e
	}
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		field, says              string
	}{
		{"not JSON", "POST", "/v1/runtimes/r1/holds", `{"holder": `, 400, "", "ends early"},
		{"garbage", "POST", "/v1/runtimes/r1/holds", `holder=x`, 400, "", "not valid JSON"},
		{"unknown field", "POST", "/v1/runtimes/r1/holds", `{"holder":"h","ttl":"1m","tll":"2m"}`, 400, "tll", "unknown field"},
		{"wrong type", "POST", "/v1/runtimes/r1/holds", `{"holder":7,"ttl":"1m"}`, 400, "holder", "want string"},
		{"no ttl", "POST", "/v1/runtimes/r1/holds", `{"holder":"h"}`, 400, "ttl", "required"},
		{"bad ttl", "POST", "/v1/runtimes/r1/holds", `{"holder":"h","ttl":"soon"}`, 400, "ttl", "soon"},
		{"negative ttl", "POST", "/v1/runtimes/r1/holds", `{"holder":"h","ttl":"-5m"}`, 400, "ttl", ""},
		{"two values", "POST", "/v1/runtimes/r1/holds", `{"holder":"h","ttl":"1m"} {}`, 400, "", "more than one"},
		{"empty body", "POST", "/v1/runtimes/r1/holds", ``, 400, "", "required"},
		{"bad time", "POST", "/v1/runtimes/r1/activity", `{"at":"yesterday"}`, 400, "at", "RFC 3339"},
		{"future", "POST", "/v1/runtimes/r1/activity", `{"at":"2999-01-01T00:00:00Z"}`, 400, "at", "future"},
		{"bad step", "POST", "/v1/passes", `{"steps":["caches","explode"]}`, 400, "steps[1]", "explode"},
		{"plan and steps", "POST", "/v1/passes", `{"plan_id":"p","steps":["caches"]}`, 400, "plan_id", ""},
		{"bad limit", "GET", "/v1/runtimes?limit=50000", ``, 400, "limit", "between 1 and 10000"},
		{"limit not a number", "GET", "/v1/journal?limit=ten", ``, 400, "limit", ""},
		{"bad cursor", "GET", "/v1/runtimes?cursor=%21%21", ``, 400, "cursor", ""},
		{"bad backend", "GET", "/v1/runtimes/r1?backend=docker", ``, 400, "backend", "docker"},
		{"retention both", "PUT", "/v1/runtimes/r1/retention", `{"days":3,"default":true}`, 400, "days", "not both"},
		{"retention neither", "PUT", "/v1/runtimes/r1/retention", `{}`, 400, "days", ""},
		{"lease past", "POST", "/v1/runtimes/r1/lease", `{"until":"2001-01-01T00:00:00Z"}`, 400, "until", "not in the future"},
		{"release without whom", "DELETE", "/v1/runtimes/r1", ``, 400, "conversation", ""},
		{"register bad id", "POST", "/v1/runtimes", `{"backend":"dir","id":"a/b"}`, 400, "id", "/"},
		{"batch bad backend", "POST", "/v1/activity", `{"reports":[{"backend":"dir","id":"r1"},{"backend":"zz","id":"r1"}]}`, 400, "reports[1].backend", "zz"},
		{"unknown runtime", "GET", "/v1/runtimes/nope", ``, 404, "", "nope"},
		{"unknown endpoint", "GET", "/v1/nothing", ``, 404, "", "no endpoint"},
		{"unknown plan", "POST", "/v1/passes", `{"plan_id":"20200101T000000Z-00000000"}`, 404, "", "not made"},
		{"not an owner", "DELETE", "/v1/runtimes/r1?conversation=c9", ``, 404, "", "c9"},
		{"lease over the cap", "POST", "/v1/runtimes/r1/lease", `{"until":"2999-01-01T00:00:00Z"}`, 200, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, e, _ := raw(t, h, tc.method, tc.path, tc.body, tok)
			if code != tc.code || e.Error.Field != tc.field || !strings.Contains(e.Error.Message, tc.says) {
				t.Fatalf("%s %s %s: %d %+v; want %d field %q saying %q", tc.method, tc.path, tc.body, code, e, tc.code, tc.field, tc.says)
			}
		})
	}

	// The lease was capped at the lifetime cap.
	lease, err := h.api.LeaseRuntimeWithResponse(h.ctx(), "r2", nil, openapi.LeaseRequest{Until: time.Now().Add(30 * 24 * time.Hour)})
	if err != nil || lease.JSON200 == nil || !lease.JSON200.Capped || lease.JSON200.LeaseUntil.After(time.Now().Add(time.Hour)) {
		t.Fatalf("lease: %v %s", err, body(lease))
	}

	// 409: a hold id of another runtime.
	code, _ := hold(`{"holder":"h","ttl":"1m"}`)
	if code != 201 {
		t.Fatalf("hold: %d", code)
	}
	other, _ := h.api.TakeHoldWithResponse(h.ctx(), "r2", nil, openapi.HoldRequest{Holder: "h", Ttl: "1m"})
	ren, _ := h.api.RenewHoldWithResponse(h.ctx(), "r1", other.JSON201.HoldID, nil, openapi.HoldRenewal{Ttl: "1m"})
	if ren.JSON409 == nil || ren.JSON409.Error.Code != openapi.Conflict {
		t.Fatalf("renew another runtime's hold: %s", body(ren))
	}

	// 413: a body over the limit, for one report and for a batch.
	code, e := hold(`{"holder":"` + strings.Repeat("h", 70<<10) + `","ttl":"1m"}`)
	if code != 413 || e.Error.Code != openapi.TooLarge {
		t.Fatalf("oversized hold: %d %+v", code, e)
	}
	if code, e, _ := raw(t, h, "POST", "/v1/activity", `{"reports":[`+strings.Repeat(`{"backend":"dir","id":"r1"},`, 200000)+`{}]}`, tok); code != 413 {
		t.Fatalf("oversized batch: %d %+v", code, e)
	}
}

// TestBusyAndArchived423: while a pass holds a runtime's lock, a hold
// that cannot wait long enough gets 423, and so does a second pass.
func TestBusy423(t *testing.T) {
	dir, cfg, _ := retentionSetup(t, 1, "hold_wait = \"100ms\"")
	g := newGate()
	h := startDaemon(t, dir, cfg, server.Options{WrapSources: gateAll(g)})
	h.waitFor("the start pass to announce the archive", scheduled(h, "conv1:repo"))
	done := make(chan struct{})
	go func() { h.pass(openapi.PassRequest{}); close(done) }()
	<-g.entered
	resp, err := h.api.TakeHoldWithResponse(h.ctx(), "conv1:repo", nil, openapi.HoldRequest{Holder: "late", Ttl: "1m"})
	if err != nil || status(resp) != 423 || !strings.Contains(body(resp), "busy") {
		t.Fatalf("hold during a pass with hold_wait 100ms: %v %s", err, body(resp))
	}
	second, err := h.api.RunPassWithResponse(h.ctx(), openapi.PassRequest{DryRun: true})
	if err != nil || status(second) != 423 {
		t.Fatalf("a second pass: %v %s", err, body(second))
	}
	close(g.release)
	<-done
}
