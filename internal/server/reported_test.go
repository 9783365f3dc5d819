package server_test

import (
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/server"
)

// TestBadInputIsBadRequest: a lease past the times the ledger keeps, and a
// registration with a reserved id or a folder outside every managed root of
// its backend, are 400s naming why, not 500s or silent acceptance.
func TestBadInputIsBadRequest(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n"), server.Options{})
	h.waitStartPass()
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		says                     string
	}{
		{"lease until 9999", "POST", "/v1/runtimes/r1/lease", `{"until":"9999-01-01T00:00:00Z"}`, 400, "2262"},
		{"register ..", "POST", "/v1/runtimes", `{"backend":"dir","id":".."}`, 400, "reserved"},
		{"register the trash", "POST", "/v1/runtimes", `{"backend":"dir","id":".reclaimer-trash"}`, 400, "reserved"},
		{"register a home of /etc", "POST", "/v1/runtimes", `{"backend":"dir","id":"r9","home":"/etc"}`, 400, "not inside a managed root"},
		{"register a workspace through ..", "POST", "/v1/runtimes", `{"backend":"dir","id":"r9","workspaces":["` + runs + `/../x"]}`, 400, "not inside a managed root"},
		{"register the root itself", "POST", "/v1/runtimes", `{"backend":"dir","id":"r9","home":"` + runs + `"}`, 400, "not inside a managed root"},
		{"register inside the root", "POST", "/v1/runtimes", `{"backend":"dir","id":"r9","home":"` + runs + `/r9/persistence"}`, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, e, _ := raw(t, h, tc.method, tc.path, tc.body, h.token)
			if code != tc.code || !strings.Contains(e.Error.Message, tc.says) {
				t.Fatalf("%s %s %s: %d %+v; want %d saying %q", tc.method, tc.path, tc.body, code, e, tc.code, tc.says)
			}
		})
	}
}
