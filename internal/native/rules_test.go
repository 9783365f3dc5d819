package native_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/httpbackend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/native"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

// dropField removes one field from every sandbox of an answer (an object,
// or a list page's items).
func dropField(field string) func([]byte) []byte {
	return fakes.EditJSON(func(doc any) any {
		m := doc.(map[string]any)
		if items, ok := m["items"].([]any); ok {
			for _, it := range items {
				delete(it.(map[string]any), field)
			}
			return m
		}
		delete(m, field)
		return m
	})
}

// Rule: a missing optional field is unknown, not off. Daytona answers
// without autoDeleteInterval (it is optional in its document) while the
// sandbox deletes itself at once upon stopping: sync shows the timer as
// unknown, still sends the write that turns it off, reads the sandbox
// back, and, since the answer still does not say, reports a failure
// rather than "off ... set".
func TestMissingTimerIsUnknownNotOff(t *testing.T) {
	w := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute})
	sel := map[string]string{"o": "r"}
	w.dtn.Add(fakes.DaytonaSandbox{ID: "d1", State: "started", Labels: sel, CreatedAt: t0.Add(-time.Hour), LastActivity: t0,
		AutoStop: 30, AutoDelete: 0})
	for _, op := range []string{"GET /sandbox", "GET /sandbox/{sandboxIdOrName}"} {
		w.dtn.Misbehave(op, dropField("autoDeleteInterval"))
	}
	ctx := context.Background()
	p, err := native.Plan(ctx, w.opts)
	if err != nil {
		t.Fatal(err)
	}
	if s := setting(row(t, p, "d1"), backend.TimerDelete); s.Drift != "unknown" || !strings.Contains(s.Provider, "unknown") || s.Action != "set" {
		t.Errorf("plan, auto-delete: %+v", s)
	}
	rep, err := native.Sync(ctx, w.opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := w.dtn.Calls("POST /sandbox/{sandboxIdOrName}/autodelete/{interval}"); n != 1 {
		t.Errorf("auto-delete written %d times, want once", n)
	}
	if s, _ := w.dtn.Get("d1"); s.AutoDelete != -1 {
		t.Errorf("auto-delete is %d at the provider, want off (-1)", s.AutoDelete)
	}
	r := row(t, rep, "d1")
	if s := setting(r, backend.TimerDelete); !strings.HasPrefix(s.Action, "failed") || !strings.Contains(s.Provider, "unknown") {
		t.Errorf("sync, auto-delete: %+v (the provider never confirmed it)", s)
	}
	if rep.Failed != 1 || r.Error == "" {
		t.Errorf("sync counted failed %d, row error %q", rep.Failed, r.Error)
	}
	// Once the provider says it again, sync confirms it.
	for _, op := range []string{"GET /sandbox", "GET /sandbox/{sandboxIdOrName}"} {
		w.dtn.Misbehave(op, nil)
	}
	again, err := native.Sync(ctx, w.opts)
	if err != nil || again.Failed != 0 || again.Drifted != 0 {
		t.Errorf("sync once the field is back: %v %+v", err, again)
	}
}

// Rule: turn off what deletes first, then read back. A 500 on the
// auto-delete write leaves the auto-stop as it was (cutting it first
// would bring the deletion sooner), and the report says what Daytona now
// has, not what was asked for.
func TestDeletingTimerOffFirstAndReadBack(t *testing.T) {
	w := setup(t, policy.Settings{IdleSuspend: 20 * time.Minute})
	sel := map[string]string{"o": "r"}
	w.dtn.Add(fakes.DaytonaSandbox{ID: "d1", State: "started", Labels: sel, CreatedAt: t0.Add(-time.Hour), LastActivity: t0,
		AutoStop: 60, AutoDelete: 0})
	w.dtn.FailOp("POST /sandbox/{sandboxIdOrName}/autodelete/{interval}", http.StatusInternalServerError, 100)
	rep, err := native.Sync(context.Background(), w.opts)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := w.dtn.Get("d1")
	if s.AutoStop != 60 || s.AutoDelete != 0 {
		t.Errorf("after a failed auto-delete write: auto-stop %d, auto-delete %d; want 60 and 0 (nothing cut)", s.AutoStop, s.AutoDelete)
	}
	if n := w.dtn.Calls("POST /sandbox/{sandboxIdOrName}/autostop/{interval}"); n != 0 {
		t.Errorf("auto-stop written %d times after the auto-delete write failed", n)
	}
	r := row(t, rep, "d1")
	stop, del := setting(r, backend.TimerIdleSuspend), setting(r, backend.TimerDelete)
	if stop.Provider != "1h" || !strings.HasPrefix(stop.Action, "failed") {
		t.Errorf("auto-stop reported %+v, want the provider's 1h and failed", stop)
	}
	if del.Provider != "at once upon suspension" || !strings.HasPrefix(del.Action, "failed") {
		t.Errorf("auto-delete reported %+v", del)
	}
	if rep.Failed != 1 {
		t.Errorf("failed %d", rep.Failed)
	}
}

// Rule: unknown is delete. An http deadline without deadline_action is
// taken as one that deletes: sync reports it and never moves it earlier
// (6 h left, idle_suspend 9 min: left at 6 h).
func TestHTTPDeadlineWithoutActionIsNeverShortened(t *testing.T) {
	clock := fakes.NewClock(t0)
	f := fakes.NewHTTPServer(t, "tok", clock.Now, "suspend", "lifecycle", "lifecycle_write")
	deadline := t0.Add(6 * time.Hour)
	f.Add(fakes.HTTPRuntime{ID: "r", State: "running", LastActivity: t0, CreatedAt: t0.Add(-time.Hour), Deadline: deadline, IdleSuspend: 540})
	b, err := httpbackend.Open(context.Background(), &httpbackend.Backend{Client: fakes.Client(t, f.URL, remote.BearerAuth(remote.NewSecret("tok")))})
	if err != nil {
		t.Fatal(err)
	}
	src := engine.Source{Name: "http[0]", Backend: b, Settings: policy.Settings{IdleSuspend: 9 * time.Minute}}
	_, store := fakes.Engine(t, clock, src)
	rep, err := native.Sync(context.Background(), native.Options{Sources: []engine.Source{src}, Ledger: store, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	r := row(t, rep, "r")
	if r.Provider.DeadlineStep != backend.StepDelete {
		t.Errorf("deadline step %q, want delete", r.Provider.DeadlineStep)
	}
	if s := setting(r, backend.TimerDeadline); !strings.HasPrefix(s.Action, "report only") {
		t.Errorf("deadline: %+v", s)
	}
	if got, _ := f.Get("r"); !got.Deadline.Equal(deadline) {
		t.Errorf("deadline moved to %v", got.Deadline)
	}
	if n := f.Calls("PUT /runtimes/{id}/lifecycle"); n != 0 {
		t.Errorf("%d writes", n)
	}
}
