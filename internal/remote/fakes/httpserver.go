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

// HTTPRuntime is one runtime the http backend fake keeps.
type HTTPRuntime struct {
	ID           string
	State        string // running, suspended, ...
	LastActivity time.Time
	CreatedAt    time.Time
	Labels       map[string]string
	SuspendedAt  time.Time
	// Timers in seconds (0 off; Delete -1: at once upon suspension).
	IdleSuspend, Archive, Delete int64
	// Deadline, when set, is an absolute timer; DeadlineAction what it
	// does then ("suspend", "delete", or "" for a server that does not
	// say, which the document allows).
	Deadline       time.Time
	DeadlineAction string
	// Changeable, when not nil, replaces the timers the server lets
	// reclaimer change (default idle_suspend, archive, delete, and
	// deadline where there is one).
	Changeable []string
}

// HTTPServer is a server of reclaimer's http backend protocol that checks
// every request and answer against api/http-backend.yaml.
type HTTPServer struct {
	*contract
	URL string
	Now func() time.Time
	// Operations advertised in /capabilities.
	Operations []string

	mu       sync.Mutex
	runtimes map[string]*HTTPRuntime
	deleted  map[string]string
}

// NewHTTPServer starts a protocol server that accepts the bearer token.
func NewHTTPServer(t testing.TB, token string, now func() time.Time, ops ...string) *HTTPServer {
	t.Helper()
	spec, err := HTTPBackendSpec()
	if err != nil {
		t.Fatal(err)
	}
	f := &HTTPServer{Now: now, Operations: ops, runtimes: map[string]*HTTPRuntime{}, deleted: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serve(w, r, f.handle)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	f.contract = newContract(t, "http", spec, srv.URL, func(scheme string, r *http.Request) error {
		if scheme == "bearer" && r.Header.Get("Authorization") == "Bearer "+token {
			return nil
		}
		return fmt.Errorf("scheme %s: no valid credential", scheme)
	})
	return f
}

// Add puts a runtime in the server.
func (f *HTTPServer) Add(r HTTPRuntime) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.State == "" {
		r.State = "running"
	}
	f.runtimes[r.ID] = &r
}

// Remove deletes a runtime behind reclaimer's back.
func (f *HTTPServer) Remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.runtimes, id)
}

// Get returns a copy of a runtime after its timers ran.
func (f *HTTPServer) Get(id string) (HTTPRuntime, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tick()
	r, ok := f.runtimes[id]
	if !ok {
		return HTTPRuntime{}, false
	}
	return *r, true
}

func secs(n int64) time.Duration { return time.Duration(n) * time.Second }

func (f *HTTPServer) tick() {
	now := f.Now()
	for id, r := range f.runtimes {
		if r.State == "running" && r.IdleSuspend > 0 && !now.Before(r.LastActivity.Add(secs(r.IdleSuspend))) {
			r.State, r.SuspendedAt = "suspended", r.LastActivity.Add(secs(r.IdleSuspend))
		}
		if r.State == "suspended" && (r.Delete == -1 || r.Delete > 0 && !now.Before(r.SuspendedAt.Add(secs(r.Delete)))) {
			delete(f.runtimes, id)
			f.deleted[id] = "deleted by its timer"
		}
	}
}

func httpError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"message": msg})
}

func (f *HTTPServer) can(op string) bool { return slices.Contains(f.Operations, op) }

