package server_test

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// retentionSetup makes a repository with worktrees conv1..n, each inactive
// for 30 days with uncommitted work, under a source that archives after
// 14 days with no notice period.
func retentionSetup(t *testing.T, n int, serverKeys string) (dir, cfg string, wts []string) {
	dir = t.TempDir()
	repo := testtree.NewRepo(t, filepath.Join(dir, "repo"))
	root := filepath.Join(dir, "worktrees")
	for i := 1; i <= n; i++ {
		wts = append(wts, addWorktree(t, repo, root, "conv"+string(rune('0'+i))))
	}
	cfg = writeConfig(t, dir, serverKeys, "[[worktrees]]\nroot = \""+root+"\"\nretention = \"14d\"\ngrace = \"0s\"\n")
	return dir, cfg, wts
}

func scheduled(h *daemon, id string) func() bool {
	return func() bool {
		resp, err := h.api.GetRuntimeWithResponse(h.ctx(), id, nil)
		return err == nil && resp.JSON200 != nil && resp.JSON200.ScheduledStep == string(openapi.StepArchive)
	}
}

// TestHoldDuringPassWaitsThenLoses: a hold asked for while a pass is
// removing the runtime waits for the pass, then loses cleanly with 410;
// the archive is complete and the runtime answers 410 from then on.
func TestHoldDuringPassWaitsThenLoses(t *testing.T) {
	dir, cfg, wts := retentionSetup(t, 1, "")
	g := newGate()
	h := startDaemon(t, dir, cfg, server.Options{WrapSources: gateAll(g)})
	h.waitFor("the start pass to announce the archive", scheduled(h, "conv1:repo"))

	passDone := make(chan openapi.Pass, 1)
	go func() { passDone <- h.pass(openapi.PassRequest{}) }()
	if k := <-g.entered; k.ID != "conv1:repo" {
		t.Fatalf("pass removing %v", k)
	}
	holdDone := make(chan *openapi.TakeHoldResponse, 1)
	go func() {
		resp, err := h.api.TakeHoldWithResponse(h.ctx(), "conv1:repo", nil, openapi.HoldRequest{Holder: "host-1", Ttl: "10m"})
		if err != nil {
			t.Error(err)
		}
		holdDone <- resp
	}()
	select {
	case resp := <-holdDone:
		t.Fatalf("the hold did not wait for the pass: %s", body(resp))
	case <-time.After(300 * time.Millisecond):
	}
	close(g.release)
	p := <-passDone
	if len(p.Applied.Results) != 1 || p.Applied.Results[0].Outcome != plan.Done || p.Applied.Results[0].ArchiveID == "" {
		t.Fatalf("pass: %+v", p.Applied)
	}
	resp := <-holdDone
	if resp.JSON410 == nil || resp.JSON410.Error.Message != server.ArchivedMessage || resp.JSON410.Error.Code != openapi.Archived {
		t.Fatalf("hold after the archive: %s", body(resp))
	}
	if exists(wts[0]) {
		t.Fatal("the worktree is still there")
	}
	rt := h.runtime("conv1:repo")
	if rt.State != "archived" || rt.CanResume || rt.ArchiveLocation == "" || rt.HeldBy != "" {
		t.Fatalf("archived runtime: %+v", rt)
	}
	// Everything that would change it answers 410 with the same text.
	act, _ := h.api.ReportActivityWithResponse(h.ctx(), "conv1:repo", nil, openapi.Activity{})
	pin, _ := h.api.PinRuntimeWithResponse(h.ctx(), "conv1:repo", nil, openapi.PinRequest{})
	ret, _ := h.api.SetRetentionWithResponse(h.ctx(), "conv1:repo", nil, openapi.RetentionRequest{Default: true})
	for _, r := range []any{act, pin, ret} {
		if status(r) != 410 || !strings.Contains(body(r), server.ArchivedMessage) {
			t.Fatalf("after archive: %s", body(r))
		}
	}
}

