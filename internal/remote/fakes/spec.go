package fakes

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

//go:embed specs/e2b-openapi.yml
var e2bSpec []byte

//go:embed specs/daytona-api.json
var daytonaSpec []byte

// loaded is one parsed and checked document.
type loaded struct {
	doc *openapi3.T
	err error
}

var (
	specMu    sync.Mutex
	specCache = map[string]loaded{}
)

// loadSpec parses and checks a document once per test binary; patch, if
// set, repairs it narrowly before the check (see specs/README.md).
func loadSpec(name string, data []byte, patch func(*openapi3.T)) (*openapi3.T, error) {
	specMu.Lock()
	defer specMu.Unlock()
	if l, ok := specCache[name]; ok {
		return l.doc, l.err
	}
	l := loaded{}
	loader := openapi3.NewLoader()
	l.doc, l.err = loader.LoadFromData(data)
	if l.err == nil {
		if patch != nil {
			patch(l.doc)
		}
		l.err = l.doc.Validate(context.Background(), openapi3.DisableExamplesValidation())
	}
	if l.err != nil {
		l.err = fmt.Errorf("load %s: %w", name, l.err)
	}
	specCache[name] = l
	return l.doc, l.err
}

// E2BSpec returns E2B's published document.
func E2BSpec() (*openapi3.T, error) { return loadSpec("e2b-openapi.yml", e2bSpec, nil) }

// DaytonaSpec returns Daytona's published document, patched as
// specs/README.md says.
func DaytonaSpec() (*openapi3.T, error) {
	return loadSpec("daytona-api.json", daytonaSpec, func(doc *openapi3.T) {
		// Same template as /sandbox/{sandboxIdOrName}/secrets; never called.
		doc.Paths.Delete("/sandbox/{sandboxId}/secrets")
	})
}

// HTTPBackendSpec returns reclaimer's own http backend protocol,
// api/http-backend.yaml at the top of the module.
func HTTPBackendSpec() (*openapi3.T, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, errors.New("locate api/http-backend.yaml: no caller information")
	}
	path := filepath.Join(filepath.Dir(file), "..", "..", "..", "api", "http-backend.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load http backend protocol: %w", err)
	}
	return loadSpec("http-backend.yaml", data, nil)
}

// contract wraps a fake's handler with validation of every request and
// response against doc.
type contract struct {
	t      testing.TB
	name   string
	router routers.Router
	// auth checks the credential of one security scheme.
	auth func(scheme string, r *http.Request) error
	// forbidden paths (templates) fail the test when called: they wake a
	// sandbox or count as activity.
	forbidden map[string]string
	// faults answers the next requests with these statuses (429, 500...).
	mu     sync.Mutex
	faults []int
	// retryAfter is the Retry-After of a 429 (seconds; "0" by default).
	retryAfter string
	calls      map[string]int // "METHOD template" → count
	total      int
	// bend, when set, bends answers (Bend); intercept answers
	// in the fake's stead (Intercept).
	bend      func(op string, a *Answer) bool
	intercept func(op string, r *http.Request) *Answer
}

// Intercept makes the fake hostile before it acts: f sees every valid
// request (op as for Bend); an Answer it returns is sent instead of
// the fake's, unvalidated, and the fake does nothing (a call the provider
// refused, stalled on, or redirected). nil lets the fake answer.
func (c *contract) Intercept(f func(op string, r *http.Request) *Answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.intercept = f
}

// Answer is one answer of a fake, as a misbehaving hook may bend it.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Bend makes the fake hostile: f sees every answer (op is "METHOD
// /template", e.g. "GET /v2/sandboxes") after the fake made it, and may
// change its status, headers or body. When f returns true the answer is
// deliberately outside the spec and is not validated; every request, and
// every answer f leaves alone (returns false), still is.
func (c *contract) Bend(f func(op string, a *Answer) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bend = f
}