func (f *HTTPServer) handle(w http.ResponseWriter, r *http.Request, p map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tick()
	now := f.Now()
	path := r.URL.Path
	if path == "/capabilities" {
		ops := f.Operations
		if ops == nil {
			ops = []string{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"protocol": 1, "operations": ops})
		return
	}
	if path == "/runtimes" {
		f.list(w, r)
		return
	}
	id, err := url.PathUnescape(p["id"]) // the route gives the segment as sent
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad id")
		return
	}
	rt := f.runtimes[id]
	if rt == nil {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent) // already gone
			return
		}
		httpError(w, http.StatusNotFound, "no runtime "+id)
		return
	}
	rest := strings.TrimPrefix(path, "/runtimes/"+id)
	unadvertised := func(op string) bool {
		if !f.can(op) {
			f.t.Errorf("http fake: %s %s called, but %q was not advertised", r.Method, path, op)
			httpError(w, http.StatusNotImplemented, "not supported")
			return true
		}
		return false
	}
	switch {
	case r.Method == http.MethodGet && rest == "":
		writeJSON(w, http.StatusOK, f.doc(rt))
	case r.Method == http.MethodDelete:
		if unadvertised("delete") {
			return
		}
		if r.URL.Query().Get("mode") == "archive" {
			if unadvertised("archive") {
				return
			}
			rt.State = "archived"
		} else {
			delete(f.runtimes, id)
			f.deleted[id] = "deleted on request"
		}
		w.WriteHeader(http.StatusNoContent)
	case rest == "/suspend":
		if unadvertised("suspend") {
			return
		}
		if rt.State == "running" || rt.State == "starting" {
			rt.State, rt.SuspendedAt = "suspended", now
		}
		w.WriteHeader(http.StatusNoContent)
	case rest == "/activity":
		if unadvertised("touch") {
			return
		}
		rt.LastActivity = now
		w.WriteHeader(http.StatusNoContent)
	case rest == "/lifecycle" && r.Method == http.MethodGet:
		if unadvertised("lifecycle") {
			return
		}
		writeJSON(w, http.StatusOK, f.lifecycle(rt))
	case rest == "/lifecycle" && r.Method == http.MethodPut:
		if unadvertised("lifecycle_write") {
			return
		}
		var ch struct {
			IdleSuspend *int64 `json:"idle_suspend_seconds"`
			Archive     *int64 `json:"archive_seconds"`
			Delete      *int64 `json:"delete_seconds"`
			Deadline    *time.Time
		}
		json.NewDecoder(r.Body).Decode(&ch)
		if ch.IdleSuspend != nil {
			rt.IdleSuspend = *ch.IdleSuspend
		}
		if ch.Archive != nil {
			rt.Archive = *ch.Archive
		}
		if ch.Delete != nil {
			rt.Delete = *ch.Delete
		}
		if ch.Deadline != nil {
			rt.Deadline = ch.Deadline.UTC()
		}
		writeJSON(w, http.StatusOK, f.lifecycle(rt))
	default:
		httpError(w, http.StatusNotFound, "no such operation")
	}
}

func (f *HTTPServer) lifecycle(rt *HTTPRuntime) map[string]any {
	changeable := []string{"idle_suspend", "archive", "delete"}
	if !rt.Deadline.IsZero() {
		changeable = append(changeable, "deadline")
	}
	if rt.Changeable != nil {
		changeable = rt.Changeable
	}
	m := map[string]any{"idle_suspend_seconds": rt.IdleSuspend, "archive_seconds": rt.Archive, "delete_seconds": rt.Delete,
		"changeable": changeable}
	if !rt.Deadline.IsZero() {
		m["deadline"] = rt.Deadline.UTC().Format(time.RFC3339)
		if rt.DeadlineAction != "" {
			m["deadline_action"] = rt.DeadlineAction
		}
	}
	return m
}

func (f *HTTPServer) doc(rt *HTTPRuntime) map[string]any {
	m := map[string]any{"id": rt.ID, "state": rt.State}
	if !rt.LastActivity.IsZero() {
		m["last_activity"] = rt.LastActivity.UTC().Format(time.RFC3339Nano)
	}
	if !rt.CreatedAt.IsZero() {
		m["created_at"] = rt.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	if rt.Labels != nil {
		m["labels"] = rt.Labels
	}
	return m
}

func (f *HTTPServer) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var all []*HTTPRuntime
	for _, rt := range f.runtimes {
		ok := true
		for _, sel := range q["label"] {
			k, v, _ := strings.Cut(sel, "=")
			if rt.Labels[k] != v {
				ok = false
			}
		}
		if ok {
			all = append(all, rt)
		}
	}
	slices.SortFunc(all, func(a, b *HTTPRuntime) int { return strings.Compare(a.ID, b.ID) })
	limit := 100
	if l := q.Get("limit"); l != "" {
		limit, _ = strconv.Atoi(l)
	}
	start := 0
	if c := q.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err == nil {
			start, err = strconv.Atoi(string(b))
		}
		if err != nil || start < 0 || start > len(all) {
			httpError(w, http.StatusBadRequest, "invalid cursor")
			return
		}
	}
	end := min(start+limit, len(all))
	items := make([]map[string]any, 0, end-start)
	for _, rt := range all[start:end] {
		items = append(items, f.doc(rt))
	}
	var next any
	if end < len(all) {
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}
