package server_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/clock"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// The daemon runs on its clock: the loop's tick, hold expiry and the
// flushing of coalesced activity move only when the test moves time.

// TestLoopTicksOnItsClock: after the start pass the next one comes when
// the clock reaches the interval, not before; status tells when.
func TestLoopTicksOnItsClock(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	fake := clock.NewFake(time.Now())
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n"), server.Options{Clock: fake})
	h.waitPass("start")
	fake.BlockUntil(2) // the loop's timer and the activity flush ticker
	st, err := h.api.GetStatusWithResponse(h.ctx())
	if err != nil || st.JSON200 == nil || st.JSON200.LastPass == nil || st.JSON200.LastPass.Trigger != "start" ||
		!st.JSON200.NextPassAt.Equal(fake.Now().Add(time.Hour).UTC()) {
		t.Fatalf("status after the start pass: %v %s", err, body(st))
	}
	fake.Advance(59 * time.Minute)
	if lp := h.lastPass(); lp.Trigger != "start" {
		t.Fatalf("a %s pass ran before the interval", lp.Trigger)
	}
	fake.Advance(time.Minute)
	p := h.waitPass("timer")
	if p.Err != nil {
		t.Fatal(p.Err)
	}
}

// TestHoldExpiresOnItsClock: a hold protects its runtime until the clock
// passes its expiry, and not a moment longer.
func TestHoldExpiresOnItsClock(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	fake := clock.NewFake(time.Now())
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\nhome = \"persistence\"\n"), server.Options{Clock: fake})
	h.waitPass("start")
	testtree.Write(t, filepath.Join(runs, "r1", "persistence", ".cache", "blob"), "cache")
	hold, err := h.api.TakeHoldWithResponse(h.ctx(), "r1", nil, openapi.HoldRequest{Holder: "host-1", Ttl: "10m"})
	if err != nil || hold.JSON201 == nil || !hold.JSON201.ExpiresAt.Equal(fake.Now().Add(10*time.Minute).UTC()) {
		t.Fatalf("hold: %v %s", err, body(hold))
	}
	plan := func() openapi.Plan {
		p, err := h.api.GetPlanWithResponse(h.ctx(), nil)
		if err != nil || p.JSON200 == nil {
			t.Fatalf("plan: %v %s", err, body(p))
		}
		return *p.JSON200
	}
	if p := plan(); len(p.Actions) != 0 || len(p.Skipped) != 1 || !strings.Contains(p.Skipped[0].Reason, "held by host-1") {
		t.Fatalf("while held: %+v %+v", p.Actions, p.Skipped)
	}
	fake.Advance(10*time.Minute - time.Second)
	if p := plan(); len(p.Actions) != 0 {
		t.Fatalf("a second before the hold expires: %+v", p.Actions)
	}
	fake.Advance(time.Second)
	if p := plan(); len(p.Actions) != 1 || p.Actions[0].Step != "caches" {
		t.Fatalf("once the hold expired: %+v %+v", p.Actions, p.Skipped)
	}
	if rt := h.runtime("r1"); rt.HeldBy != "" {
		t.Fatalf("still held: %+v", rt)
	}
}

// TestActivityCoalescedOnItsClock: reports are acknowledged at once,
// visible to the API and to passes, and reach the ledger file when the
// flush ticks, newest per runtime.
func TestActivityCoalescedOnItsClock(t *testing.T) {
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1")
	fake := clock.NewFake(time.Now())
	flushed := make(chan error, 8)
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\n"),
		server.Options{Clock: fake, ActivityFlush: time.Minute, Events: func(e server.Event) {
			if e.Kind == "flush" {
				flushed <- e.Err
			}
		}})
	h.waitPass("start")
	at := fake.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	for _, t := range []time.Time{at.Add(-time.Hour), at, at.Add(-time.Minute)} {
		resp, err := h.api.ReportActivityWithResponse(h.ctx(), "r1", nil, openapi.Activity{At: t})
		if err != nil || status(resp) != 204 {
			h.t.Fatalf("report: %v %s", err, body(resp))
		}
	}
	if rt := h.runtime("r1"); !rt.LastActivity.Equal(at) || rt.LastActivityFrom != "reported" {
		t.Fatalf("acknowledged but not visible: %+v", rt)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := ledger.Key{Source: "dirs:" + runs, Backend: "dir", ID: "r1"}
	if _, err := st.LastActivity(context.Background(), k); err == nil {
		t.Fatal("written before the flush")
	}
	fake.Advance(time.Minute)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if got, err := st.LastActivity(context.Background(), k); err != nil || !got.Equal(at) {
		t.Fatalf("after the flush: %v %v, want %v", got, err, at)
	}
}

// lastPass is the last pass status reports.
func (h *daemon) lastPass() openapi.PassSummary {
	h.t.Helper()
	st, err := h.api.GetStatusWithResponse(h.ctx())
	if err != nil || st.JSON200 == nil || st.JSON200.LastPass == nil {
		h.t.Fatalf("status: %v %s", err, body(st))
	}
	return *st.JSON200.LastPass
}