// TestHoldBeforeApplyWins: a hold taken between the dry run and applying
// exactly that plan wins: the action is skipped and nothing is touched.
func TestHoldBeforeApplyWins(t *testing.T) {
	dir, cfg, wts := retentionSetup(t, 1, "")
	h := startDaemon(t, dir, cfg, server.Options{})
	h.waitFor("the start pass to announce the archive", scheduled(h, "conv1:repo"))

	planResp, err := h.api.GetPlanWithResponse(h.ctx(), nil)
	if err != nil || planResp.JSON200 == nil || len(planResp.JSON200.Actions) != 1 {
		t.Fatalf("plan: %v %s", err, body(planResp))
	}
	hold, err := h.api.TakeHoldWithResponse(h.ctx(), "conv1:repo", nil, openapi.HoldRequest{Holder: "host-1", Ttl: "10m"})
	if err != nil || hold.JSON201 == nil || hold.JSON201.HoldID == "" || !hold.JSON201.ExpiresAt.After(time.Now()) {
		t.Fatalf("hold: %v %s", err, body(hold))
	}
	p := h.pass(openapi.PassRequest{PlanId: planResp.JSON200.ID})
	if p.Plan.ID != planResp.JSON200.ID || len(p.Applied.Results) != 1 ||
		p.Applied.Results[0].Outcome != plan.Skip || !strings.Contains(p.Applied.Results[0].Reason, "held by host-1") {
		t.Fatalf("apply of the plan: %+v", p.Applied)
	}
	if !exists(wts[0]) {
		t.Fatal("a held worktree was removed")
	}
	if rt := h.runtime("conv1:repo"); rt.HeldBy != "host-1" || rt.State == "archived" {
		t.Fatalf("held runtime: %+v", rt)
	}
	// Renew, then release; a hold id of nobody is 404.
	ren, _ := h.api.RenewHoldWithResponse(h.ctx(), "conv1:repo", hold.JSON201.HoldID, nil, openapi.HoldRenewal{Ttl: "1h"})
	if ren.JSON200 == nil || !ren.JSON200.ExpiresAt.After(hold.JSON201.ExpiresAt) {
		t.Fatalf("renew: %s", body(ren))
	}
	if r, _ := h.api.RenewHoldWithResponse(h.ctx(), "conv1:repo", "h_nobody", nil, openapi.HoldRenewal{Ttl: "1h"}); status(r) != 404 {
		t.Fatalf("renew unknown: %s", body(r))
	}
	if r, _ := h.api.ReleaseHoldWithResponse(h.ctx(), "conv1:repo", hold.JSON201.HoldID, nil); status(r) != 204 {
		t.Fatalf("release: %s", body(r))
	}
	if rt := h.runtime("conv1:repo"); rt.HeldBy != "" {
		t.Fatalf("released hold still shown: %+v", rt)
	}
}

// TestActivityCancelsScheduledArchive: activity reported after the notice
// cancels it at the next pass, even before it is written to the ledger;
// nothing is archived.
func TestActivityCancelsScheduledArchive(t *testing.T) {
	dir, cfg, wts := retentionSetup(t, 2, "")
	// Reports are not written before the pass: the pass must see them
	// in memory.
	h := startDaemon(t, dir, cfg, server.Options{ActivityFlush: time.Hour})
	h.waitFor("the start pass to announce the archives", scheduled(h, "conv2:repo"))

	if r, err := h.api.ReportActivityWithResponse(h.ctx(), "conv1:repo", nil, openapi.Activity{}); err != nil || status(r) != 204 {
		t.Fatalf("activity: %v %s", err, body(r))
	}
	p := h.pass(openapi.PassRequest{})
	var canceled []string
	for _, n := range p.Plan.Canceled {
		canceled = append(canceled, n.Runtime)
	}
	if !slices.Equal(canceled, []string{"conv1:repo"}) || !strings.Contains(p.Plan.Canceled[0].Reason, "active again") {
		t.Fatalf("canceled %+v", p.Plan.Canceled)
	}
	for _, r := range p.Applied.Results {
		if r.Runtime == "conv1:repo" {
			t.Fatalf("acted on the active runtime: %+v", r)
		}
	}
	if !exists(wts[0]) || exists(wts[1]) {
		t.Fatalf("conv1 kept: %v, conv2 archived: %v", exists(wts[0]), !exists(wts[1]))
	}
	if rt := h.runtime("conv1:repo"); rt.ScheduledStep != "" || time.Since(rt.LastActivity) > time.Minute {
		t.Fatalf("conv1 after activity: %+v", rt)
	}
}

