package fakes

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// E2BSandbox is one sandbox the E2B fake keeps.
type E2BSandbox struct {
	ID        string
	Template  string
	Metadata  map[string]string
	State     string // "running" or "paused"
	StartedAt time.Time
	EndAt     time.Time
	// OnTimeout is what happens at EndAt: "pause" (auto-pause) or "kill".
	OnTimeout string
}

// E2B is a contract fake of E2B's control-plane API.
type E2B struct {
	*contract
	URL string
	Key string
	// Now is the fake's clock; tests move it.
	Now func() time.Time

	mu        sync.Mutex
	sandboxes map[string]*E2BSandbox
	killed    map[string]bool
}

// NewE2B starts an E2B fake that accepts the API key key.
func NewE2B(t testing.TB, key string, now func() time.Time) *E2B {
	t.Helper()
	spec, err := E2BSpec()
	if err != nil {
		t.Fatal(err)
	}
	f := &E2B{Key: key, Now: now, sandboxes: map[string]*E2BSandbox{}, killed: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serve(w, r, f.handle)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	f.contract = newContract(t, "e2b", spec, srv.URL, func(scheme string, r *http.Request) error {
		if scheme == "ApiKeyAuth" && r.Header.Get("X-API-Key") == key {
			return nil
		}
		return fmt.Errorf("scheme %s: no valid credential", scheme)
	})
	f.forbidden["/sandboxes/{sandboxID}/connect"] = "connect resumes a paused sandbox and counts as activity"
	f.forbidden["/sandboxes/{sandboxID}/resume"] = "resume wakes a paused sandbox"
	return f
}

// Add puts a sandbox in the fake.
func (f *E2B) Add(s E2BSandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.State == "" {
		s.State = "running"
	}
	if s.OnTimeout == "" {
		s.OnTimeout = "pause"
	}
	if s.Template == "" {
		s.Template = "base"
	}
	f.sandboxes[s.ID] = &s
}

// Remove deletes a sandbox behind reclaimer's back (the provider's doing).
func (f *E2B) Remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sandboxes, id)
}

// Get returns a copy of a sandbox, after its timers ran.
func (f *E2B) Get(id string) (E2BSandbox, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tick()
	s, ok := f.sandboxes[id]
	if !ok {
		return E2BSandbox{}, false
	}
	return *s, true
}

// Killed tells whether a sandbox was killed (by a request or its timeout).
func (f *E2B) Killed(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.killed[id]
}

// tick runs the timers: a running sandbox past its end is paused or killed.
func (f *E2B) tick() {
	now := f.Now()
	for id, s := range f.sandboxes {
		if s.State == "running" && !now.Before(s.EndAt) {
			if s.OnTimeout == "kill" {
				delete(f.sandboxes, id)
				f.killed[id] = true
			} else {
				s.State = "paused"
			}
		}
	}
}

func e2bError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

func (f *E2B) handle(w http.ResponseWriter, r *http.Request, p map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tick()
	now := f.Now()
	id := p["sandboxID"]
	s := f.sandboxes[id]
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && path == "/v2/sandboxes":
		f.list(w, r)
	case s == nil && id != "":
		e2bError(w, http.StatusNotFound, "sandbox \""+id+"\" doesn't exist or you don't have access to it")
	case r.Method == http.MethodGet && id != "" && !strings.Contains(strings.TrimPrefix(path, "/sandboxes/"), "/"):
		d := f.listed(s)
		d["lifecycle"] = map[string]any{"autoResume": false, "onTimeout": s.OnTimeout}
		writeJSON(w, http.StatusOK, d)
	case r.Method == http.MethodDelete:
		delete(f.sandboxes, id)
		f.killed[id] = true
		w.WriteHeader(http.StatusNoContent)
	case strings.HasSuffix(path, "/pause"):
		if s.State == "paused" {
			e2bError(w, http.StatusConflict, "sandbox \""+id+"\" is already paused")
			return
		}
		s.State = "paused"
		w.WriteHeader(http.StatusNoContent)
	case strings.HasSuffix(path, "/timeout"):
		var body struct {
			Timeout int64 `json:"timeout"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		// The end moves whatever the state; a paused sandbox's timer runs
		// again only when it is resumed.
		s.EndAt = now.Add(time.Duration(body.Timeout) * time.Second)
		w.WriteHeader(http.StatusNoContent)
	case strings.HasSuffix(path, "/refreshes"):
		var body struct {
			Duration int64 `json:"duration"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		if end := now.Add(time.Duration(body.Duration) * time.Second); end.After(s.EndAt) {
			s.EndAt = end
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		f.t.Errorf("e2b fake: %s %s is in the spec but reclaimer has no business calling it", r.Method, path)
		e2bError(w, http.StatusNotImplemented, "not implemented by the fake")
	}
}

func (f *E2B) listed(s *E2BSandbox) map[string]any {
	m := map[string]any{"templateID": s.Template, "sandboxID": s.ID, "clientID": "fake", "startedAt": s.StartedAt.UTC().Format(time.RFC3339Nano),
		"endAt": s.EndAt.UTC().Format(time.RFC3339Nano), "cpuCount": 2, "memoryMB": 512, "diskSizeMB": 1024, "state": s.State, "envdVersion": "0.2.0"}
	if s.Metadata != nil {
		m["metadata"] = s.Metadata
	}
	return m
}

// list serves GET /v2/sandboxes: metadata and state filters, newest first
// by default, limit (at most 100) and an opaque nextToken.
func (f *E2B) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var want url.Values
	if m := q.Get("metadata"); m != "" {
		var err error
		if want, err = url.ParseQuery(m); err != nil {
			e2bError(w, http.StatusBadRequest, "invalid metadata query")
			return
		}
	}
	states := []string{"running", "paused"}
	if st := q.Get("state"); st != "" {
		states = strings.Split(st, ",")
	}
	var all []*E2BSandbox
	for _, s := range f.sandboxes {
		if !slices.Contains(states, s.State) {
			continue
		}
		ok := true
		for k := range want {
			if s.Metadata[k] != want.Get(k) {
				ok = false
			}
		}
		if ok {
			all = append(all, s)
		}
	}
	asc := q.Get("order") == "asc"
	slices.SortFunc(all, func(a, b *E2BSandbox) int {
		c := a.StartedAt.Compare(b.StartedAt)
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if !asc {
			c = -c
		}
		return c
	})
	limit := 100
	if l := q.Get("limit"); l != "" {
		limit, _ = strconv.Atoi(l)
	}
	start := 0
	if tok := q.Get("nextToken"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err == nil {
			start, err = strconv.Atoi(string(b))
		}
		if err != nil || start < 0 || start > len(all) {
			e2bError(w, http.StatusBadRequest, "invalid next token")
			return
		}
	}
	end := min(start+limit, len(all))
	page := make([]map[string]any, 0, end-start)
	for _, s := range all[start:end] {
		page = append(page, f.listed(s))
	}
	if end < len(all) {
		w.Header().Set("X-Next-Token", base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end))))
	}
	writeJSON(w, http.StatusOK, page)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
