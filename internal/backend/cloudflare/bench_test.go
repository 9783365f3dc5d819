package cloudflare_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/cloudflare"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// BenchmarkPass1000 is passes over 1,000 registered Cloudflare sandboxes
// against the contract fakes of the bridge and the Containers API (every
// request and answer validated): 900 awake, 100 asleep past their
// announced retention. First the loop pass that carries out that retention
// (100 nothing-survived records stored and read back, 100 destroys), then
// 100 awake sandboxes archived (persist streamed into the sink and read
// back) and destroyed through the engine. Run with:
//
//	go test -run '^$' -bench Pass1000 -benchtime 3x ./internal/backend/cloudflare
func BenchmarkPass1000(b *testing.B) {
	var loopReq, removeReq int64
	var loopTime, removeTime time.Duration
	sent := func(e *env) int64 { return int64(e.f.Bridge().Total() + e.f.API().Total()) }
	for range b.N {
		b.StopTimer()
		e := setup(b, policy.Settings{Retention: 24 * time.Hour}, true)
		for i := range 1000 {
			name := fmt.Sprintf("sb-%04d", i)
			if i%10 == 0 {
				e.asleep(name, t0.Add(-72*time.Hour))
			} else {
				e.awake(name, map[string]string{"main.go": "package main\n", "README.md": "# " + name + "\n", "node_modules/x/index.js": "x"})
			}
		}
		ctx := context.Background()
		if p, _ := e.pass(b); len(p.Scheduled) != 100 { // the notices
			b.Fatalf("%d scheduled", len(p.Scheduled))
		}
		e.clock.Advance(time.Minute)
		b.StartTimer()

		start, n := time.Now(), sent(e)
		p, w, err := e.eng.Plan(ctx, engine.PlanOptions{})
		if err != nil {
			b.Fatal(err)
		}
		res, err := e.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
		if err != nil || len(res.Results) != 100 || res.Failed() {
			b.Fatalf("apply: %v, %d results", err, len(res.Results))
		}
		loopTime += time.Since(start)
		loopReq += sent(e) - n

		b.StopTimer()
		var keys []backend.Key
		for i := 1; len(keys) < 100; i++ {
			if i%10 != 0 {
				keys = append(keys, backend.Key{Backend: cloudflare.Name, ID: fmt.Sprintf("sb-%04d", i)})
			}
		}
		rm := fakes.RemovalPlan(b, e.eng, e.clock.Now(), keys...)
		b.StartTimer()
		start, n = time.Now(), sent(e)
		res, err = e.eng.Apply(ctx, rm, engine.ApplyOptions{})
		if err != nil || res.Failed() || len(res.Results) != 100 {
			b.Fatalf("remove: %v %+v", err, res)
		}
		removeTime += time.Since(start)
		removeReq += sent(e) - n
	}
	n := float64(b.N)
	b.ReportMetric(float64(loopReq)/n, "loop-req/pass")
	b.ReportMetric(loopTime.Seconds()*1000/n, "loop-ms/pass")
	b.ReportMetric(float64(removeReq)/n, "remove100-req")
	b.ReportMetric(removeTime.Seconds()*1000/n, "remove100-ms")
}
