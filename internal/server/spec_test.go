package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/api"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestServedDocumentIsTheFile: /openapi.json is api/openapi.yaml, and the
// generated code was made from this version of it.
func TestServedDocumentIsTheFile(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n"), server.Options{})
	resp, err := h.api.GetOpenAPI(h.ctx())
	if err != nil {
		t.Fatal(err)
	}
	served, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	file, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, api.YAML) {
		t.Fatal("the embedded document differs from api/openapi.yaml")
	}
	want, err := api.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if json.Unmarshal(served, &a) != nil || json.Unmarshal(want, &b) != nil || !jsonEqual(a, b) {
		t.Fatalf("served document differs from api/openapi.yaml")
	}
	if a.(map[string]any)["openapi"] != "3.1.0" {
		t.Fatalf("openapi version %v", a.(map[string]any)["openapi"])
	}
	sum := sha256.Sum256(file)
	stamp, err := os.ReadFile("../openapi/spec.sha256")
	if err != nil || strings.TrimSpace(string(stamp)) != hex.EncodeToString(sum[:]) {
		t.Fatalf("internal/openapi was generated from another version of api/openapi.yaml: run go generate ./internal/openapi")
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestGeneratedCodeIsFresh regenerates internal/openapi with the pinned
// generator, when its module is in the local cache (no network), and
// compares byte for byte.
func TestGeneratedCodeIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the generator")
	}
	gomodcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skip("no go command")
	}
	if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(gomodcache)), "github.com", "oapi-codegen", "oapi-codegen", "v2@v2.8.2")); err != nil {
		t.Skip("oapi-codegen v2.8.2 is not in the module cache; the spec stamp test still runs")
	}
	// The settings, writing into a temporary folder instead.
	tmp := t.TempDir()
	settings, err := os.ReadFile("../openapi/cfg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "openapi.gen.go")
	testtree.Write(t, filepath.Join(tmp, "cfg.yaml"), strings.Replace(string(settings), "output: openapi.gen.go", "output: "+out, 1))
	spec, _ := filepath.Abs("../../api/openapi.yaml")
	cmd := exec.Command("go", "run", "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2", "-config", "cfg.yaml", spec)
	cmd.Dir = tmp
	// The module cache as the only proxy: no network.
	cmd.Env = append(os.Environ(), "GOPROXY=file://"+filepath.Join(strings.TrimSpace(string(gomodcache)), "cache", "download"), "GOSUMDB=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("cannot run the generator offline: %v\n%s", err, msg)
	}
	got, _ := os.ReadFile(out)
	committed, _ := os.ReadFile("../openapi/openapi.gen.go")
	if !bytes.Equal(got, committed) {
		t.Fatal("internal/openapi/openapi.gen.go is stale: run go generate ./internal/openapi")
	}
}

// TestBodiesMatchTheDocument: what the server sends decodes strictly into
// the generated types (no field the document does not declare).
func TestBodiesMatchTheDocument(t *testing.T) {
	dir, cfg, _ := retentionSetup(t, 1, "")
	h := startDaemon(t, dir, cfg, server.Options{})
	h.waitFor("the start pass to announce the archive", scheduled(h, "conv1:repo"))
	get := func(method, path, body string, v any) {
		t.Helper()
		req, _ := http.NewRequest(method, h.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+h.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	get("GET", "/v1/status", "", &openapi.Status{})
	get("GET", "/v1/runtimes", "", &openapi.RuntimeList{})
	get("GET", "/v1/runtimes/conv1:repo", "", &openapi.Runtime{})
	var p openapi.Plan
	get("GET", "/v1/plan", "", &p)
	if len(p.Actions) != 1 {
		t.Fatalf("plan %+v", p)
	}
	var pass openapi.Pass
	get("POST", "/v1/passes", "{}", &pass)
	if len(pass.Applied.Results) != 1 {
		t.Fatalf("pass %+v", pass)
	}
	get("GET", "/v1/journal?limit=1", "", &openapi.Journal{})
	get("GET", "/healthz", "", &openapi.Health{})
}
