package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/notify"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// hookReceiver is a webhook on loopback that can be down (503); it keeps
// the delivery id of every POST and the events it accepted by delivery
// id, deduplicated as a receiver does.
type hookReceiver struct {
	url      string
	down     atomic.Bool
	mu       sync.Mutex
	ids      []string
	accepted map[string]notify.Event
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{accepted: map[string]notify.Event{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		data, _ := io.ReadAll(req.Body)
		id, err := notify.Verify("k3y", req.Header, data, time.Now(), time.Hour)
		if err != nil {
			t.Errorf("a delivery that does not verify: %v", err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ids = append(r.ids, id)
		if r.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var ev notify.Event
		_ = json.Unmarshal(data, &ev)
		r.accepted[id] = ev
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *hookReceiver) got() ([]string, map[string]notify.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acc := make(map[string]notify.Event, len(r.accepted))
	for k, v := range r.accepted {
		acc[k] = v
	}
	return append([]string(nil), r.ids...), acc
}

// sweeps counts what the outbox sweeps of a daemon offered.
type sweeps struct {
	mu      sync.Mutex
	offered int
}

func (s *sweeps) events(e server.Event) {
	if e.Kind == "outbox" {
		s.mu.Lock()
		s.offered += e.Notices
		s.mu.Unlock()
	}
}

func (s *sweeps) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offered
}

// TestScheduledNoticeSurvivesARestart: a daemon records a "scheduled"
// notice and stops before the webhook took it (the webhook down, the stop
// during the retries' backoff, no draining). The next start delivers it,
// once, under the delivery id of the first attempt; the start after that
// sends nothing again, and of two notices recorded while no daemon ran
// (one killed right after recording), the one within the horizon is
// delivered and the one older than it is not.
func TestScheduledNoticeSurvivesARestart(t *testing.T) {
	rcv := newHookReceiver(t)
	rcv.down.Store(true)
	dir := t.TempDir()
	repo := testtree.NewRepo(t, filepath.Join(dir, "repo"))
	root := filepath.Join(dir, "worktrees")
	addWorktree(t, repo, root, "conv1")
	cfg := writeConfig(t, dir, "notice_horizon = \"72h\"",
		"[[worktrees]]\nroot = \""+root+"\"\nretention = \"14d\"\ngrace = \"48h\"\n"+
			"[[notify]]\nurl = \""+rcv.url+"\"\nsecret = \"k3y\"\n")
	hook := notify.HookName(rcv.url)

	// First run: the start pass schedules the archive and records the
	// notice; the one attempt fails, and the stop comes in the backoff.
	first := startDaemon(t, dir, cfg, server.Options{Notify: notify.Options{Attempts: 5, Backoff: time.Hour}})
	first.waitFor("the start pass to announce the archive", scheduled(first, "conv1:repo"))
	first.waitFor("the first attempt", func() bool { ids, _ := rcv.got(); return len(ids) == 1 })
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	ids, accepted := rcv.got()
	if len(ids) != 1 || len(accepted) != 0 {
		t.Fatalf("before the restart: %d POSTs, %d accepted", len(ids), len(accepted))
	}
	if !strings.Contains(first.logs.String(), "sent after the next start") {
		t.Fatalf("the stop did not say the notice waits:\n%s", first.logs.String())
	}

	// Second run, the webhook up: delivered once, same delivery id.
	rcv.down.Store(false)
	second := startDaemon(t, dir, cfg, server.Options{Notify: notify.Options{Backoff: time.Millisecond}})
	second.waitFor("the notice after the restart", func() bool { _, acc := rcv.got(); return len(acc) == 1 })
	ids, accepted = rcv.got()
	if len(ids) != 2 || ids[1] != ids[0] {
		t.Fatalf("delivery ids %v: want the first attempt's again", ids)
	}
	ev := accepted[ids[0]]
	if ev.Event != notify.Scheduled || ev.Runtime != "conv1:repo" || ev.Step != "archive" || ev.Due.IsZero() || !strings.Contains(ev.HowToStop, "pin") ||
		ev.PlanID == "" {
		t.Fatalf("the scheduled notice: %+v", ev)
	}
	second.waitFor("the delivery in the journal", func() bool {
		j, err := second.api.GetJournalWithResponse(second.ctx(), &openapi.GetJournalParams{Runtime: "conv1:repo"})
		if err != nil || j.JSON200 == nil {
			return false
		}
		for _, e := range j.JSON200.Entries {
			if e.Step == "notify" && e.Outcome != nil && e.Outcome.Result == "done" && strings.Contains(e.Outcome.Reason, ids[0]) {
				return true
			}
		}
		return false
	})
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}

	// While no daemon runs, two notices are recorded and left undelivered:
	// one within the horizon, one older than it.
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	k := ledger.Key{Source: "worktrees:" + root, Backend: "worktree", ID: "conv1:repo"}
	fresh, err := st.RecordNotice(t.Context(), ledger.Notice{Key: k, Kind: "failed", Step: "archive", At: time.Now().UTC(), Message: "disk error"})
	if err != nil {
		t.Fatal(err)
	}
	stale, err := st.RecordNotice(t.Context(), ledger.Notice{Key: k, Kind: "failed", Step: "archive",
		At: time.Now().Add(-73 * time.Hour).UTC(), Message: "long ago"})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	var sw sweeps
	third := startDaemon(t, dir, cfg, server.Options{Notify: notify.Options{Backoff: time.Millisecond}, Events: sw.events})
	third.waitStartPass()
	third.waitFor("the fresh notice", func() bool { _, acc := rcv.got(); return len(acc) == 2 })
	// The stop drains the queue: whatever a sweep offered is POSTed by
	// the time it returns.
	if err := third.stop(); err != nil {
		t.Fatal(err)
	}
	if offered := sw.get(); offered != 1 {
		t.Fatalf("the third start offered %d notices, want the fresh one only", offered)
	}
	ids, accepted = rcv.got()
	if len(ids) != 3 {
		t.Fatalf("%d POSTs in all, want 3 (the scheduled one twice, the fresh one)", len(ids))
	}
	if ev := accepted[ids[2]]; ev.Event != notify.Failed || ev.Reason != "disk error" {
		t.Fatalf("the fresh notice: %+v", ev)
	}

	st, err = sqlite.Open(t.Context(), filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	owed, err := st.PendingNotices(t.Context(), ledger.PendingFilter{Hook: hook, Kinds: []string{"scheduled", "failed"}})
	if err != nil || len(owed) != 1 || owed[0].ID != stale || fresh == stale {
		t.Fatalf("owed at the end: %+v, %v; want only the notice past the horizon (%d)", owed, err, stale)
	}
}
