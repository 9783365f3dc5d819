package fakes

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Clock is a settable clock shared by a fake and the engine under test.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Client returns a remote client for a fake with fast retries (tests do not
// wait out real backoffs) and a generous rate.
func Client(t testing.TB, url string, auth remote.Auth) *remote.Client {
	t.Helper()
	c, err := remote.New(remote.Options{Endpoint: url, Auth: auth, Rate: 10000, Concurrency: 16,
		Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Retries: 6})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Engine opens a ledger in a temporary folder and an engine over sources,
// on clock.
func Engine(t testing.TB, clock *Clock, sources ...engine.Source) (*engine.Engine, ledger.Store) {
	t.Helper()
	dir := t.TempDir()
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	eng, err := engine.New(engine.Options{Ledger: store, Sources: sources, StateDir: filepath.Join(dir, "state"),
		ArchiveDir: filepath.Join(dir, "archives"), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng, store
}
