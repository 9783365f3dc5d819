package fakes

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder collects what a fake reports instead of failing the test, so
// the fakes' own strictness can be tested.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) reported(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		if strings.Contains(e, sub) {
			return true
		}
	}
	return false
}

func send(t *testing.T, method, url string, h map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestSpecsLoad(t *testing.T) {
	for name, f := range map[string]func() (any, error){
		"e2b":     func() (any, error) { return E2BSpec() },
		"daytona": func() (any, error) { return DaytonaSpec() },
		"http":    func() (any, error) { return HTTPBackendSpec() },
	} {
		if _, err := f(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestFakesRejectWhatTheSpecForbids(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	rec := &recorder{TB: t}
	d := NewDaytona(rec, "k", now)
	auth := map[string]string{"Authorization": "Bearer k"}
	if code := send(t, "GET", d.URL+"/sandbox?limit=500", auth); code != http.StatusBadRequest || !rec.reported("does not match the spec") {
		t.Errorf("limit over the maximum: %d, %v", code, rec.errs)
	}
	if send(t, "GET", d.URL+"/no/such/path", auth); !rec.reported("outside the published spec") {
		t.Error("a call outside the spec was not reported")
	}
	if code := send(t, "GET", d.URL+"/sandbox", nil); code != http.StatusUnauthorized {
		t.Errorf("no credential: %d", code)
	}
	d.Add(DaytonaSandbox{ID: "s", State: "stopped"})
	if send(t, "POST", d.URL+"/sandbox/s/start", auth); !rec.reported("start wakes") {
		t.Error("starting a sandbox was not reported")
	}

	e := NewE2B(rec, "k", now)
	e.Add(E2BSandbox{ID: "p", State: "paused", Metadata: map[string]string{}})
	if send(t, "POST", e.URL+"/sandboxes/p/connect", map[string]string{"X-API-Key": "k"}); !rec.reported("connect resumes") {
		t.Error("connect was not reported")
	}
	if code := send(t, "GET", e.URL+"/v2/sandboxes?limit=0", map[string]string{"X-API-Key": "k"}); code != http.StatusBadRequest {
		t.Errorf("limit 0: %d", code)
	}
}

func TestContractChecksAnswers(t *testing.T) {
	spec, err := HTTPBackendSpec()
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{TB: t}
	var c *contract
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.serve(w, r, func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
			writeJSON(w, http.StatusOK, map[string]any{"items": "not an array"})
		})
	}))
	defer srv.Close()
	c = newContract(rec, "http", spec, srv.URL, func(string, *http.Request) error { return nil })
	send(t, "GET", srv.URL+"/runtimes", nil)
	if !rec.reported("its own answer does not match the spec") {
		t.Errorf("a wrong answer passed: %v", rec.errs)
	}
}
