package ledgertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// Benchmark measures what the engine does each pass, against stores made by
// open, so every store is measured on the same work.
func Benchmark(b *testing.B, open func(b *testing.B) ledger.Store) {
	b.Run("RecordActivity/batch=10000", func(b *testing.B) {
		benchRecordActivity(b, open(b), 10_000)
	})
	b.Run("Observe/batch=100000", func(b *testing.B) {
		benchObserve(b, open(b), 100_000)
	})
	b.Run("ListRuntimes/n=100000", func(b *testing.B) {
		benchListRuntimes(b, open(b), 100_000)
	})
	b.Run("ActivityTimes/n=100000", func(b *testing.B) {
		benchActivityTimes(b, open(b), 100_000)
	})
}

func benchKey(i int) ledger.Key { return key("dir", fmt.Sprintf("run-%07d", i)) }

// benchObservation looks like what the dir backend reports.
func benchObservation(i int, at time.Time) ledger.Observation {
	id := fmt.Sprintf("run-%07d", i)
	return ledger.Observation{
		Key: key("dir", id), State: "stopped",
		Home:       "/srv/runs/" + id + "/home",
		Workspaces: []string{"/srv/runs/" + id + "/workspace"},
		Labels:     map[string]string{"conversation": id, "owner": "team-a"},
		SizeBytes:  int64(i) << 20, At: at,
	}
}

func closeAfter(b *testing.B, s ledger.Store) {
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Errorf("Close: %v", err)
		}
	})
}

func benchRecordActivity(b *testing.B, s ledger.Store, n int) {
	closeAfter(b, s)
	batch := make([]ledger.Activity, n)
	for i := range batch {
		batch[i].Key = benchKey(i)
	}
	round := 0
	for b.Loop() {
		// Newer times each round, so every report really updates a row.
		round++
		for i := range batch {
			batch[i].At = at(time.Duration(round) * time.Second)
		}
		if err := s.RecordActivity(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "reports/s")
}

func benchObserve(b *testing.B, s ledger.Store, n int) {
	closeAfter(b, s)
	obs := make([]ledger.Observation, n)
	for i := range obs {
		obs[i] = benchObservation(i, t0)
	}
	round := 0
	for b.Loop() {
		// Newer times each round, so every observation really updates a row
		// (the first round inserts them).
		round++
		for i := range obs {
			obs[i].At = at(time.Duration(round) * time.Minute)
		}
		if err := s.Observe(b.Context(), obs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "runtimes/s")
}

func fill(b *testing.B, s ledger.Store, n int) {
	b.Helper()
	const batch = 10_000
	for start := 0; start < n; start += batch {
		var obs []ledger.Observation
		var acts []ledger.Activity
		for i := start; i < min(start+batch, n); i++ {
			obs = append(obs, benchObservation(i, t0))
			acts = append(acts, ledger.Activity{Key: benchKey(i), At: t0})
		}
		if err := s.Observe(b.Context(), obs); err != nil {
			b.Fatal(err)
		}
		if err := s.RecordActivity(b.Context(), acts); err != nil {
			b.Fatal(err)
		}
	}
}

func benchListRuntimes(b *testing.B, s ledger.Store, n int) {
	closeAfter(b, s)
	fill(b, s, n)
	for b.Loop() {
		rs, err := s.ListRuntimes(b.Context(), ledger.RuntimeFilter{})
		if err != nil {
			b.Fatal(err)
		}
		if len(rs) != n {
			b.Fatalf("listed %d runtimes, want %d", len(rs), n)
		}
	}
}

func benchActivityTimes(b *testing.B, s ledger.Store, n int) {
	closeAfter(b, s)
	fill(b, s, n)
	for b.Loop() {
		m, err := s.ActivityTimes(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if len(m) != n {
			b.Fatalf("read %d activity times, want %d", len(m), n)
		}
	}
}
