package docker_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// TestLoudWhenBlind: what a listing cannot see is said in plain words: a
// home no matched container mounts, a root that does not exist (warnings
// beside the runtimes it did list), and a selector that matches nothing
// while the ledger knows the source's containers (a problem of the pass,
// not "nothing to do").
func TestLoudWhenBlind(t *testing.T) {
	h := newHarness(t, "")
	name := h.name("c1")
	home, ws := h.sandbox(name)
	h.container(name, h.scope, binds(home, ws), "/home/x=1")
	ctx := context.Background()

	typo := *h.backend
	typo.Home = "/hom"
	typo.Roots = []string{filepath.Join(h.root, "no-such-root"), h.root}
	rts, err := typo.List(ctx, backend.ListOptions{Light: true})
	var warn backend.Warnings
	if !errors.As(err, &warn) || len(rts) == 0 {
		t.Fatalf("list with a typo: %d runtimes, %v", len(rts), err)
	}
	for _, want := range []string{"/hom is mounted by none of the 1 matched containers",
		"root " + filepath.Join(h.root, "no-such-root") + " does not exist"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("warnings lack %q: %v", want, err)
		}
	}

	h.use(policy.Settings{})
	h.pass() // the ledger knows c1 now
	h.backend.Labels = map[string]string{scopeLabel: h.scope + "-typo"}
	p, _, err := h.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var empty *plan.Problem
	for i, pr := range p.Problems {
		if pr.Code == plan.SourceEmpty {
			empty = &p.Problems[i]
		}
	}
	if empty == nil || !strings.Contains(empty.Message, "selector "+scopeLabel+"="+h.scope+"-typo matched 0 of ") {
		t.Fatalf("problems %+v, want the selector that matched nothing", p.Problems)
	}
}
