package testtree

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// HeapCeiling runs f and fails the test when the heap in use grew by more
// than limit bytes over what it was before f, sampled every few
// milliseconds while f runs: a bound on memory an endless or hostile input
// must not break.
func HeapCeiling(tb testing.TB, limit uint64, f func()) {
	tb.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > base && m.HeapInuse-base > peak.Load() {
				peak.Store(m.HeapInuse - base)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	<-sampled
	if p := peak.Load(); p > limit {
		tb.Fatalf("the heap grew by %d MB, over the ceiling of %d MB", p>>20, limit>>20)
	}
	tb.Logf("the heap grew by at most %d MB (ceiling %d MB)", peak.Load()>>20, limit>>20)
}
