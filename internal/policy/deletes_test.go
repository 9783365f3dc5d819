package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// TestSuspendThatDeletes: a suspend whose provider deletes what is
// suspended is a delete, with notice and grace, unless reclaimer may turn
// that timer off (then a suspend whose reason says so; apply turns it off
// and reads it back first).
func TestSuspendThatDeletes(t *testing.T) {
	idle := func(c *Candidate) {
		c.Runtime.State = backend.StateRunning
		c.Runtime.LastActivity = ago(2 * hour)
		c.Settings.IdleSuspend, c.Settings.Grace = 30*time.Minute, hour
	}
	timers := func(l backend.Lifecycle) func(*Candidate) {
		return func(c *Candidate) { c.Runtime.Native = &l }
	}
	atOnce := timers(backend.Lifecycle{Delete: backend.Immediately})
	announced := func(at time.Time) func(*Candidate) {
		return func(c *Candidate) {
			c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = backend.StepDelete, at, at.Add(hour)
		}
	}
	type want struct {
		action   backend.Step
		code     Code
		schedule bool
		cancel   bool
		skip     string
	}
	for _, tc := range []struct {
		name string
		c    Candidate
		want want
	}{
		{"no timers: a suspend", cand("a", idle), want{action: backend.StepSuspend, code: RuleIdle}},
		{"delete off: a suspend", cand("a", idle, timers(backend.Lifecycle{})), want{action: backend.StepSuspend, code: RuleIdle}},
		{"delete later than the grace: a suspend", cand("a", idle, timers(backend.Lifecycle{Delete: 30 * day})), want{action: backend.StepSuspend, code: RuleIdle}},
		{"at once, changeable: a suspend that turns it off first",
			cand("a", idle, timers(backend.Lifecycle{Delete: backend.Immediately, Can: []string{backend.TimerDelete}})),
			want{action: backend.StepSuspend, code: RuleIdle}},
		{"at once: announced as a delete", cand("a", idle, atOnce), want{schedule: true}},
		{"sooner than the grace: announced", cand("a", idle, timers(backend.Lifecycle{Delete: 10 * time.Minute})), want{schedule: true}},
		{"not reported: announced", cand("a", idle, timers(backend.Lifecycle{Unknown: []string{backend.TimerDelete}})), want{schedule: true}},
		{"announced, not yet due", cand("a", idle, atOnce, announced(ago(10*time.Minute))), want{}},
		{"announced and due: a delete", cand("a", idle, atOnce, announced(ago(2*hour))), want{action: backend.StepDelete, code: RuleSuspendDeletes}},
		{"active again: canceled", cand("a", idle, atOnce, announced(ago(2*hour)), func(c *Candidate) { c.Runtime.LastActivity = ago(time.Minute) }),
			want{cancel: true}},
		{"pinned: canceled", cand("a", idle, atOnce, announced(ago(2*hour)), func(c *Candidate) { c.Record.Pinned = true }), want{cancel: true}},
		{"leased: skipped", cand("a", idle, atOnce, func(c *Candidate) { c.Record.LeaseUntil = now.Add(hour) }), want{skip: "leased"}},
		{"unsaved, no export: skipped", cand("a", idle, atOnce, func(c *Candidate) { c.Runtime.Unsaved, c.Can.Export = "work", false }),
			want{skip: "no way to archive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := Decide(Input{Now: now, Candidates: []Candidate{tc.c}})
			var got want
			for _, a := range out.Actions {
				got.action, got.code = a.Step, a.Code
				if a.Step == backend.StepSuspend && tc.c.Runtime.Native != nil && tc.c.Runtime.Native.DeleteOnSuspend(hour) &&
					!strings.Contains(a.Reason, "turned off and read back first") {
					t.Errorf("suspend reason %q does not say the timer is turned off first", a.Reason)
				}
			}
			for _, n := range out.Schedule {
				got.schedule = n.Step == backend.StepDelete && n.Code == RuleSuspendDeletes && n.Due.Equal(now.Add(hour))
			}
			got.cancel = len(out.Cancel) > 0
			for _, s := range out.Skipped {
				if strings.Contains(s.Reason, tc.want.skip) && tc.want.skip != "" {
					got.skip = tc.want.skip
				}
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v\n%+v", got, tc.want, out)
			}
		})
	}
}

// TestRetentionOnBackendWithoutArchive: retention there is a delete, named
// as one, after its own notice.
func TestRetentionOnBackendWithoutArchive(t *testing.T) {
	stale := func(c *Candidate) {
		c.Runtime.LastActivity = ago(10 * day)
		c.Settings.Retention, c.Settings.Grace = 7*day, hour
		c.Can.Archive, c.Can.Export = false, false
	}
	out := Decide(Input{Now: now, Candidates: []Candidate{cand("a", stale)}})
	if len(out.Schedule) != 1 || out.Schedule[0].Step != backend.StepDelete || out.Schedule[0].Code != RuleRetentionDelete {
		t.Fatalf("notice %+v", out.Schedule)
	}
	due := cand("a", stale, func(c *Candidate) {
		c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = backend.StepDelete, ago(2*hour), ago(hour)
	})
	out = Decide(Input{Now: now, Candidates: []Candidate{due}})
	if len(out.Actions) != 1 || out.Actions[0].Step != backend.StepDelete || out.Actions[0].Code != RuleRetentionDelete ||
		!strings.Contains(out.Actions[0].Reason, "cannot archive") {
		t.Fatalf("actions %+v", out.Actions)
	}
	// Only archive steps asked for: a delete is not one.
	out = Decide(Input{Now: now, Candidates: []Candidate{due}, Steps: []backend.Step{backend.StepArchive}})
	if len(out.Actions) != 0 {
		t.Fatalf("a delete in an archive-only pass: %+v", out.Actions)
	}
	// An archive asked for explicitly is refused.
	out = Decide(Input{Now: now, Candidates: []Candidate{cand("b", stale)}, Requests: []Request{{Key: key("b"), Step: backend.StepArchive}}})
	if len(out.Actions) != 0 || len(out.Skipped) == 0 || !strings.Contains(out.Skipped[len(out.Skipped)-1].Reason, "cannot archive") {
		t.Fatalf("requested archive: %+v %+v", out.Actions, out.Skipped)
	}
}
