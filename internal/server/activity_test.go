package server

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/clock"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
)

// failingStore fails RecordActivity while fail is set.
type failingStore struct {
	ledger.Store
	mu   sync.Mutex
	fail bool
}

func (f *failingStore) RecordActivity(ctx context.Context, batch []ledger.Activity) error {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail {
		return errors.New("disk full")
	}
	return f.Store.RecordActivity(ctx, batch)
}

// TestActivityBufferKeepsWhatFailed: a batch whose write fails stays in
// the buffer (merged with newer reports, newest wins), stays visible to
// readers, and is written by the next flush.
func TestActivityBufferKeepsWhatFailed(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fs := &failingStore{Store: st, fail: true}
	buf := newActivityBuffer(fs, clock.Real)
	view := pendingStore{Store: st, buf: buf}
	k1, k2 := ledger.Key{Source: "dirs:/r", Backend: "dir", ID: "a"}, ledger.Key{Source: "dirs:/r", Backend: "dir", ID: "b"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	buf.add(k1, t0.Add(time.Minute))
	buf.add(k1, t0) // older: ignored
	if err := buf.flush(ctx); err == nil {
		t.Fatal("flush should fail")
	}
	buf.add(k1, t0.Add(30*time.Second)) // older than the failed one: it must not win
	buf.add(k2, t0)
	if got, err := view.LastActivity(ctx, k1); err != nil || !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("pending activity of a: %v %v", got, err)
	}
	all, err := view.ActivityTimes(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("pending activity: %v %v", all, err)
	}
	fs.mu.Lock()
	fs.fail = false
	fs.mu.Unlock()
	if err := buf.flush(ctx); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[ledger.Key]time.Time{k1: t0.Add(time.Minute), k2: t0} {
		if got, err := st.LastActivity(ctx, k); err != nil || !got.Equal(want) {
			t.Errorf("%s in the ledger: %v %v, want %v", k, got, err, want)
		}
	}
	if len(buf.all()) != 0 {
		t.Fatalf("buffer not empty after a good flush: %v", buf.all())
	}
}
