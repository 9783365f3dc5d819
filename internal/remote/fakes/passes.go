package fakes

import (
	"context"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/plan"
)

// Pass plans and applies one pass of eng.
func Pass(t testing.TB, eng *engine.Engine) (*plan.Plan, *plan.Applied) {
	t.Helper()
	ctx := context.Background()
	p, w, err := eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Apply(ctx, p, engine.ApplyOptions{World: w})
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}

// Outcome is the result of the action on runtime id (zero when none).
func Outcome(res *plan.Applied, id string) plan.Result {
	for _, r := range res.Results {
		if r.Runtime == id {
			return r
		}
	}
	return plan.Result{}
}

// RemovalPlan is a plan deleting each of keys as observed now: the action
// an orphan sweep or a delete on request gives a runtime, for backends whose
// running runtimes no policy removes by itself.
func RemovalPlan(t testing.TB, eng *engine.Engine, at time.Time, keys ...backend.Key) *plan.Plan {
	t.Helper()
	w, err := eng.Observe(context.Background(), engine.ObserveOptions{Record: true})
	if err != nil {
		t.Fatal(err)
	}
	at = at.UTC()
	p := &plan.Plan{ID: at.Format("20060102T150405Z") + "-test", CreatedAt: at}
	for _, k := range keys {
		if k.Source == "" {
			// The one source of that backend (the tests have one).
			for _, src := range eng.Sources() {
				if src.Backend.Name() == k.Backend {
					k.Source = src.Name
				}
			}
		}
		s := w.Find(k)
		if s == nil {
			t.Fatalf("%s not observed", k)
		}
		p.Actions = append(p.Actions, plan.Action{Runtime: k.ID, Backend: k.Backend, Source: k.Source, Step: backend.StepDelete, Reason: "requested",
			Observed: plan.Observed{State: s.Runtime.State, LastActivity: s.LastActive(), Fingerprint: s.Runtime.Fingerprint}})
	}
	return p
}
