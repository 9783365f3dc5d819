package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
	"github.com/reclaimer/reclaimer/internal/notify"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

type lockedLogs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLogs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFleetNoticeDeliveries: in a fleet, the daemon announces only the
// notices recorded in the ledger (the outbox sends them; a scheduled
// notice the pass could not record is announced by nobody), and writes
// what it did with a remote runtime's notice under the fence: a replica
// whose lease was taken over (its term still running by its own clock)
// delivers it but writes no journal row of it and does not mark it
// delivered (the new leader sends it again, under the same delivery id),
// while a local runtime's delivery is journaled and marked as before.
func TestFleetNoticeDeliveries(t *testing.T) {
	url := pgtest.NewDatabase(t)
	fake := fakes.NewE2B(t, "key", time.Now)
	var mu sync.Mutex
	var got []string // runtimes whose notice the hook received
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev notify.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			t.Errorf("hook: %v", err)
		}
		mu.Lock()
		got = append(got, ev.Runtime)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "e2b.key"), []byte("key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "reclaimer.toml")
	// A lease of minutes: the replica does not renew (and so does not
	// notice the takeover) while the test runs.
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
[ledger]
path = %q
url = %q

[server]
name = "a"
listen = "127.0.0.1:0"
interval = "1h"
leader_lease = "3m"

[[dirs]]
root = %q

[[e2b]]
name = "sandboxes"
endpoint = %q
api_key_file = %q
metadata = { fleet = "test" }

[[notify]]
url = %q
`, filepath.Join(dir, "state", "ledger.db"), url, runs, fake.URL, filepath.Join(dir, "e2b.key"), hook.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	deliveries := make(chan struct{}, 16)
	logs := &lockedLogs{}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := Open(ctx, Options{ConfigPath: cfg, Logs: logs, Version: "test",
		Events: func(e Event) {
			if e.Kind == "delivery" {
				deliveries <- struct{}{}
			}
		}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		if t.Failed() {
			t.Logf("daemon logs:\n%s", logs.String())
		}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, ok := d.fleet.lead(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not lead within 15 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var local string
	for _, s := range d.app.Sources() {
		if !s.Shared {
			local = s.Name
		}
	}
	remote := func(id string) plan.Notice {
		return plan.Notice{Runtime: id, Backend: "e2b", Source: "sandboxes", Step: backend.StepDelete, Due: time.Now().Add(time.Hour)}
	}
	own := plan.Notice{Runtime: "r0", Backend: "dir", Source: local, Step: backend.StepDelete, Due: time.Now().Add(time.Hour)}
	// announce records the notices a pass recorded (the others it only
	// planned), and has the outbox send what the ledger owes.
	announce := func(scheduled, recorded []plan.Notice) {
		t.Helper()
		for _, n := range recorded {
			if _, err := d.raw.RecordNotice(t.Context(), ledger.Notice{Key: n.Key(), Kind: "scheduled", Step: string(n.Step),
				Due: n.Due, At: time.Now().UTC()}); err != nil {
				t.Fatal(err)
			}
		}
		d.announce(d.setupNow(), &plan.Plan{ID: "p", Scheduled: scheduled}, &plan.Applied{Announced: recorded})
		d.kickOutbox()
		for range recorded {
			select {
			case <-deliveries:
			case <-time.After(15 * time.Second):
				t.Fatal("no delivery journaled (or refused) within 15 s")
			}
		}
	}
	journaled := func(k backend.Key) int {
		t.Helper()
		j, err := d.raw.ListJournal(t.Context(), ledger.JournalFilter{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range j {
			if e.Intent.Step == "notify" && e.Outcome != nil && e.Outcome.Result == ledger.ResultDone {
				n++
			}
		}
		return n
	}
	received := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(got)
		got = nil
		slices.Sort(out)
		return out
	}

	// Leading: a notice the pass scheduled but could not record is not
	// announced; the recorded one is, and its delivery journaled.
	announce([]plan.Notice{remote("sb-0"), remote("sb-1")}, []plan.Notice{remote("sb-0")})
	if r := received(); !slices.Equal(r, []string{"sb-0"}) {
		t.Errorf("the hook received %v, want [sb-0]", r)
	}
	if n := journaled(remote("sb-0").Key()); n != 1 {
		t.Errorf("sb-0's delivery journaled %d times, want 1", n)
	}

	// The lease taken over behind the replica's back.
	term, _ := d.fleet.lead()
	if err := d.fleet.pg.Resign(t.Context(), term.Lease()); err != nil {
		t.Fatal(err)
	}
	if l, won, err := d.fleet.pg.Elect(t.Context(), ops.RemoteLease, "b#thief", time.Minute); err != nil || !won || l.Generation <= term.Lease().Generation {
		t.Fatalf("take the lease over: %+v, %v, %v", l, won, err)
	}
	if !term.Valid() {
		t.Fatal("the replica's term ended by its own clock: the test needs it running")
	}
	announce([]plan.Notice{remote("sb-2"), own}, []plan.Notice{remote("sb-2"), own})
	if r := received(); !slices.Equal(r, []string{"r0", "sb-2"}) {
		t.Errorf("the hook received %v, want [r0 sb-2] (delivered: their notices were recorded)", r)
	}
	if n := journaled(remote("sb-2").Key()); n != 0 {
		t.Errorf("the stale leader journaled sb-2's delivery %d times", n)
	}
	if !strings.Contains(logs.String(), "not journaled") || !strings.Contains(logs.String(), ledger.ErrFenced.Error()) {
		t.Error("the refused journal row is not in the log")
	}
	if n := journaled(own.Key()); n != 1 {
		t.Errorf("the local runtime's delivery journaled %d times, want 1 (not fenced)", n)
	}
	// Delivered, and marked so, are sb-0 and r0; sb-2 is still owed: the
	// stale leader's mark was refused.
	owed, err := d.raw.PendingNotices(t.Context(), ledger.PendingFilter{Hook: notify.HookName(hook.URL)})
	if err != nil || len(owed) != 1 || owed[0].Key != remote("sb-2").Key() {
		t.Errorf("owed after the takeover: %+v, %v; want sb-2's notice only", owed, err)
	}
}
