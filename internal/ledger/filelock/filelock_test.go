package filelock

import (
	"testing"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/ledgertest"
)

var suite = ledgertest.LockerSuite{
	Domain: func(t *testing.T) string { return t.TempDir() },
	Open:   open,
	Child:  "TestLockerChild",
}

func open(tb testing.TB, dir string) ledger.Locker {
	tb.Helper()
	l, err := New(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

func TestLocker(t *testing.T) { ledgertest.RunLocker(t, suite) }

func TestLockerChild(t *testing.T) { ledgertest.LockerChild(t, open) }