func newContract(t testing.TB, name string, spec *openapi3.T, url string, auth func(string, *http.Request) error) *contract {
	t.Helper()
	// A shallow copy with our server: the cached document is shared.
	doc := *spec
	doc.Servers = openapi3.Servers{{URL: url}}
	router, err := gorillamux.NewRouter(&doc)
	if err != nil {
		t.Fatalf("%s fake: router: %v", name, err)
	}
	return &contract{t: t, name: name, router: router, auth: auth, forbidden: map[string]string{}, calls: map[string]int{}}
}

// Fail answers the next n requests with status (a burst of 429 or 5xx).
func (c *contract) Fail(status, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range n {
		c.faults = append(c.faults, status)
	}
}

// RetryAfter sets the Retry-After the next 429s carry, in whole seconds.
func (c *contract) RetryAfter(secs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retryAfter = strconv.Itoa(secs)
}

// Calls returns how often "METHOD /template" was called.
func (c *contract) Calls(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

// Total returns how many requests reached the fake.
func (c *contract) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// ResetCalls forgets the counts.
func (c *contract) ResetCalls() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls, c.total = map[string]int{}, 0
}

// serve validates r, calls h (which sees the route's path parameters) and
// validates what h answered before sending it.
func (c *contract) serve(w http.ResponseWriter, r *http.Request, h func(w http.ResponseWriter, r *http.Request, params map[string]string)) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := c.router.FindRoute(r)
	if err != nil {
		c.t.Errorf("%s fake: call outside the published spec: %s %s: %v", c.name, r.Method, r.URL, err)
		http.Error(w, `{"code":404,"message":"not in the spec"}`, http.StatusNotFound)
		return
	}
	op := r.Method + " " + route.Path
	c.mu.Lock()
	c.calls[op]++
	c.total++
	var fault int
	if len(c.faults) > 0 {
		fault, c.faults = c.faults[0], c.faults[1:]
	}
	retryAfter := c.retryAfter
	bend, intercept := c.bend, c.intercept
	c.mu.Unlock()
	if why, ok := c.forbidden[route.Path]; ok {
		c.t.Errorf("%s fake: %s was called: %s", c.name, op, why)
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: func(_ context.Context, ai *openapi3filter.AuthenticationInput) error {
			return c.auth(ai.SecuritySchemeName, r)
		}, MultiError: true}}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		var sec *openapi3filter.SecurityRequirementsError
		if errors.As(err, &sec) {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 401, "message": "unauthorized"})
			return
		}
		c.t.Errorf("%s fake: request does not match the spec: %s: %v", c.name, op, err)
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 400, "message": err.Error()})
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if intercept != nil && fault == 0 {
		if a := intercept(op, r); a != nil {
			for k, v := range a.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(a.Status)
			w.Write(a.Body)
			return
		}
	}
	rec := httptest.NewRecorder()
	if fault != 0 {
		if fault == http.StatusTooManyRequests {
			rec.Header().Set("Retry-After", cmp.Or(retryAfter, "0"))
		}
		writeJSON(rec, fault, map[string]any{"code": fault, "message": http.StatusText(fault)})
	} else {
		h(rec, r, params)
	}
	res := rec.Result()
	out, _ := io.ReadAll(res.Body)
	if bend != nil {
		a := &Answer{Status: res.StatusCode, Header: res.Header.Clone(), Body: out}
		if bend(op, a) {
			for k, v := range a.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(a.Status)
			w.Write(a.Body)
			return
		}
	}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode,
		Header: res.Header, Body: io.NopCloser(bytes.NewReader(out)),
		Options: &openapi3filter.Options{MultiError: true, IncludeResponseStatus: fault == 0 && res.StatusCode < 300}}
	if err := openapi3filter.ValidateResponse(r.Context(), rin); err != nil {
		c.t.Errorf("%s fake: its own answer does not match the spec: %s -> %d: %v", c.name, op, res.StatusCode, err)
	}
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.StatusCode)
	w.Write(out)
}
