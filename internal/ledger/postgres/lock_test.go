package postgres

import (
	"testing"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/ledgertest"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
)

// Each test gets a database of its own: advisory locks belong to one.
var lockSuite = ledgertest.LockerSuite{
	Domain: func(t *testing.T) string { return pgtest.NewDatabase(t) },
	Open:   openLocker,
	Child:  "TestLockerChild",
}

// openLocker opens a store of its own: another pool, as another process
// or host would have.
func openLocker(tb testing.TB, url string) ledger.Locker {
	tb.Helper()
	s, err := Open(tb.Context(), url)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestLocker(t *testing.T) { ledgertest.RunLocker(t, lockSuite) }

func TestLockerChild(t *testing.T) { ledgertest.LockerChild(t, openLocker) }
