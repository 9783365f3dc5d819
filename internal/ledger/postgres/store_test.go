package postgres

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/ledgertest"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
)

// TestMain runs the tests against the package's PostgreSQL, and keeps
// rapid from writing fail files into testdata/ (the seed it prints
// reproduces a failure) unless asked for with -rapid.nofailfile=false.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.nofailfile" })
	if !set {
		if err := flag.Set("rapid.nofailfile", "true"); err != nil {
			panic(err)
		}
	}
	os.Exit(pgtest.Main(m))
}

func openTemp(tb testing.TB) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), pgtest.NewSchema(tb))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Store { return openTemp(t) })
}

// TestScopedReads: the reads of one replica's runtimes give exactly the
// whole reads' rows of those backends.
func TestScopedReads(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var obs []ledger.Observation
	var acts []ledger.Activity
	for _, b := range []string{"dir@host-a", "dir@host-b", "e2b"} {
		for i := range 3 {
			k := ledger.Key{Backend: b, ID: fmt.Sprint(i)}
			obs = append(obs, ledger.Observation{Key: k, State: "idle", At: now})
			acts = append(acts, ledger.Activity{Key: k, At: now})
		}
	}
	if err := s.Observe(ctx, obs); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordActivity(ctx, acts); err != nil {
		t.Fatal(err)
	}
	all, err := s.RuntimeStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	some, err := s.RuntimeStatesOf(ctx, []string{"dir@host-a", "e2b"})
	if err != nil {
		t.Fatal(err)
	}
	allActs, err := s.ActivityTimes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	someActs, err := s.ActivityTimesOf(ctx, []string{"dir@host-a", "e2b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 9 || len(some) != 6 || len(allActs) != 9 || len(someActs) != 6 {
		t.Fatalf("read %d and %d states, %d and %d activity times; want 9 and 6", len(all), len(some), len(allActs), len(someActs))
	}
	for k, st := range some {
		if k.Backend == "dir@host-b" || all[k] != st || !someActs[k].Equal(allActs[k]) {
			t.Fatalf("scoped read gave %v %q", k, st)
		}
	}
	if none, err := s.RuntimeStatesOf(ctx, nil); err != nil || len(none) != 0 {
		t.Fatalf("no scope: %v, %v", none, err)
	}
}

func BenchmarkStore(b *testing.B) {
	ledgertest.Benchmark(b, func(b *testing.B) ledger.Store { return openTemp(b) })
}

func t0() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC) }
