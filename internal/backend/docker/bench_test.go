package docker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/dockerclient/dockertest"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// BenchmarkPassOverStoppedContainers makes N stopped containers (default
// 200; RECLAIMER_BENCH_CONTAINERS) whose homes hold caches, then times
// one pass that empties them all, and a second pass that finds nothing,
// counting the Engine requests of each. Run it once:
//
//	go test -run '^$' -bench PassOverStoppedContainers -benchtime 1x ./internal/backend/docker
func BenchmarkPassOverStoppedContainers(b *testing.B) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("RECLAIMER_BENCH_CONTAINERS")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		b.StopTimer()
		h := newHarness(b, "")
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				name := h.name(fmt.Sprintf("c%04d", i))
				home := filepath.Join(h.root, name, "home")
				if err := os.MkdirAll(home, 0o755); err != nil {
					b.Error(err)
					return
				}
				id := h.run.Create(dockertest.Spec{Name: name, Labels: map[string]string{scopeLabel: h.scope},
					Binds: []string{home + ":/home"}, Args: []string{"/home/.cache/pip/x=" + name, "/home/.npm/y=1", "/home/.bash_history=ls"}, Start: true})
				h.run.Wait(id)
			}()
		}
		wg.Wait()
		ctx := context.Background()
		h.use(policy.Settings{CacheDirs: cacheDirs})

		b.StartTimer()
		start, calls := time.Now(), h.client.Calls()
		p, w, err := h.eng.Plan(ctx, engine.PlanOptions{})
		if err != nil {
			b.Fatal(err)
		}
		planTime, planCalls := time.Since(start), h.client.Calls()-calls
		res, err := h.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.eng.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		passTime, passCalls := time.Since(start), h.client.Calls()-calls
		b.StopTimer()
		done := 0
		for _, r := range res.Results {
			if r.Outcome == plan.Done {
				done++
			}
		}
		if done != n {
			b.Fatalf("%d of %d caches actions done", done, n)
		}

		start, calls = time.Now(), h.client.Calls()
		p, w, err = h.eng.Plan(ctx, engine.PlanOptions{})
		if err == nil {
			_, err = h.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
		}
		if err != nil {
			b.Fatal(err)
		}
		idleTime, idleCalls := time.Since(start), h.client.Calls()-calls

		// A full observation, as a pass with retention or idle suspend
		// makes every time.
		calls = h.client.Calls()
		start = time.Now()
		if _, err := h.eng.Observe(ctx, engine.ObserveOptions{}); err != nil {
			b.Fatal(err)
		}
		fullTime, fullCalls := time.Since(start), h.client.Calls()-calls

		b.ReportMetric(float64(n), "containers")
		b.ReportMetric(passTime.Seconds(), "pass-s")
		b.ReportMetric(float64(passCalls)/float64(n), "pass-calls/runtime")
		b.ReportMetric(planTime.Seconds(), "plan-s")
		b.ReportMetric(float64(planCalls)/float64(n), "plan-calls/runtime")
		b.ReportMetric(idleTime.Seconds(), "idle-pass-s")
		b.ReportMetric(float64(idleCalls), "idle-pass-calls")
		b.ReportMetric(fullTime.Seconds(), "full-observe-s")
		b.ReportMetric(float64(fullCalls)/float64(n), "full-observe-calls/runtime")
	}
}
