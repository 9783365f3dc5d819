package cloudflare_test

import (
	"context"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/cloudflare"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// TestIdleReclaimingArchivesThenDestroys: Cloudflare cannot suspend and a
// sleeping sandbox loses its files, so an awake sandbox idle past
// idle_suspend is announced, then archived (persist, read back) and
// destroyed, not suspended; one that works again in the notice period is
// kept, and retention alone does not touch it while it is awake and active.
func TestIdleReclaimingArchivesThenDestroys(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute, Grace: time.Hour}, true)
	e.awake("idle", map[string]string{"main.go": "package main\n"}) // started an hour ago
	e.awake("again", map[string]string{"a": "a"})
	p, _ := e.pass(t)
	if len(p.Actions) != 0 {
		t.Fatalf("acted before the notice: %+v", p.Actions)
	}
	notices := map[string]policy.Code{}
	for _, n := range p.Scheduled {
		notices[n.Runtime] = n.Code
		if n.Step != backend.StepArchive {
			t.Errorf("%s: announced %s", n.Runtime, n.Step)
		}
	}
	if notices["idle"] != policy.RuleIdleArchive || notices["again"] != policy.RuleIdleArchive {
		t.Fatalf("notices: %+v", p.Scheduled)
	}
	// "again" is used (a host reports activity) during the notice.
	e.clock.Advance(30 * time.Minute)
	if err := e.store.RecordActivity(context.Background(), []ledger.Activity{{Key: backend.Key{Source: "cloudflare[0]", Backend: cloudflare.Name, ID: "again"}, At: e.clock.Now()}}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(31 * time.Minute)
	p, res := e.pass(t)
	r := outcomeOf(res, "idle")
	if r.Outcome != plan.Done || r.Step != backend.StepArchive || r.ArchiveID == "" {
		t.Fatalf("idle: %+v (plan %+v)", r, p.Actions)
	}
	if !e.f.Destroyed("idle") || e.f.Destroyed("again") {
		t.Fatalf("destroyed: idle %v, again %v", e.f.Destroyed("idle"), e.f.Destroyed("again"))
	}
	if got := e.f.Bridge().Calls("POST /v1/sandbox/{id}/persist"); got != 1 {
		t.Fatalf("persist calls %d", got)
	}
	e.noWaking(t)
}

func outcomeOf(res *plan.Applied, id string) plan.Result {
	for _, r := range res.Results {
		if r.Runtime == id {
			return r
		}
	}
	return plan.Result{}
}
