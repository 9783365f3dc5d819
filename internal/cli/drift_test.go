package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// edges runs one operation the three ways an operator can: the local CLI,
// the CLI with --server, and the HTTP API; the drift tests compare them.
type edges struct {
	t          *testing.T
	cfg, url   string
	token      string
	remoteArgs []string
}

func newEdges(t *testing.T, cfg string) *edges {
	url, tokenFile := serve(t, cfg)
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return &edges{t: t, cfg: cfg, url: url, token: strings.TrimSpace(string(tok)),
		remoteArgs: []string{"--server", url, "--token-file", tokenFile}}
}

func (e *edges) local(args ...string) (string, string, int) {
	return run(e.t, append([]string{"--config", e.cfg}, args...)...)
}

func (e *edges) remote(args ...string) (string, string, int) {
	return run(e.t, append(append([]string{}, e.remoteArgs...), args...)...)
}

// api sends one request and decodes the JSON answer into v (when not nil).
func (e *edges) api(method, path, body string, v any) int {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			e.t.Fatalf("%s %s: %v\n%s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
}

// snakeCase reports the first JSON key of v that is not snake_case.
func snakeCase(v any) string {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if !regexp.MustCompile(`^[a-z0-9_]+$`).MatchString(k) {
				return k
			}
			if bad := snakeCase(val); bad != "" {
				return bad
			}
		}
	case []any:
		for _, e := range x {
			if bad := snakeCase(e); bad != "" {
				return bad
			}
		}
	}
	return ""
}

