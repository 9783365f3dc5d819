package fakes

import (
	"encoding/base64"
	"encoding/json"
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

// DaytonaSandbox is one sandbox the Daytona fake keeps. Intervals are in
// minutes, as Daytona keeps them.
type DaytonaSandbox struct {
	ID     string
	Labels map[string]string
	// State: started, stopped, archived (others as Daytona names them).
	State        string
	CreatedAt    time.Time
	LastActivity time.Time
	// StoppedAt is when it stopped (the auto-archive and auto-delete
	// timers count from there).
	StoppedAt   time.Time
	AutoStop    int // 0: off
	AutoPause   int // 0: off (VM sandboxes: memory kept)
	AutoArchive int // 0: the provider's maximum, never in this fake
	AutoDelete  int // negative: off; 0: at once upon stop
}

// Daytona is a contract fake of Daytona's sandbox API.
type Daytona struct {
	*contract
	URL string
	Now func() time.Time

	mu        sync.Mutex
	sandboxes map[string]*DaytonaSandbox
	deleted   map[string]string // id → why
}

// NewDaytona starts a Daytona fake that accepts the bearer token key.
func NewDaytona(t testing.TB, key string, now func() time.Time) *Daytona {
	t.Helper()
	spec, err := DaytonaSpec()
	if err != nil {
		t.Fatal(err)
	}
	f := &Daytona{Now: now, sandboxes: map[string]*DaytonaSandbox{}, deleted: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serve(w, r, f.handle)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	f.contract = newContract(t, "daytona", spec, srv.URL, func(scheme string, r *http.Request) error {
		if scheme == "bearer" && r.Header.Get("Authorization") == "Bearer "+key {
			return nil
		}
		return fmt.Errorf("scheme %s: no valid credential", scheme)
	})
	// Starting a sandbox is the one thing inspection must never do.
	f.forbidden["/sandbox/{sandboxIdOrName}/start"] = "start wakes a stopped sandbox"
	return f
}

// Add puts a sandbox in the fake (default state: started; the intervals
// are as given, zero meaning what Daytona's zero means).
func (f *Daytona) Add(s DaytonaSandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.State == "" {
		s.State = "started"
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	f.sandboxes[s.ID] = &s
}

// Remove deletes a sandbox behind reclaimer's back.
func (f *Daytona) Remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sandboxes, id)
	f.deleted[id] = "removed by the provider"
}

// Get returns a copy of a sandbox after its timers ran.
func (f *Daytona) Get(id string) (DaytonaSandbox, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tick()
	s, ok := f.sandboxes[id]
	if !ok {
		return DaytonaSandbox{}, false
	}
	return *s, true
}

// Deleted says why a sandbox was deleted ("" if it was not).
func (f *Daytona) Deleted(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deleted[id]
}

func minutes(n int) time.Duration { return time.Duration(n) * time.Minute }

// tick runs Daytona's timers: auto-stop after inactivity, then auto-archive
// and auto-delete counted from the stop.
func (f *Daytona) tick() {
	now := f.Now()
	for id, s := range f.sandboxes {
		if s.State == "started" && s.AutoPause > 0 && (s.AutoStop == 0 || s.AutoPause < s.AutoStop) &&
			!now.Before(s.LastActivity.Add(minutes(s.AutoPause))) {
			s.State = "paused"
		}
		if s.State == "started" && s.AutoStop > 0 && !now.Before(s.LastActivity.Add(minutes(s.AutoStop))) {
			s.State, s.StoppedAt = "stopped", s.LastActivity.Add(minutes(s.AutoStop))
		}
		if s.State == "stopped" && s.AutoDelete >= 0 && !now.Before(s.StoppedAt.Add(minutes(s.AutoDelete))) {
			delete(f.sandboxes, id)
			f.deleted[id] = "auto-delete"
			continue
		}
		if s.State == "stopped" && s.AutoArchive > 0 && !now.Before(s.StoppedAt.Add(minutes(s.AutoArchive))) {
			s.State = "archived"
		}
	}
}

func daytonaError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"statusCode": status, "message": msg, "error": http.StatusText(status)})
}

