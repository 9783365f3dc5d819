package postgres

import (
	"flag"
	"os"
	"testing"

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
