package fakes

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// CloudflareSandbox is one sandbox (a Durable Object and, while awake, its
// container) the Cloudflare fake keeps.
type CloudflareSandbox struct {
	Name string
	// Awake: its container runs. A sleeping sandbox has no files.
	Awake bool
	// Files is /workspace while awake: relative path → content.
	Files     map[string]string
	StartedAt time.Time
	// StateAt is when the container last changed state.
	StateAt time.Time
	// Instance overrides the Containers API state ("failed", ...).
	Instance string
}

// Cloudflare is a contract fake of the Cloudflare Sandbox bridge Worker
// (BridgeURL, checked against its published document) and of the two
// operations of the account Containers API reclaimer calls (APIURL). Both
// see the same sandboxes. It fails the test when GET /v1/sandbox/{id}/running
// is called (it runs a command in the sandbox, starting a sleeping one), and
// when persist is asked of a sleeping sandbox (it would start it, empty).
type Cloudflare struct {
	bridge, api *contract
	BridgeURL   string
	APIURL      string
	Account     string
	Application string // the application's name; its id is "app-" + name
	Now         func() time.Time

	mu        sync.Mutex
	t         testing.TB
	sandboxes map[string]*CloudflareSandbox
	destroyed map[string]bool
	created   int
	hydrated  map[string]int
}

// NewCloudflare starts the two servers: the bridge accepts the bearer key
// bridgeKey, the Containers API the bearer token apiToken for account.
func NewCloudflare(t testing.TB, bridgeKey, apiToken, account string, now func() time.Time) *Cloudflare {
	t.Helper()
	bspec, err := CloudflareBridgeSpec()
	if err != nil {
		t.Fatal(err)
	}
	cspec, err := CloudflareContainersSpec()
	if err != nil {
		t.Fatal(err)
	}
	f := &Cloudflare{t: t, Now: now, Account: account, Application: "sandbox", sandboxes: map[string]*CloudflareSandbox{},
		destroyed: map[string]bool{}, hydrated: map[string]int{}}
	bsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.bridge.serve(w, r, f.handleBridge) }))
	t.Cleanup(bsrv.Close)
	asrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.api.serve(w, r, f.handleAPI) }))
	t.Cleanup(asrv.Close)
	f.BridgeURL, f.APIURL = bsrv.URL, asrv.URL
	bearer := func(key string) func(string, *http.Request) error {
		return func(scheme string, r *http.Request) error {
			if r.Header.Get("Authorization") == "Bearer "+key {
				return nil
			}
			return fmt.Errorf("scheme %s: no valid credential", scheme)
		}
	}
	f.bridge = newContract(t, "cloudflare bridge", bspec, bsrv.URL, bearer(bridgeKey))
	f.api = newContract(t, "cloudflare containers", cspec, asrv.URL, bearer(apiToken))
	f.bridge.forbidden["/v1/sandbox/{id}/running"] = "it runs exec(\"true\") in the sandbox: starts a sleeping container and counts as activity"
	return f
}

// Bridge and API are the two contracts, for counting calls and injecting
// faults.
func (f *Cloudflare) Bridge() *contract { return f.bridge }
func (f *Cloudflare) API() *contract    { return f.api }

// Add puts a sandbox in the fake.
func (f *Cloudflare) Add(s CloudflareSandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.Files == nil {
		s.Files = map[string]string{}
	}
	if !s.Awake {
		s.Files = map[string]string{}
	}
	f.sandboxes[s.Name] = &s
}

// Sleep puts a sandbox to sleep as Cloudflare does after sleepAfter: every
// file is lost.
func (f *Cloudflare) Sleep(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.sandboxes[name]; s != nil {
		s.Awake, s.Files, s.StateAt = false, map[string]string{}, f.Now()
	}
}

// Get returns a copy of a sandbox.
func (f *Cloudflare) Get(name string) (CloudflareSandbox, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sandboxes[name]
	if !ok {
		return CloudflareSandbox{}, false
	}
	c := *s
	c.Files = map[string]string{}
	for k, v := range s.Files {
		c.Files[k] = v
	}
	return c, true
}

// Remove deletes a sandbox behind reclaimer's back (not a destroy through
// the bridge: Destroyed stays false).
func (f *Cloudflare) Remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sandboxes, name)
}

// Destroyed tells whether a sandbox was destroyed.
func (f *Cloudflare) Destroyed(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.destroyed[name]
}

func instanceID(name string) string {
	h := sha256.Sum256([]byte("do:" + name))
	return hex.EncodeToString(h[:])
}

func cfError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": msg, "code": code})
}

