package modal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/modal"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// BenchmarkPass1000 is one pass over 1,000 running Modal sandboxes against
// the gRPC contract fake (it checks every request): the loop's plan and
// apply (nothing to do: no pause, running sandboxes are left), then 100
// sandboxes archived (filesystem snapshot, manifest stored and read back)
// and terminated through the engine. Run with:
//
//	go test -run '^$' -bench Pass1000 -benchtime 3x ./internal/backend/modal
func BenchmarkPass1000(b *testing.B) {
	var loopReq, removeReq int64
	var loopTime, removeTime time.Duration
	for range b.N {
		b.StopTimer()
		clock := fakes.NewClock(t0)
		f := fakes.NewModal(b, tokenID, secret, clock.Now)
		for i := range 1000 {
			started := t0.Add(-time.Duration(i) * time.Second)
			f.Add(fakes.ModalSandbox{ID: fmt.Sprintf("sb-%04d", i), Tags: selector, CreatedAt: started.Add(-time.Second), StartedAt: started, TimeoutSecs: 86400})
		}
		c := client(b, f, clock, tokenID, secret)
		bk := &modal.Backend{Client: c, Tags: selector}
		eng, _ := fakes.Engine(b, clock, engine.Source{Name: "modal[0]", Backend: bk, Settings: policy.Settings{IdleSuspend: 30 * time.Minute, Retention: 7 * 24 * time.Hour}})
		ctx := context.Background()
		b.StartTimer()

		start, sent := time.Now(), c.Sent()
		p, w, err := eng.Plan(ctx, engine.PlanOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := eng.Apply(ctx, p, engine.ApplyOptions{World: w}); err != nil || len(p.Actions) != 0 {
			b.Fatalf("apply: %v, %d actions", err, len(p.Actions))
		}
		loopTime += time.Since(start)
		loopReq += c.Sent() - sent

		b.StopTimer()
		var keys []backend.Key
		for i := range 100 {
			keys = append(keys, backend.Key{Backend: modal.Name, ID: fmt.Sprintf("sb-%04d", i)})
		}
		rm := fakes.RemovalPlan(b, eng, clock.Now(), keys...)
		b.StartTimer()
		start, sent = time.Now(), c.Sent()
		res, err := eng.Apply(ctx, rm, engine.ApplyOptions{})
		if err != nil || res.Failed() || len(res.Results) != 100 {
			b.Fatalf("remove: %v %+v", err, res)
		}
		removeTime += time.Since(start)
		removeReq += c.Sent() - sent
	}
	n := float64(b.N)
	b.ReportMetric(float64(loopReq)/n, "loop-req/pass")
	b.ReportMetric(loopTime.Seconds()*1000/n, "loop-ms/pass")
	b.ReportMetric(float64(removeReq)/n, "remove100-req")
	b.ReportMetric(removeTime.Seconds()*1000/n, "remove100-ms")
}
