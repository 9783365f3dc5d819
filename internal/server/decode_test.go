package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/ops"
)

// decoders are every request-body decoder, by name.
var decoders = map[string]func([]byte) error{
	"registration": func(b []byte) error { _, err := decodeRegistration(b); return err },
	"activity":     func(b []byte) error { _, err := decodeActivity(b); return err },
	"batch":        func(b []byte) error { _, err := decodeActivityBatch(b); return err },
	"hold":         func(b []byte) error { _, _, err := decodeHoldRequest(b); return err },
	"renewal":      func(b []byte) error { _, err := decodeHoldRenewal(b); return err },
	"retention":    func(b []byte) error { _, err := decodeRetention(b); return err },
	"pin":          func(b []byte) error { _, err := decodePin(b); return err },
	"lease":        func(b []byte) error { _, err := decodeLease(b); return err },
	"pass":         func(b []byte) error { _, _, err := decodePass(b); return err },
	"marks":        func(b []byte) error { _, err := decodeMarks(b); return err },
	"prune":        func(b []byte) error { _, err := decodePrune(b); return err },
	"restore":      func(b []byte) error { _, err := decodeRestore(b); return err },
}

var known = map[string]bool{"backend": true, "id": true, "conversations": true, "reports": true, "holder": true,
	"ttl": true, "at": true, "days": true, "until": true, "steps": true, "plan_id": true, "runtimes": true,
	"dry_run": true, "default": true, "reason": true, "home": true, "workspaces": true, "labels": true,
	"source": true, "delete": true, "plan": true, "pin": true, "unpin": true, "lease": true, "lease_for": true,
	"retention": true, "touch": true, "older_than": true, "archive_id": true, "to": true}

// FuzzDecode: no body makes a decoder panic, and every refusal is a 400
// (never a 500) whose field, when named, is one the request could have.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"holder":"h","ttl":"15m"}`, `{"holder":"h","ttl":"-1s"}`, `{"ttl":"99999999h"}`,
		`{"at":"2026-01-02T03:04:05Z"}`, `{"at":"2026-13-45T99:99:99Z"}`, `{"reports":[{"backend":"dir","id":"r"}]}`,
		`{"reports":[{"backend":"","id":"r","at":"2026-01-02T03:04:05+02:00"}]}`, `{"days":0}`, `{"days":-1}`,
		`{"days":1e30}`, `{"default":true}`, `{"until":"2030-01-01T00:00:00Z"}`, `{"dry_run":true,"steps":["caches"]}`,
		`{"plan_id":"p","runtimes":["a"]}`, `{"backend":"dir","id":"a/b","conversations":["c"]}`, "{\"id\":\"\x00\"}",
		`{"holder":"h","ttl":"1m"}{}`, `{"holder":"h","ttl":"1m","x":1}`, `{"reports":null}`, `{"steps":[1]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for name, dec := range decoders {
			err := dec([]byte(body))
			if err == nil {
				continue
			}
			var in *ops.InputError
			if !errors.As(err, &in) || ops.Classify(err).Status != http.StatusBadRequest || in.Msg == "" {
				t.Fatalf("%s(%q): %v is not a 400", name, body, err)
			}
			// A field named is one of the API's, or the unknown one sent.
			first := strings.FieldsFunc(in.Field, func(r rune) bool { return r == '[' || r == '.' })
			if in.Field != "" && (len(first) == 0 || !known[first[0]]) && !strings.HasPrefix(in.Msg, "unknown field") {
				t.Fatalf("%s(%q): field %q is neither the API's nor an unknown one sent: %s", name, body, in.Field, in.Msg)
			}
		}
	})
}

// TestShuttingDown503: once a stop began, every request (health too)
// answers 503 with the error body.
func TestShuttingDown503(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(cfg, []byte("[ledger]\npath = \""+filepath.Join(dir, "l.db")+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Open(context.Background(), Options{ConfigPath: cfg, Logs: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer d.closeAll()
	h := d.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Fatalf("healthz before the stop: %d", rec.Code)
	}
	d.stopping.Store(true)
	for _, path := range []string{"/healthz", "/v1/status", "/v1/runtimes/x/activity"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", path, strings.NewReader("{}")))
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != 503 || e.Error.Code != "shutting_down" {
			t.Fatalf("%s while stopping: %d %s", path, rec.Code, rec.Body)
		}
	}
}
