package openhandscloud_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend/openhandscloud"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/native"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// BenchmarkPass1000 is one pass over 1,000 running OpenHands sandboxes,
// each with a conversation, 100 of them idle (paused by the pass), against
// the contract fake (which validates every request and answer), then
// native.Sync (server-wide timers: nothing to read or write). Run with:
//
//	go test -run '^$' -bench Pass1000 -benchtime 3x ./internal/backend/openhandscloud
func BenchmarkPass1000(b *testing.B) {
	var loopReq, syncReq int64
	var loopTime time.Duration
	for range b.N {
		b.StopTimer()
		clock := fakes.NewClock(t0)
		f := fakes.NewOpenHands(b, map[string]string{key: "alice"}, clock.Now)
		for i := range 1000 {
			id := fmt.Sprintf("sb-%04d", i)
			last := t0.Add(-10 * time.Minute)
			if i%10 == 0 {
				last = t0.Add(-2 * time.Hour)
			}
			f.AddSandbox(fakes.OpenHandsSandbox{ID: id, User: "alice", Status: "RUNNING", CreatedAt: t0.Add(-3 * time.Hour)})
			f.AddConversation(fakes.OpenHandsConversation{ID: "c-" + id, User: "alice", SandboxID: id, CreatedAt: t0.Add(-3 * time.Hour), UpdatedAt: last, Execution: "idle"})
		}
		c := fakes.Client(b, f.URL, remote.HeaderAuth("X-Access-Token", remote.NewSecret(key)))
		src := engine.Source{Name: "openhands-cloud[0]", Backend: &openhandscloud.Backend{Client: c}, Settings: policy.Settings{IdleSuspend: 30 * time.Minute, Retention: 7 * 24 * time.Hour}}
		eng, store := fakes.Engine(b, clock, src)
		ctx := context.Background()
		b.StartTimer()

		start, sent := time.Now(), c.Sent()
		p, w, err := eng.Plan(ctx, engine.PlanOptions{})
		if err != nil {
			b.Fatal(err)
		}
		res, err := eng.Apply(ctx, p, engine.ApplyOptions{World: w})
		if err != nil || len(res.Results) != 100 || res.Failed() {
			b.Fatalf("apply: %v, %d results", err, len(res.Results))
		}
		loopTime += time.Since(start)
		loopReq += c.Sent() - sent

		sent = c.Sent()
		if rep, err := native.Sync(ctx, native.Options{Sources: []engine.Source{src}, Ledger: store, Now: clock.Now}); err != nil || rep.Failed != 0 {
			b.Fatalf("sync: %v %+v", err, rep)
		}
		syncReq += c.Sent() - sent
	}
	n := float64(b.N)
	b.ReportMetric(float64(loopReq)/n, "loop-req/pass")
	b.ReportMetric(loopTime.Seconds()*1000/n, "loop-ms/pass")
	b.ReportMetric(float64(syncReq)/n, "native-req/pass")
}
