package fakes

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// OpenHandsSandbox is one sandbox the OpenHands Cloud fake keeps.
type OpenHandsSandbox struct {
	ID   string
	User string // created_by_user_id
	// Status: STARTING, RUNNING, PAUSED, ERROR (MISSING once deleted).
	Status     string
	CreatedAt  time.Time
	SessionKey string
	// AgentServer is its exposed AGENT_SERVER URL ("" none).
	AgentServer string
}

// OpenHandsConversation is one app conversation the fake keeps.
type OpenHandsConversation struct {
	ID        string
	User      string
	SandboxID string
	Tags      map[string]string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Execution: idle, running, paused, waiting_for_confirmation,
	// finished, error, stuck ("" none).
	Execution string
	Parent    string // a sub-conversation's parent
}

// OpenHands is a contract fake of the OpenHands Cloud app server's V1 API
// (sandboxes and app conversations), checked against its published
// document. Keys map to users: a key sees only its user's sandboxes and
// conversations, as the server scopes search to the current user.
type OpenHands struct {
	*contract
	URL string
	Now func() time.Time

	mu            sync.Mutex
	users         map[string]string // key → user id
	sandboxes     map[string]*OpenHandsSandbox
	conversations map[string]*OpenHandsConversation
	deleted       map[string]string // sandbox id → how
}

// NewOpenHands starts an OpenHands Cloud fake; users maps each accepted
// X-Access-Token to its user id.
func NewOpenHands(t testing.TB, users map[string]string, now func() time.Time) *OpenHands {
	t.Helper()
	spec, err := OpenHandsCloudSpec()
	if err != nil {
		t.Fatal(err)
	}
	f := &OpenHands{Now: now, users: users, sandboxes: map[string]*OpenHandsSandbox{},
		conversations: map[string]*OpenHandsConversation{}, deleted: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serve(w, r, f.handle)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	f.contract = newContract(t, "openhands", spec, srv.URL, func(scheme string, r *http.Request) error {
		if _, ok := users[r.Header.Get("X-Access-Token")]; scheme == "APIKeyHeader" && ok {
			return nil
		}
		return fmt.Errorf("scheme %s: no valid credential", scheme)
	})
	f.forbidden["/api/v1/sandboxes/{sandbox_id}/resume"] = "resume wakes a paused sandbox"
	f.forbidden["/api/v1/app-conversations/{conversation_id}/send-message"] = "a message runs the agent (activity)"
	f.forbidden["/api/v1/app-conversations/stream-start"] = "starting a conversation starts a sandbox"
	return f
}

// AddSandbox puts a sandbox in the fake.
func (f *OpenHands) AddSandbox(s OpenHandsSandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.Status == "" {
		s.Status = "RUNNING"
	}
	f.sandboxes[s.ID] = &s
}

// AddConversation puts a conversation in the fake.
func (f *OpenHands) AddConversation(c OpenHandsConversation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = c.CreatedAt
	}
	f.conversations[c.ID] = &c
}

// Touch records activity on a conversation now (the agent or user worked).
func (f *OpenHands) Touch(id, execution string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.conversations[id]; c != nil {
		c.UpdatedAt, c.Execution = f.Now(), execution
	}
}

// SetExecution sets a conversation's execution status, its time unchanged.
func (f *OpenHands) SetExecution(id, execution string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.conversations[id]; c != nil {
		c.Execution = execution
	}
}

// Sandbox returns a copy of a sandbox.
func (f *OpenHands) Sandbox(id string) (OpenHandsSandbox, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sandboxes[id]
	if !ok {
		return OpenHandsSandbox{}, false
	}
	return *s, true
}

// Conversation tells whether a conversation still exists.
func (f *OpenHands) Conversation(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.conversations[id]
	return ok
}

// Deleted says how a sandbox went ("" if it did not): "sandbox deleted"
// or "freed by its last conversation's deletion".
func (f *OpenHands) Deleted(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deleted[id]
}

// RemoveSandbox deletes a sandbox behind reclaimer's back.
func (f *OpenHands) RemoveSandbox(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sandboxes, id)
}

func ohNotFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]any{"detail": "Item not found"})
}

