package native_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/daytona"
	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/backend/httpbackend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/native"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// provider is one fake with 1,000 sandboxes, 100 of them idle.
type provider struct {
	backend backend.Backend
	client  *remote.Client
}

func e2bProvider(b *testing.B, clock *fakes.Clock) provider {
	f := fakes.NewE2B(b, "k", clock.Now)
	sel := map[string]string{"pool": "bench"}
	for i := range 1000 {
		started := t0.Add(-10 * time.Minute)
		if i%10 == 0 {
			started = t0.Add(-2 * time.Hour)
		}
		f.Add(fakes.E2BSandbox{ID: fmt.Sprintf("sb-%04d", i), State: "running", StartedAt: started, EndAt: t0.Add(time.Hour), Metadata: sel})
	}
	c := fakes.Client(b, f.URL, remote.HeaderAuth("X-API-Key", remote.NewSecret("k")))
	return provider{&e2b.Backend{Client: c, Metadata: sel, Now: clock.Now}, c}
}

func daytonaProvider(b *testing.B, clock *fakes.Clock) provider {
	f := fakes.NewDaytona(b, "k", clock.Now)
	sel := map[string]string{"pool": "bench"}
	for i := range 1000 {
		last := t0.Add(-10 * time.Minute)
		if i%10 == 0 {
			last = t0.Add(-2 * time.Hour)
		}
		f.Add(fakes.DaytonaSandbox{ID: fmt.Sprintf("sb-%04d", i), State: "started", Labels: sel, CreatedAt: t0.Add(-3 * time.Hour),
			LastActivity: last, AutoStop: 0, AutoArchive: 7 * 24 * 60, AutoDelete: -1})
	}
	c := fakes.Client(b, f.URL, remote.BearerAuth(remote.NewSecret("k")))
	return provider{&daytona.Backend{Client: c, Labels: sel}, c}
}

func httpProvider(b *testing.B, clock *fakes.Clock) provider {
	f := fakes.NewHTTPServer(b, "k", clock.Now, "suspend", "delete", "lifecycle", "lifecycle_write", "touch")
	sel := map[string]string{"pool": "bench"}
	for i := range 1000 {
		last := t0.Add(-10 * time.Minute)
		if i%10 == 0 {
			last = t0.Add(-2 * time.Hour)
		}
		f.Add(fakes.HTTPRuntime{ID: fmt.Sprintf("rt-%04d", i), State: "running", LastActivity: last, CreatedAt: t0.Add(-3 * time.Hour), Labels: sel})
	}
	c := fakes.Client(b, f.URL, remote.BearerAuth(remote.NewSecret("k")))
	opened, err := httpbackend.Open(context.Background(), &httpbackend.Backend{Client: c, Labels: sel})
	if err != nil {
		b.Fatal(err)
	}
	return provider{opened, c}
}

// BenchmarkPass1000 measures one whole pass over 1,000 sandboxes of one
// provider, against its contract fake (which validates every request and
// answer, so the figures include that work): plan and apply of the loop
// (100 idle sandboxes suspended), then native.Sync (every sandbox's timers
// read, and written where they drift), then a second native.Sync with
// nothing changed (the steady state of a daemon). Run with:
//
//	go test -run '^$' -bench Pass1000 -benchtime 3x ./internal/native
func BenchmarkPass1000(b *testing.B) {
	for _, tc := range []struct {
		name string
		make func(*testing.B, *fakes.Clock) provider
	}{{"e2b", e2bProvider}, {"daytona", daytonaProvider}, {"http", httpProvider}} {
		b.Run(tc.name, func(b *testing.B) {
			var loopReq, nativeReq, steadyReq int64
			var loopTime, nativeTime, steadyTime time.Duration
			for range b.N {
				b.StopTimer()
				clock := fakes.NewClock(t0)
				p := tc.make(b, clock)
				src := engine.Source{Name: tc.name + "[0]", Backend: p.backend, Settings: policy.Settings{IdleSuspend: 30 * time.Minute, Retention: 7 * 24 * time.Hour}}
				eng, store := fakes.Engine(b, clock, src)
				ctx := context.Background()
				b.StartTimer()

				start, sent := time.Now(), p.client.Sent()
				pl, w, err := eng.Plan(ctx, engine.PlanOptions{})
				if err != nil {
					b.Fatal(err)
				}
				res, err := eng.Apply(ctx, pl, engine.ApplyOptions{World: w})
				if err != nil || len(res.Results) != 100 || res.Failed() {
					b.Fatalf("apply: %v, %d results", err, len(res.Results))
				}
				loopTime += time.Since(start)
				loopReq += p.client.Sent() - sent

				start, sent = time.Now(), p.client.Sent()
				rep, err := native.Sync(ctx, native.Options{Sources: []engine.Source{src}, Ledger: store, Now: clock.Now})
				if err != nil || rep.Failed != 0 || len(rep.Problems) != 0 {
					b.Fatalf("sync: %v %+v", err, rep.Problems)
				}
				nativeTime += time.Since(start)
				nativeReq += p.client.Sent() - sent

				// The next pass, nothing having changed: what a daemon
				// pays every few minutes.
				start, sent = time.Now(), p.client.Sent()
				rep, err = native.Sync(ctx, native.Options{Sources: []engine.Source{src}, Ledger: store, Now: clock.Now})
				if err != nil || rep.Written != 0 {
					b.Fatalf("second sync: %v, %d written", err, rep.Written)
				}
				steadyTime += time.Since(start)
				steadyReq += p.client.Sent() - sent
			}
			n := float64(b.N)
			b.ReportMetric(float64(loopReq)/n, "loop-req/pass")
			b.ReportMetric(loopTime.Seconds()*1000/n, "loop-ms/pass")
			b.ReportMetric(float64(nativeReq)/n, "native-req/pass")
			b.ReportMetric(nativeTime.Seconds()*1000/n, "native-ms/pass")
			b.ReportMetric(float64(steadyReq)/n, "steady-req/pass")
			b.ReportMetric(steadyTime.Seconds()*1000/n, "steady-ms/pass")
		})
	}
}