// TestStopFinishesTheActionInFlight: SIGTERM (a canceled context) during
// a pass lets the removal in flight finish and be journaled, leaves the
// next action for the next start, and exits cleanly.
func TestStopFinishesTheActionInFlight(t *testing.T) {
	dir, cfg, wts := retentionSetup(t, 2, "")
	g := newGate()
	h := startDaemon(t, dir, cfg, server.Options{WrapSources: gateAll(g)})
	h.waitFor("the start pass to announce the archives", scheduled(h, "conv2:repo"))
	passDone := make(chan *openapi.RunPassResponse, 1)
	go func() {
		resp, err := h.api.RunPassWithResponse(h.ctx(), openapi.PassRequest{})
		if err != nil {
			t.Error(err)
		}
		passDone <- resp
	}()
	first := <-g.entered
	stopped := make(chan error, 1)
	go func() { stopped <- h.stop() }()
	h.waitFor("the stop to begin", func() bool { return strings.Contains(h.logs.String(), "stopping:") })
	close(g.release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	resp := <-passDone
	if resp == nil || resp.JSON200 == nil || len(resp.JSON200.Applied.Results) != 2 {
		t.Fatalf("pass: %s", body(resp))
	}
	res := resp.JSON200.Applied.Results
	if res[0].Runtime != first.ID || res[0].Outcome != plan.Done || res[1].Outcome != plan.Pending {
		t.Fatalf("results: %+v", res)
	}
	kept := wts[1]
	if first.ID == "conv2:repo" {
		kept = wts[0]
	}
	if !exists(kept) {
		t.Fatal("the action after the stop was carried out")
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if u, err := st.Unfinished(context.Background()); err != nil || len(u) != 0 {
		t.Fatalf("unfinished journal entries after a clean stop: %+v %v", u, err)
	}
}

// TestHoldsAndAPassNeverBothWin: while a pass removes the first of six
// runtimes, holds are asked for that one and the last three: the first
// hold waits and loses (410), the others win, and the pass archives the
// two runtimes nobody held and skips the held ones. For every runtime,
// either its hold was granted and it is kept, or it was archived and its
// hold refused.
func TestHoldsAndAPassNeverBothWin(t *testing.T) {
	const n = 6
	name := func(i int) string { return "conv" + string(rune('0'+i)) + ":repo" }
	dir, cfg, wts := retentionSetup(t, n, "")
	g := newGate()
	h := startDaemon(t, dir, cfg, server.Options{WrapSources: gateAll(g)})
	for i := 1; i <= n; i++ {
		h.waitFor("the start pass to announce the archives", scheduled(h, name(i)))
	}
	passDone := make(chan openapi.Pass, 1)
	go func() { passDone <- h.pass(openapi.PassRequest{}) }()
	if k := <-g.entered; k.ID != name(1) {
		t.Fatalf("first removal: %v", k)
	}
	codes := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	hold := func(id string) {
		defer wg.Done()
		resp, err := h.api.TakeHoldWithResponse(h.ctx(), id, nil, openapi.HoldRequest{Holder: "host", Ttl: "10m"})
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		codes[id] = status(resp)
		mu.Unlock()
	}
	for _, i := range []int{4, 5, 6} {
		wg.Add(1)
		hold(name(i)) // the pass is stuck on the first: these get in first
	}
	wg.Add(1)
	go hold(name(1)) // waits for the pass
	close(g.release)
	p := <-passDone
	wg.Wait()
	archived := map[string]bool{}
	for _, r := range p.Applied.Results {
		if r.Outcome == plan.Done {
			archived[r.Runtime] = true
		}
	}
	want := map[string]bool{name(1): true, name(2): true, name(3): true}
	if !reflect.DeepEqual(archived, want) {
		t.Fatalf("archived %v, want %v (results %+v)", archived, want, p.Applied.Results)
	}
	if codes[name(1)] != 410 || codes[name(4)] != 201 || codes[name(5)] != 201 || codes[name(6)] != 201 {
		t.Fatalf("holds answered %v", codes)
	}
	for i := 1; i <= n; i++ {
		id := name(i)
		if codes[id] == 201 && archived[id] || codes[id] == 410 && !archived[id] || exists(wts[i-1]) == archived[id] {
			t.Errorf("%s: hold %d, archived %v, on disk %v", id, codes[id], archived[id], exists(wts[i-1]))
		}
	}
}