func (f *Cloudflare) handleBridge(w http.ResponseWriter, r *http.Request, p map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := p["id"]
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && path == "/v1/sandbox":
		f.created++
		id := fmt.Sprintf("restored%016d", f.created)
		f.sandboxes[id] = &CloudflareSandbox{Name: id, Files: map[string]string{}, StateAt: f.Now()}
		writeJSON(w, http.StatusOK, map[string]any{"id": id})
	case r.Method == http.MethodDelete:
		delete(f.sandboxes, name)
		f.destroyed[name] = true
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/persist"):
		s := f.sandboxes[name]
		if s == nil || !s.Awake {
			f.t.Errorf("cloudflare fake: persist of sandbox %q that is not awake: it starts an empty container", name)
			s = &CloudflareSandbox{Name: name, Awake: true, Files: map[string]string{}, StartedAt: f.Now(), StateAt: f.Now()}
			f.sandboxes[name] = s
		}
		var excl []string
		for _, e := range strings.Split(r.URL.Query().Get("excludes"), ",") {
			if e = strings.Trim(e, "/ "); e != "" {
				if strings.Contains(e, "..") {
					cfError(w, http.StatusBadRequest, "invalid_request", `exclude paths must not contain ".."`)
					return
				}
				excl = append(excl, e)
			}
		}
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, rel := range slices.Sorted(keys(s.Files)) {
			skip := false
			for _, e := range excl {
				skip = skip || rel == e || strings.HasPrefix(rel, e+"/") || strings.Contains(rel, "/"+e+"/")
			}
			if skip {
				continue
			}
			body := s.Files[rel]
			tw.WriteHeader(&tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)})
			tw.Write([]byte(body))
		}
		tw.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		w.Write(buf.Bytes())
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/hydrate"):
		s := f.sandboxes[name]
		if s == nil {
			s = &CloudflareSandbox{Name: name, Files: map[string]string{}}
			f.sandboxes[name] = s
		}
		s.Awake, s.StartedAt, s.StateAt = true, f.Now(), f.Now()
		tr := tar.NewReader(r.Body)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				cfError(w, http.StatusBadGateway, "workspace_archive_write_error", "tar extract failed: "+err.Error())
				return
			}
			body, _ := io.ReadAll(tr)
			if h.Typeflag == tar.TypeReg {
				s.Files[h.Name] = string(body)
			}
		}
		f.hydrated[name]++
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	default:
		f.t.Errorf("cloudflare fake: %s %s is in the spec but reclaimer has no business calling it", r.Method, path)
		cfError(w, http.StatusBadRequest, "invalid_request", "not implemented by the fake")
	}
}

func keys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func cfOK(w http.ResponseWriter, result any, next string) {
	info := map[string]any{"per_page": 100}
	if next != "" {
		info["next_page_token"] = next
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "errors": []any{}, "messages": []any{}, "result": result, "result_info": info})
}

func (f *Cloudflare) handleAPI(w http.ResponseWriter, r *http.Request, p map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p["account_id"] != f.Account {
		writeJSON(w, http.StatusNotFound, map[string]any{"success": false, "errors": []any{map[string]any{"code": 10000, "message": "account not found"}},
			"messages": []any{}, "result": nil})
		return
	}
	q := r.URL.Query()
	if strings.HasSuffix(r.URL.Path, "/applications") {
		apps := []map[string]any{}
		if n := q.Get("name"); n == "" || n == f.Application {
			apps = append(apps, map[string]any{"id": "app-" + f.Application, "name": f.Application, "account_id": f.Account})
		}
		cfOK(w, apps, "")
		return
	}
	if p["application_id"] != "app-"+f.Application {
		writeJSON(w, http.StatusNotFound, map[string]any{"success": false, "errors": []any{map[string]any{"code": 10001, "message": "application not found"}},
			"messages": []any{}, "result": nil})
		return
	}
	prefix := q.Get("name_prefix")
	var names []string
	for n := range f.sandboxes {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	per := 100
	if v := q.Get("per_page"); v != "" {
		per, _ = strconv.Atoi(v)
	}
	start := 0
	if tok := q.Get("page_token"); tok != "" {
		b, _ := base64.RawURLEncoding.DecodeString(tok)
		start, _ = strconv.Atoi(string(b))
	}
	start = min(start, len(names))
	end := min(start+per, len(names))
	out := []map[string]any{}
	for _, n := range names[start:end] {
		s := f.sandboxes[n]
		state := "stopped"
		if s.Awake {
			state = "running"
		}
		if s.Instance != "" {
			state = s.Instance
		}
		inst := map[string]any{"id": instanceID(n), "application_id": "app-" + f.Application, "image": "registry/sandbox:1", "name": n,
			"status": map[string]any{"state": state, "updated_at": s.StateAt.UTC().Format(time.RFC3339Nano)}}
		if s.Awake {
			inst["started_at"] = s.StartedAt.UTC().Format(time.RFC3339Nano)
		}
		out = append(out, inst)
	}
	next := ""
	if end < len(names) {
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	cfOK(w, out, next)
}
