package leader_test

import (
	"flag"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/leader/leadertest"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
)

// TestMain runs the tests that need one against the package's PostgreSQL,
// and keeps rapid from writing fail files into testdata/ (the seed it
// prints reproduces a failure) unless asked for with -rapid.nofailfile=false
// or RAPID_NOFAILFILE.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.nofailfile" })
	if _, env := os.LookupEnv("RAPID_NOFAILFILE"); !set && !env {
		if err := flag.Set("rapid.nofailfile", "true"); err != nil {
			panic(err)
		}
	}
	os.Exit(pgtest.Main(m))
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// TestMemConforms: the in-memory lessor is the Table behind a lock, and
// the suite says so (it also checks the suite against the reference).
func TestMemConforms(t *testing.T) {
	leadertest.Run(t, func(t *testing.T) leadertest.Subject {
		c := &clock{}
		m := &leader.Mem{Now: c.Now}
		return leadertest.Subject{Lessor: m, SetClock: c.Set,
			Holds: func(f ledger.Fence) (bool, error) { return m.Holds(f), nil }}
	})
}