// TestThreeEdgesAgree runs the operations that had drifted apart through
// the local CLI, the CLI with --server and the HTTP API, and holds them to
// the same answers.
func TestThreeEdgesAgree(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	for _, r := range []string{"r1", "r2", "r3", "r4"} {
		write(t, filepath.Join(runs, r, "home", ".cache", "blob"), strings.Repeat("c", 16<<10))
		write(t, filepath.Join(runs, r, "work", "notes.md"), "keep")
	}
	cfg := config(t, dir, "[server]\nlisten = \"127.0.0.1:0\"\ninterval = \"1h\"\n[[dirs]]\nroot = \""+runs+
		"\"\nhome = \"home\"\nworkspaces = [\"work\"]\nmax_lifetime = \"1h\"\n")
	e := newEdges(t, cfg)

	// A lease of 30 days is capped by max_lifetime, the same everywhere.
	outL, _, codeL := e.local("lease", "r1", "--for", "30d")
	outR, _, codeR := e.remote("lease", "r2", "--for", "30d")
	var lease struct {
		LeaseUntil time.Time `json:"lease_until"`
		Capped     bool      `json:"capped"`
	}
	status := e.api("POST", "/v1/runtimes/r3/lease", `{"until":"`+time.Now().Add(30*24*time.Hour).UTC().Format(time.RFC3339)+`"}`, &lease)
	if codeL != 0 || codeR != 0 || status != 200 || !strings.Contains(outL, "capped by max_lifetime") ||
		!strings.Contains(outR, "capped by max_lifetime") || !lease.Capped || lease.LeaseUntil.After(time.Now().Add(time.Hour)) {
		t.Fatalf("lease: local %d %q, --server %d %q, API %d %+v", codeL, outL, codeR, outR, status, lease)
	}

	// ls: the same rows, sizes included.
	var local, viaServer []map[string]any
	outL, _, _ = e.local("ls", "--json")
	outR, _, _ = e.remote("ls", "--json")
	decode(t, outL, &local)
	decode(t, outR, &viaServer)
	var api struct {
		Runtimes []map[string]any `json:"runtimes"`
	}
	e.api("GET", "/v1/runtimes?observe=true&sizes=true", "", &api)
	if len(local) != 4 || len(viaServer) != 4 || len(api.Runtimes) != 4 {
		t.Fatalf("ls: %d rows locally, %d through --server, %d from the API", len(local), len(viaServer), len(api.Runtimes))
	}
	for i := range local {
		for _, k := range []string{"id", "backend", "source", "state", "path", "size_bytes", "retention", "pinned", "lease_until", "unsaved"} {
			if a, b, c := local[i][k], viaServer[i][k], api.Runtimes[i][k]; !jsonEqual(a, b) || !jsonEqual(a, c) {
				t.Errorf("ls row %d %s: local %v, --server %v, API %v", i, k, a, b, c)
			}
		}
		if size, _ := local[i]["size_bytes"].(float64); size < 16<<10 {
			t.Errorf("ls row %d: size %v", i, local[i]["size_bytes"])
		}
	}

	// status: through --server, the JSON is the API's, last and next pass
	// included.
	var stR, stA map[string]any
	outR, _, codeR = e.remote("status", "--json")
	decode(t, outR, &stR)
	e.api("GET", "/v1/status", "", &stA)
	if codeR != 0 || stR["next_pass_at"] == nil || stR["last_pass"] == nil || !jsonEqual(stR["next_pass_at"], stA["next_pass_at"]) ||
		!jsonEqual(stR["last_pass"], stA["last_pass"]) {
		t.Fatalf("status --server %v\nAPI %v", stR, stA)
	}

	// A plan applied by its id through --server, and by its file locally.
	var p struct {
		ID      string           `json:"plan_id"`
		Actions []map[string]any `json:"actions"`
	}
	outR, _, _ = e.remote("plan", "--json")
	decode(t, outR, &p)
	if p.ID == "" {
		t.Fatalf("plan: %s", outR)
	}
	if out, errOut, code := e.remote("apply", "--plan", p.ID, "--json"); code != 0 || !strings.Contains(out, p.ID) {
		t.Fatalf("apply --plan ID through --server: exit %d %s %s", code, out, errOut)
	}
	saved := filepath.Join(dir, "plan.json")
	e.local("plan", "--out", saved)
	if out, errOut, code := e.local("apply", "--plan", saved, "--json"); code != 0 {
		t.Fatalf("apply --plan FILE: exit %d %s %s", code, out, errOut)
	}

	// pin A B with B unknown: neither, on every edge.
	for _, out := range []func() (string, string, int){
		func() (string, string, int) { return e.local("pin", "r1", "nope") },
		func() (string, string, int) { return e.remote("pin", "r1", "nope") },
	} {
		if _, errOut, code := out(); code != 1 || !strings.Contains(errOut, "nope") {
			t.Fatalf("pin r1 nope: exit %d %s", code, errOut)
		}
	}
	if code := e.api("POST", "/v1/marks", `{"runtimes":["r1","nope"],"pin":{"reason":"x"}}`, nil); code != 404 {
		t.Fatalf("POST /v1/marks with an unknown runtime: %d", code)
	}
	var rt map[string]any
	e.api("GET", "/v1/runtimes/r1", "", &rt)
	if rt["pinned"] != false {
		t.Fatalf("r1 was pinned although another runtime named was unknown: %v", rt)
	}

	// delete, then archives and log: the daemon's, and snake_case
	// everywhere.
	if _, errOut, code := e.remote("delete", "r4"); code != 0 {
		t.Fatalf("delete through --server: %d %s", code, errOut)
	}
	outR, _, _ = run(t, append(append([]string{}, e.remoteArgs...), "archives", "--json")...) // no --config: only the daemon knows
	var archives []map[string]any
	decode(t, outR, &archives)
	if len(archives) != 1 || archives[0]["runtime"] != "r4" {
		t.Fatalf("archives through --server: %s", outR)
	}
	var logL, logR []any
	outL, _, _ = e.local("log", "--json")
	outR, _, _ = e.remote("log", "--json")
	decode(t, outL, &logL)
	decode(t, outR, &logR)
	if len(logL) == 0 || !jsonEqual(logL, logR) {
		t.Fatalf("log: local %s\n--server %s", outL, outR)
	}
	for name, v := range map[string]any{"log": logL, "ls": local, "status": stR, "archives": archives} {
		if bad := snakeCase(v); bad != "" {
			t.Errorf("%s --json has the key %q", name, bad)
		}
	}
}

// TestProblemsThroughEveryEdge: a source that cannot be read is a problem
// of the local CLI, the CLI through a daemon and the API alike.
func TestProblemsThroughEveryEdge(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "gone")
	cfg := config(t, dir, "[server]\nlisten = \"127.0.0.1:0\"\ninterval = \"1h\"\n[[worktrees]]\nrepo = \""+repo+"\"\n")
	e := newEdges(t, cfg)
	want := "repository " + repo + " does not exist"
	for name, f := range map[string]func(...string) (string, string, int){"local": e.local, "--server": e.remote} {
		for _, cmd := range []string{"plan", "apply", "status"} {
			out, errOut, code := f(cmd, "--json")
			if code != 1 || !strings.Contains(out, want) || !strings.Contains(errOut, want) {
				t.Errorf("%s %s: exit %d\n%s\n%s", name, cmd, code, out, errOut)
			}
		}
	}
	var p struct {
		Problems []struct{ Code, Label, Message string } `json:"problems"`
	}
	e.api("GET", "/v1/plan", "", &p)
	if len(p.Problems) != 1 || p.Problems[0].Message != want || p.Problems[0].Label != `[[worktrees]] repo = "`+repo+`"` {
		t.Fatalf("GET /v1/plan problems: %+v", p.Problems)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
