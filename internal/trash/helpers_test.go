package trash_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
	"github.com/reclaimer/reclaimer/internal/trash"
)

// resolverModes runs a test once with openat2 (where the kernel has it) and
// once with the component-by-component fallback walk.
var resolverModes = []struct {
	name string
	r    beneath.Resolver
}{
	{"openat2", beneath.Resolver{}},
	{"fallback", beneath.Resolver{Fallback: true}},
}

// openTrash opens the trash of root and closes it when the test ends.
func openTrash(t *testing.T, root string, opts trash.Options) *trash.Trash {
	t.Helper()
	tr, err := trash.Open(root, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", root, err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// drain waits for the purger with a generous deadline, so that a hung
// purger fails the test instead of the whole run.
func drain(t *testing.T, tr *trash.Trash) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := tr.Drain(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain did not finish within 2 minutes (pending %d)", tr.Pending())
	}
	return err
}

// trashNames lists the entries in root's trash folder, sorted.
func trashNames(t *testing.T, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, trash.DirName))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names
}

// writeFile writes size bytes of a pattern that depends on seed.
func writeFile(t testing.TB, path string, size int, seed byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = seed + byte(i*7)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdirAll(t testing.TB, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists (lstat: %v)", path, err)
	}
}

// purgeLog records OnPurged calls.
func newPurgeLog() *purgeLog {
	l := &purgeLog{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

type purgeLog struct {
	mu   sync.Mutex
	cond *sync.Cond
	list []trash.Purged
}

func (l *purgeLog) add(p trash.Purged) {
	l.mu.Lock()
	l.list = append(l.list, p)
	l.cond.Broadcast()
	l.mu.Unlock()
}

// waitFor returns the log once it holds n calls. Drain may return before
// the last OnPurged call has run (see TestDrainWaitsForOnPurged), and a
// Close right after Drain may then suppress it (see
// TestCloseAfterDrainKeepsOnPurged), so tests wait for the calls
// themselves before they close.
func (l *purgeLog) waitFor(t *testing.T, n int) []trash.Purged {
	t.Helper()
	timer := time.AfterFunc(time.Minute, func() {
		l.mu.Lock()
		l.cond.Broadcast()
		l.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(time.Minute)
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.list) < n {
		if time.Now().After(deadline) {
			t.Fatalf("OnPurged was called %d times within a minute, want %d", len(l.list), n)
		}
		l.cond.Wait()
	}
	return append([]trash.Purged(nil), l.list...)
}

// watcher reports IN_DELETE events of a few directories through inotify,
// so a test can react to another goroutine's or process's progress without
// sleeping.
type watcher struct {
	fd  int
	wds map[int32]string
	buf []byte
}

type inotifyEvent struct {
	watch string // the label given to add
	name  string
	mask  uint32
}

func newWatcher(t *testing.T) *watcher {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatalf("inotify_init1: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &watcher{fd: fd, wds: map[int32]string{}, buf: make([]byte, 64<<10)}
}

func (w *watcher) add(t *testing.T, path, label string) {
	t.Helper()
	wd, err := unix.InotifyAddWatch(w.fd, path, unix.IN_DELETE)
	if err != nil {
		t.Fatalf("inotify_add_watch %s: %v", path, err)
	}
	w.wds[int32(wd)] = label
}

// wait blocks until events arrive, extra becomes readable (when >= 0), or
// the deadline passes. It returns the events read and whether extra fired.
func (w *watcher) wait(t *testing.T, deadline time.Time, extra int) ([]inotifyEvent, bool) {
	t.Helper()
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatal("no filesystem event before the deadline")
		}
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		if extra >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(extra), Events: unix.POLLIN})
		}
		n, err := unix.Poll(fds, int(left/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if n == 0 {
			continue
		}
		var evs []inotifyEvent
		if fds[0].Revents&unix.POLLIN != 0 {
			evs = w.read(t)
		}
		fired := extra >= 0 && fds[1].Revents != 0
		if len(evs) > 0 || fired {
			return evs, fired
		}
	}
}

func (w *watcher) read(t *testing.T) []inotifyEvent {
	t.Helper()
	n, err := unix.Read(w.fd, w.buf)
	if err == unix.EAGAIN || err == unix.EINTR {
		return nil
	}
	if err != nil {
		t.Fatalf("read inotify: %v", err)
	}
	var evs []inotifyEvent
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		wd := int32(binary.NativeEndian.Uint32(w.buf[off:]))
		mask := binary.NativeEndian.Uint32(w.buf[off+4:])
		nameLen := int(binary.NativeEndian.Uint32(w.buf[off+12:]))
		name := w.buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if mask&unix.IN_Q_OVERFLOW != 0 {
			t.Fatal("inotify queue overflowed")
		}
		evs = append(evs, inotifyEvent{watch: w.wds[wd], name: string(name), mask: mask})
		off += unix.SizeofInotifyEvent + nameLen
	}
	return evs
}
