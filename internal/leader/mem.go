package leader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// Mem is a Lessor in memory: the leases of one process (one host, where
// there is nobody to elect against, and tests). Now is its clock; nil
// means time.Now.
type Mem struct {
	Now func() time.Time

	mu    sync.Mutex
	table Table
	subs  map[chan string]bool
}

var _ Lessor = (*Mem)(nil)

func (m *Mem) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Elect implements Lessor.
func (m *Mem) Elect(ctx context.Context, name, holder string, ttl time.Duration) (Lease, bool, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, won := m.table.Elect(name, holder, ttl, m.now())
	return l, won, nil
}

// Renew implements Lessor.
func (m *Mem) Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.table.Renew(l, ttl, m.now())
}

// Resign implements Lessor.
func (m *Mem) Resign(ctx context.Context, l Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.table.Resign(l) {
		for ch := range m.subs {
			select {
			case ch <- l.Name:
			default: // a subscriber that has not read the last one wakes anyway
			}
		}
	}
	return nil
}

// Current implements Lessor.
func (m *Mem) Current(ctx context.Context, name string) (Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.table.Current(name)
	if !ok {
		return Lease{}, fmt.Errorf("lease %s: %w", name, ledger.ErrNotFound)
	}
	return l, nil
}

// Resignations implements Lessor.
func (m *Mem) Resignations(ctx context.Context) <-chan string {
	ch := make(chan string, 1)
	m.mu.Lock()
	if m.subs == nil {
		m.subs = map[chan string]bool{}
	}
	m.subs[ch] = true
	m.mu.Unlock()
	context.AfterFunc(ctx, func() {
		m.mu.Lock()
		delete(m.subs, ch)
		close(ch)
		m.mu.Unlock()
	})
	return ch
}

// Holds reports whether a write fenced by f would commit now.
func (m *Mem) Holds(f ledger.Fence) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.table.Holds(f, m.now())
}
