package postgres

import (
	"os"
	"testing"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/ledgertest"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

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
