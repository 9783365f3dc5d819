// Package fleetbench measures the ledger of a fleet: PostgreSQL holding
// every host's runtimes, against the SQLite ledger of one host, in the
// same run.
//
//	go test -run '^$' -bench . -benchtime 5x -timeout 60m ./bench/fleet
//
// PassReads: the ledger reads a pass makes (activity, active holds, every
// runtime's state, the records that carry a decision, as the engine's
// attachLedger does), over one host's 100,000 local runtimes:
//
//   - sqlite/100k: the one host's own SQLite ledger;
//   - postgres/100k: PostgreSQL holding that host alone;
//   - postgres/1M/all: PostgreSQL holding 10 hosts x 100,000, read whole,
//     as the engine reads today;
//   - postgres/1M/own: the same, read for one host only (RuntimeStatesOf,
//     ActivityTimesOf, ListRuntimes with a backend): what a replica's pass
//     reads once the engine scopes its reads to its own sources.
//
// A host's runtimes are those of one backend ("dir@host-03"): the leading
// key column stands in for the source column keys gain next.
//
// Activity: reports written in batches (the daemon's coalescing) into a
// ledger of 1,000,000 runtimes: per-batch p50 and p99, and reports per
// second; on PostgreSQL from three replicas at once (a pool each),
// overlapping keys, as a fleet's hosts write; as fast as they can, and
// paced at the fleet's target of 20,000 reports a second.
package fleetbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const (
	hosts   = 10
	perHost = 100_000
	// Of each host's runtimes, every 200th carries a decision (a pin, a
	// lease) and every 1000th an active hold.
	decidedEvery = 200
	heldEvery    = 1000
)

var t0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

func hostBackend(h int) string { return fmt.Sprintf("dir@host-%02d", h) }

func runtimeKey(h, i int) ledger.Key {
	return ledger.Key{Backend: hostBackend(h), ID: fmt.Sprintf("run-%07d", i)}
}