func (f *OpenHands) handle(w http.ResponseWriter, r *http.Request, p map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	user := f.users[r.Header.Get("X-Access-Token")]
	q := r.URL.Query()
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && path == "/api/v1/sandboxes/search":
		var all []*OpenHandsSandbox
		for _, s := range f.sandboxes {
			if s.User == user {
				all = append(all, s)
			}
		}
		slices.SortFunc(all, func(a, b *OpenHandsSandbox) int { return strings.Compare(a.ID, b.ID) })
		page, next, ok := ohPage(all, q)
		if !ok {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []any{}})
			return
		}
		items := make([]map[string]any, 0, len(page))
		for _, s := range page {
			items = append(items, f.sandboxDoc(s))
		}
		writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_page_id": next})
	case r.Method == http.MethodGet && path == "/api/v1/sandboxes":
		out := []any{}
		for _, id := range q["id"] {
			if s := f.sandboxes[id]; s != nil && s.User == user {
				out = append(out, f.sandboxDoc(s))
			} else {
				out = append(out, nil)
			}
		}
		writeJSON(w, http.StatusOK, out)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/pause"):
		s := f.sandboxes[p["sandbox_id"]]
		if s == nil || s.User != user {
			ohNotFound(w)
			return
		}
		if s.Status == "RUNNING" || s.Status == "STARTING" {
			s.Status = "PAUSED"
		}
		writeJSON(w, http.StatusOK, map[string]any{"success": true})
	case r.Method == http.MethodDelete && strings.HasPrefix(path, "/api/v1/sandboxes/"):
		// The handler reads the sandbox from the query, not the path.
		id := q.Get("sandbox_id")
		if id != p["id"] {
			f.t.Errorf("openhands fake: DELETE %s names sandbox %q in the query: the server deletes the query's sandbox", path, id)
		}
		s := f.sandboxes[id]
		if s == nil || s.User != user {
			ohNotFound(w)
			return
		}
		delete(f.sandboxes, id)
		f.deleted[id] = "sandbox deleted"
		writeJSON(w, http.StatusOK, map[string]any{"success": true})
	case r.Method == http.MethodGet && path == "/api/v1/app-conversations/search":
		subs := q.Get("include_sub_conversations") == "true"
		var all []*OpenHandsConversation
		for _, c := range f.conversations {
			if c.User != user || (!subs && c.Parent != "") {
				continue
			}
			if sb := q.Get("sandbox_id__eq"); sb != "" && c.SandboxID != sb {
				continue
			}
			all = append(all, c)
		}
		slices.SortFunc(all, func(a, b *OpenHandsConversation) int { return strings.Compare(a.ID, b.ID) })
		page, next, ok := ohPage(all, q)
		if !ok {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []any{}})
			return
		}
		items := make([]map[string]any, 0, len(page))
		for _, c := range page {
			items = append(items, f.conversationDoc(c))
		}
		writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_page_id": next})
	case r.Method == http.MethodDelete && strings.HasPrefix(path, "/api/v1/app-conversations/"):
		c := f.conversations[p["conversation_id"]]
		if c == nil || c.User != user {
			ohNotFound(w)
			return
		}
		delete(f.conversations, c.ID)
		// The sandbox goes with its last conversation.
		shared := false
		for _, o := range f.conversations {
			shared = shared || o.SandboxID == c.SandboxID
		}
		if _, ok := f.sandboxes[c.SandboxID]; ok && !shared {
			delete(f.sandboxes, c.SandboxID)
			f.deleted[c.SandboxID] = "freed by its last conversation's deletion"
		}
		writeJSON(w, http.StatusOK, map[string]any{"success": true})
	default:
		f.t.Errorf("openhands fake: %s %s is in the spec but reclaimer has no business calling it", r.Method, path)
		writeJSON(w, http.StatusNotImplemented, map[string]any{"detail": "not implemented by the fake"})
	}
}

// ohPage cuts one page by page_id (an opaque offset) and limit.
func ohPage[T any](all []T, q map[string][]string) ([]T, any, bool) {
	limit := 100
	if l := first(q["limit"]); l != "" {
		limit, _ = strconv.Atoi(l)
	}
	start := 0
	if c := first(q["page_id"]); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err == nil {
			start, err = strconv.Atoi(string(b))
		}
		if err != nil || start < 0 || start > len(all) {
			return nil, nil, false
		}
	}
	end := min(start+limit, len(all))
	var next any
	if end < len(all) {
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	return all[start:end], next, true
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func (f *OpenHands) sandboxDoc(s *OpenHandsSandbox) map[string]any {
	d := map[string]any{"id": s.ID, "created_by_user_id": s.User, "sandbox_spec_id": "default", "status": s.Status,
		"session_api_key": nil, "created_at": s.CreatedAt.UTC().Format(time.RFC3339Nano), "exposed_urls": nil}
	if s.Status == "RUNNING" {
		if s.SessionKey != "" {
			d["session_api_key"] = s.SessionKey
		}
		urls := []map[string]any{{"name": "VSCODE", "url": "http://127.0.0.1:1/vscode", "port": 8001}}
		if s.AgentServer != "" {
			urls = append(urls, map[string]any{"name": "AGENT_SERVER", "url": s.AgentServer, "port": 8000})
		}
		d["exposed_urls"] = urls
	}
	return d
}

func (f *OpenHands) conversationDoc(c *OpenHandsConversation) map[string]any {
	status := "MISSING"
	if s := f.sandboxes[c.SandboxID]; s != nil {
		status = s.Status
	}
	var exec any
	if status == "RUNNING" && c.Execution != "" {
		exec = c.Execution
	}
	tags := c.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	var parent any
	if c.Parent != "" {
		parent = c.Parent
	}
	return map[string]any{"id": c.ID, "created_by_user_id": c.User, "sandbox_id": c.SandboxID, "tags": tags,
		"created_at": c.CreatedAt.UTC().Format(time.RFC3339Nano), "updated_at": c.UpdatedAt.UTC().Format(time.RFC3339Nano),
		"sandbox_status": status, "execution_status": exec, "acp_server": nil, "launched_agent_profile": nil,
		"parent_conversation_id": parent, "title": "conversation " + c.ID, "pr_number": []int{}, "sub_conversation_ids": []string{}}
}
