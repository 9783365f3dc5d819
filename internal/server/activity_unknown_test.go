package server_test

import (
	"reflect"
	"testing"

	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/views"
)

// TestActivityBatchNamesUnknown: a batch that reports runtimes no pass has
// seen says which, so a wrong ID is not taken silently (the single
// endpoint answers 404 for a name it cannot find); a known runtime is
// not listed.
func TestActivityBatchNamesUnknown(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n"), server.Options{})
	h.waitStartPass()
	resp, err := h.api.ReportActivityBatchWithResponse(h.ctx(), openapi.ActivityBatch{Reports: []openapi.ActivityReport{
		{Backend: "dir", Id: "r1"}, {Backend: "dir", Id: "r2-typo"}, {Backend: "dir", Id: "later"},
	}})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("POST /v1/activity: %v %s", err, body(resp))
	}
	src := "dirs:" + runs
	want := views.ActivityAccepted{Accepted: 3, Unknown: []views.ActivityRef{
		{Backend: "dir", Source: src, ID: "r2-typo"}, {Backend: "dir", Source: src, ID: "later"}}}
	if got := *resp.JSON200; !reflect.DeepEqual(got, want) {
		t.Fatalf("answer %+v, want %+v", got, want)
	}
	if code, _, _ := raw(t, h, "POST", "/v1/runtimes/r2-typo/activity", "{}", h.token); code != 404 {
		t.Fatalf("the single endpoint on the same name without its backend: %d", code)
	}

	// A runtime removed since: its report is not recorded, and named.
	rel, err := h.api.ReleaseRuntimeWithResponse(h.ctx(), "r1", &openapi.ReleaseRuntimeParams{Force: true})
	if err != nil || rel.JSON200 == nil || !rel.JSON200.Removed {
		t.Fatalf("release r1: %v %s", err, body(rel))
	}
	resp, err = h.api.ReportActivityBatchWithResponse(h.ctx(), openapi.ActivityBatch{Reports: []openapi.ActivityReport{{Backend: "dir", Id: "r1"}}})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("POST /v1/activity: %v %s", err, body(resp))
	}
	want = views.ActivityAccepted{Accepted: 0, Ignored: []views.ActivityRef{{Backend: "dir", Source: src, ID: "r1", State: "deleted"}}}
	if got := *resp.JSON200; !reflect.DeepEqual(got, want) {
		t.Fatalf("answer for a removed runtime %+v, want %+v", got, want)
	}
}