func (f *Daytona) handle(w http.ResponseWriter, r *http.Request, p map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tick()
	now := f.Now()
	id := p["sandboxIdOrName"]
	if id == "" {
		id = p["sandboxId"]
	}
	s := f.sandboxes[id]
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	action := ""
	if len(parts) >= 3 {
		action = parts[2]
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/sandbox":
		f.list(w, r)
		return
	case s == nil:
		daytonaError(w, http.StatusNotFound, "Sandbox with ID or name "+id+" not found")
		return
	}
	switch {
	case r.Method == http.MethodGet && action == "":
		writeJSON(w, http.StatusOK, f.sandbox(s, true))
	case r.Method == http.MethodDelete && action == "":
		delete(f.sandboxes, id)
		f.deleted[id] = "deleted on request"
		writeJSON(w, http.StatusOK, f.sandbox(&DaytonaSandbox{ID: s.ID, Labels: s.Labels, State: "destroying", CreatedAt: s.CreatedAt}, true))
	case action == "stop":
		if s.State == "started" {
			s.State, s.StoppedAt = "stopped", now
		} else if s.State != "stopped" {
			daytonaError(w, http.StatusBadRequest, "Sandbox is not started")
			return
		}
		writeJSON(w, http.StatusOK, f.sandbox(s, true))
	case action == "archive":
		if s.State != "stopped" && s.State != "archived" {
			daytonaError(w, http.StatusBadRequest, "Sandbox is not stopped")
			return
		}
		s.State = "archived"
		writeJSON(w, http.StatusOK, f.sandbox(s, true))
	case action == "autostop" || action == "autopause" || action == "autoarchive" || action == "autodelete":
		n, err := strconv.ParseFloat(p["interval"], 64)
		if err != nil {
			daytonaError(w, http.StatusBadRequest, "interval must be a number")
			return
		}
		switch action {
		case "autostop":
			if n < 0 {
				daytonaError(w, http.StatusBadRequest, "Auto-stop interval must be non-negative")
				return
			}
			s.AutoStop = int(n)
		case "autopause":
			if n < 0 {
				daytonaError(w, http.StatusBadRequest, "Auto-pause interval must be non-negative")
				return
			}
			s.AutoPause = int(n)
		case "autoarchive":
			if n < 0 {
				daytonaError(w, http.StatusBadRequest, "Auto-archive interval must be non-negative")
				return
			}
			s.AutoArchive = int(n)
		default:
			s.AutoDelete = int(n)
		}
		writeJSON(w, http.StatusOK, f.sandbox(s, true))
	case action == "last-activity":
		s.LastActivity = now
		w.WriteHeader(http.StatusCreated)
	default:
		f.t.Errorf("daytona fake: %s %s is in the spec but reclaimer has no business calling it", r.Method, r.URL.Path)
		daytonaError(w, http.StatusNotImplemented, "not implemented by the fake")
	}
}

// sandbox renders s as the Sandbox schema (full) or SandboxListItem.
func (f *Daytona) sandbox(s *DaytonaSandbox, full bool) map[string]any {
	labels := s.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	m := map[string]any{"id": s.ID, "organizationId": "org-fake", "name": s.ID, "user": "daytona", "labels": labels,
		"public": false, "networkBlockAll": false, "target": "us", "cpu": 1, "gpu": 0, "memory": 1, "disk": 3,
		"toolboxProxyUrl": "https://proxy.fake/toolbox", "state": s.State,
		"autoStopInterval": s.AutoStop, "autoPauseInterval": s.AutoPause, "autoArchiveInterval": s.AutoArchive, "autoDeleteInterval": s.AutoDelete,
		"createdAt": s.CreatedAt.UTC().Format(time.RFC3339Nano), "updatedAt": s.CreatedAt.UTC().Format(time.RFC3339Nano)}
	if !s.LastActivity.IsZero() {
		m["lastActivityAt"] = s.LastActivity.UTC().Format(time.RFC3339Nano)
	}
	if full {
		m["env"] = map[string]string{}
	}
	return m
}

// list serves GET /sandbox: a JSON label filter, states, a cursor and a
// limit of at most 200, newest first.
func (f *Daytona) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want := map[string]string{}
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &want); err != nil {
			daytonaError(w, http.StatusBadRequest, "labels must be a JSON object of strings")
			return
		}
	}
	states := q["states"]
	var all []*DaytonaSandbox
	for _, s := range f.sandboxes {
		if len(states) > 0 && !slices.Contains(states, s.State) {
			continue
		}
		ok := true
		for k, v := range want {
			if s.Labels[k] != v {
				ok = false
			}
		}
		if ok {
			all = append(all, s)
		}
	}
	slices.SortFunc(all, func(a, b *DaytonaSandbox) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, _ := strconv.ParseFloat(l, 64)
		limit = int(n)
	}
	start := 0
	if c := q.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err == nil {
			start, err = strconv.Atoi(string(b))
		}
		if err != nil || start < 0 || start > len(all) {
			daytonaError(w, http.StatusBadRequest, "invalid cursor")
			return
		}
	}
	end := min(start+limit, len(all))
	items := make([]map[string]any, 0, end-start)
	for _, s := range all[start:end] {
		items = append(items, f.sandbox(s, false))
	}
	var next any
	if end < len(all) {
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": next})
}