// fill records hosts x perHost runtimes as passes would: observations,
// activity, a few decisions and holds.
func fill(b *testing.B, s ledger.Store, nHosts int) {
	b.Helper()
	ctx := context.Background()
	const batch = 20_000
	for h := range nHosts {
		for start := 0; start < perHost; start += batch {
			obs := make([]ledger.Observation, 0, batch)
			acts := make([]ledger.Activity, 0, batch)
			for i := start; i < min(start+batch, perHost); i++ {
				k := runtimeKey(h, i)
				obs = append(obs, ledger.Observation{Key: k, State: "stopped",
					Home: "/srv/runs/" + k.ID + "/home", Workspaces: []string{"/srv/runs/" + k.ID + "/workspace"},
					Labels: map[string]string{"conversation": k.ID, "owner": "team-a"}, SizeBytes: int64(i) << 20, At: t0})
				acts = append(acts, ledger.Activity{Key: k, At: t0.Add(time.Duration(i) * time.Second)})
			}
			if err := s.Observe(ctx, obs); err != nil {
				b.Fatal(err)
			}
			if err := s.RecordActivity(ctx, acts); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < perHost; i += decidedEvery {
			_, err := s.Update(ctx, runtimeKey(h, i), func(r *ledger.RuntimeRecord) error {
				r.Pinned, r.PinReason = true, "benchmark"
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < perHost; i += heldEvery {
			if _, err := s.TakeHold(ctx, ledger.HoldRequest{Key: runtimeKey(h, i), Holder: "agent", TTL: 24 * time.Hour, Now: t0}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// reads are the ledger reads of one pass; it returns how many runtime
// states it read.
type reads func(ctx context.Context) (int, error)

// passReads are the engine's reads (observe.go, attachLedger): whole.
func passReads(s ledger.Store) reads {
	return func(ctx context.Context) (int, error) {
		if _, err := s.ActivityTimes(ctx); err != nil {
			return 0, err
		}
		if _, err := s.ListHolds(ctx, ledger.HoldFilter{Now: t0}); err != nil {
			return 0, err
		}
		states, err := s.RuntimeStates(ctx)
		if err != nil {
			return 0, err
		}
		return len(states), decided(ctx, s, "")
	}
}

// ownReads are the same reads scoped to one host's backend.
func ownReads(s *postgres.Store, backend string) reads {
	scope := []string{backend}
	return func(ctx context.Context) (int, error) {
		if _, err := s.ActivityTimesOf(ctx, scope); err != nil {
			return 0, err
		}
		if _, err := s.ListHolds(ctx, ledger.HoldFilter{Now: t0}); err != nil {
			return 0, err
		}
		states, err := s.RuntimeStatesOf(ctx, scope)
		if err != nil {
			return 0, err
		}
		return len(states), decided(ctx, s, backend)
	}
}

// decided pages through the records that carry a decision, as a pass does.
func decided(ctx context.Context, s ledger.Store, backend string) error {
	var after ledger.Key
	for {
		page, err := s.ListRuntimes(ctx, ledger.RuntimeFilter{Backend: backend, After: after, Limit: 10000, Decided: true})
		if err != nil || len(page) < 10000 {
			return err
		}
		after = page[len(page)-1].Key
	}
}

func benchReads(b *testing.B, r reads, want int) {
	b.Helper()
	for b.Loop() {
		n, err := r(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if n != want {
			b.Fatalf("read %d states, want %d", n, want)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/pass")
}

func openSQLite(b *testing.B) *sqlite.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "ledger.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func openPostgres(b *testing.B, url string) *postgres.Store {
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// The fixtures take minutes to fill: made once per run, shared by the
// benchmarks that read them.
var (
	fleetOnce sync.Once
	fleetURL  string
)

func fleetLedger(b *testing.B) *postgres.Store {
	fleetOnce.Do(func() {
		fleetURL = pgtest.NewDatabase(b)
		s := openPostgres(b, fleetURL)
		began := time.Now()
		fill(b, s, hosts)
		b.Logf("filled PostgreSQL with %d runtimes in %v", hosts*perHost, time.Since(began))
	})
	return openPostgres(b, fleetURL)
}

func BenchmarkPassReads(b *testing.B) {
	b.Run("sqlite/100k", func(b *testing.B) {
		s := openSQLite(b)
		fill(b, s, 1)
		benchReads(b, passReads(s), perHost)
	})
	b.Run("postgres/100k", func(b *testing.B) {
		s := openPostgres(b, pgtest.NewDatabase(b))
		fill(b, s, 1)
		benchReads(b, passReads(s), perHost)
	})
	b.Run("postgres/1M/all", func(b *testing.B) {
		benchReads(b, passReads(fleetLedger(b)), hosts*perHost)
	})
	b.Run("postgres/1M/own", func(b *testing.B) {
		benchReads(b, ownReads(fleetLedger(b), hostBackend(3)), perHost)
	})
}

// batchSize is what one replica's coalescing writes at 20,000 reports a
// second spread over three replicas: a flush every 250 ms.
const batchSize = 20_000 / 3 / 4

// pacedWriter writes one batch every 250 ms for rounds batches, as a
// replica's coalescing does at 20,000 reports a second over three.
func pacedWriter(b *testing.B, s ledger.Store, seed uint64, rounds int, lat *[]time.Duration) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for range rounds {
		<-tick.C
		writer(b, s, seed, 1, lat)
		seed += 1000
	}
}

// writer writes batches of random keys of the 1M runtimes and records
// each batch's latency, for rounds batches. Every report is newer than
// what the row holds, so every one is a real update.
func writer(b *testing.B, s ledger.Store, seed uint64, rounds int, lat *[]time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 7))
	for range rounds {
		batch := make([]ledger.Activity, batchSize)
		for i := range batch {
			batch[i] = ledger.Activity{Key: runtimeKey(rng.IntN(hosts), rng.IntN(perHost)),
				At: time.Now()}
		}
		began := time.Now()
		if err := s.RecordActivity(context.Background(), batch); err != nil {
			b.Error(err)
			return
		}
		*lat = append(*lat, time.Since(began))
	}
}

func reportLatency(b *testing.B, lat []time.Duration, reports int) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms/batch")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms/batch")
	b.ReportMetric(float64(reports)/b.Elapsed().Seconds(), "reports/s")
}

func BenchmarkActivity(b *testing.B) {
	const rounds = 100
	b.Run(fmt.Sprintf("sqlite/1-writer/batch=%d", batchSize), func(b *testing.B) {
		s := openSQLite(b)
		fill(b, s, hosts)
		var lat []time.Duration
		for b.Loop() {
			writer(b, s, 1, rounds, &lat)
		}
		reportLatency(b, lat, b.N*rounds*batchSize)
	})
	b.Run(fmt.Sprintf("postgres/3-replicas/batch=%d", batchSize), func(b *testing.B) {
		replicas := []*postgres.Store{fleetLedger(b), fleetLedger(b), fleetLedger(b)}
		var lat []time.Duration
		var mu sync.Mutex
		for b.Loop() {
			var wg sync.WaitGroup
			for i, s := range replicas {
				wg.Go(func() {
					var mine []time.Duration
					writer(b, s, uint64(i), rounds, &mine)
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		reportLatency(b, lat, b.N*rounds*batchSize*len(replicas))
	})
	// At the rate of the target (20,000 reports a second over three
	// replicas) rather than as fast as possible: the latency a flush sees
	// in service, which must stay under the 250 ms between flushes.
	b.Run(fmt.Sprintf("postgres/3-replicas/paced-20000-per-s/batch=%d", batchSize), func(b *testing.B) {
		replicas := []*postgres.Store{fleetLedger(b), fleetLedger(b), fleetLedger(b)}
		const paced = 40 // 10 s
		var lat []time.Duration
		var mu sync.Mutex
		for b.Loop() {
			var wg sync.WaitGroup
			for i, s := range replicas {
				wg.Go(func() {
					var mine []time.Duration
					pacedWriter(b, s, uint64(100+i), paced, &mine)
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		reportLatency(b, lat, b.N*paced*batchSize*len(replicas))
	})
}
