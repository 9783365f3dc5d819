package fleetbench

// LeaderPass: the leader's pass over the remote sandboxes of a fleet, on
// an E2B contract fake holding 10,000 of them: a whole pass (list every
// page, record, plan, apply), against the same pass of one host on SQLite
// with no leadership, in the same run.
//
//   - first: the first pass, recording 10,000 new runtimes;
//   - steady: a pass with nothing to do;
//   - pause-1000: a pass that pauses 1,000 idle sandboxes (in the fleet
//     each with a fenced intent and state mark, the provider called after
//     the commit, under the term's context).

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

const (
	sandboxCount = 10_000
	idleCount    = 1_000
)

type remoteFleet struct {
	fake *fakes.E2B
	eng  *engine.Engine
}

func addSandboxes(f *fakes.E2B, from, n int, started time.Time) {
	for i := from; i < from+n; i++ {
		f.Add(fakes.E2BSandbox{ID: fmt.Sprintf("sb-%05d", i), Metadata: map[string]string{"fleet": "bench"},
			StartedAt: started, EndAt: started.Add(48 * time.Hour)})
	}
}

// newRemoteFleet is the leader's engine (fleet: a PostgreSQL store and a
// term of its elector) or one host's (SQLite, no leadership) over one
// E2B source of sandboxCount sandboxes, none idle.
func newRemoteFleet(b *testing.B, fleet bool) *remoteFleet {
	fake := fakes.NewE2B(b, "key", time.Now)
	addSandboxes(fake, 0, sandboxCount, time.Now())
	client := fakes.Client(b, fake.URL, remote.HeaderAuth("X-API-Key", remote.NewSecret("key")))
	src := engine.Source{Name: "sandboxes", Kind: "e2b", Backend: &e2b.Backend{Client: client, Metadata: map[string]string{"fleet": "bench"}},
		Settings: policy.Settings{IdleSuspend: time.Hour}, Shared: true}
	opts := engine.Options{Sources: []engine.Source{src}, StateDir: filepath.Join(b.TempDir(), "state")}
	if fleet {
		st := openPostgres(b, pgtest.NewDatabase(b))
		el, err := leader.New(leader.Config{Lessor: st, Lease: "remote", Replica: "bench", TTL: leader.DefaultTTL})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); el.Run(ctx) }()
		b.Cleanup(func() { cancel(); <-done })
		for {
			if _, ok := el.Term(); ok {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		opts.Ledger, opts.Locker, opts.Fencer, opts.Lead = st, st, st, el.Term
	} else {
		opts.Ledger = openSQLite(b)
	}
	eng, err := engine.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	return &remoteFleet{fake: fake, eng: eng}
}

// pass plans and applies once, and returns how many actions were done.
func (r *remoteFleet) pass(b *testing.B) int {
	ctx := context.Background()
	p, w, err := r.eng.Plan(ctx, engine.PlanOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if len(p.Problems) > 0 {
		b.Fatalf("problems: %+v", p.Problems)
	}
	res, err := r.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
	if err != nil {
		b.Fatal(err)
	}
	done := 0
	for _, x := range res.Results {
		if x.Outcome == "done" {
			done++
		} else {
			b.Fatalf("%s of %s: %s %s", x.Step, x.Runtime, x.Outcome, x.Reason)
		}
	}
	return done
}

func BenchmarkLeaderPass(b *testing.B) {
	for _, fleet := range []bool{false, true} {
		name := "sqlite-one-host"
		if fleet {
			name = "postgres-leader"
		}
		b.Run(name+"/first-10k", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				r := newRemoteFleet(b, fleet)
				b.StartTimer()
				if n := r.pass(b); n != 0 {
					b.Fatalf("%d actions on fresh sandboxes", n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/pass")
		})
		b.Run(name+"/steady-10k", func(b *testing.B) {
			r := newRemoteFleet(b, fleet)
			r.pass(b)
			for b.Loop() {
				if n := r.pass(b); n != 0 {
					b.Fatalf("%d actions with nothing to do", n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/pass")
		})
		b.Run(fmt.Sprintf("%s/pause-%d-of-10k", name, idleCount), func(b *testing.B) {
			r := newRemoteFleet(b, fleet)
			r.pass(b)
			var took time.Duration
			for i := 0; i < b.N; i++ {
				addSandboxes(r.fake, 0, idleCount, time.Now().Add(-2*time.Hour)) // running again, and idle
				began := time.Now()
				if n := r.pass(b); n != idleCount {
					b.Fatalf("%d sandboxes paused, want %d", n, idleCount)
				}
				took += time.Since(began)
			}
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "ms/pass")
		})
	}
}

var _ ledger.Store = (*postgres.Store)(nil)
