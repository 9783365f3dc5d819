package engine

import (
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// TestRecheck pins the decision apply makes under a runtime's lock, case by
// case: anything that changed since the plan and could make the action
// wrong takes it away; nothing else does.
func TestRecheck(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	last := now.Add(-30 * 24 * time.Hour)
	key := backend.Key{Source: "dirs:/srv/runs", Backend: "dir", ID: "r1"}
	src := &Source{Name: key.Source, Settings: policy.Settings{Retention: 14 * 24 * time.Hour}}
	orphans := &Source{Name: key.Source, Settings: policy.Settings{RegisteredOnly: true}}
	action := func(step backend.Step, code policy.Code) plan.Action {
		a := plan.Action{Runtime: key.ID, Backend: key.Backend, Source: key.Source, Step: step, Code: code,
			Observed: plan.Observed{State: backend.StateStopped, LastActivity: last, Fingerprint: "f1"}}
		if step.Destructive() {
			a.Paths = []string{"/srv/runs/r1"}
		}
		return a
	}
	seen := func(change func(s *Seen)) *Seen {
		rt := &backend.Runtime{Key: key, State: backend.StateStopped, Path: "/srv/runs/r1", LastActivity: last, Fingerprint: "f1"}
		s := &Seen{Runtime: rt, Source: src, HasRecord: true,
			Record: ledger.RuntimeRecord{Key: key, ScheduledStep: string(backend.StepArchive), FirstSeen: last}}
		if change != nil {
			change(s)
		}
		return s
	}
	caches := action(backend.StepCaches, policy.RuleCaches)
	archive := action(backend.StepArchive, policy.RuleRetention)
	orphan := action(backend.StepDelete, policy.RuleOrphan)
	for _, tc := range []struct {
		name string
		a    plan.Action
		s    *Seen
		want ChangeCode
	}{
		{"unchanged: caches go on", caches, seen(nil), ""},
		{"unchanged: archive goes on", archive, seen(nil), ""},
		{"gone", caches, nil, ChangeGone},
		{"another source's runtime of the same id", caches, seen(func(s *Seen) { s.Runtime.Key.Source = "dirs:/other" }), ChangeSource},
		{"pinned in the ledger", caches, seen(func(s *Seen) { s.Record.Pinned = true }), ChangePinned},
		{"pinned by the backend (git worktree lock)", caches, seen(func(s *Seen) { s.Runtime.Pinned = "git worktree lock" }), ChangePinned},
		{"leased", caches, seen(func(s *Seen) { s.Record.LeaseUntil = now.Add(time.Minute) }), ChangeLeased},
		{"a lease that ended", caches, seen(func(s *Seen) { s.Record.LeaseUntil = now.Add(-time.Minute) }), ""},
		{"held", caches, seen(func(s *Seen) { s.HeldBy = "host-1" }), ChangeHeld},
		{"busy", caches, seen(func(s *Seen) { s.Runtime.Busy = "pid 7 (node) cwd /srv/runs/r1" }), ChangeBusy},
		{"started", caches, seen(func(s *Seen) { s.Runtime.State = backend.StateRunning }), ChangeState},
		{"reported activity", caches, seen(func(s *Seen) { s.Activity = last.Add(time.Second) }), ChangeActivity},
		{"newer files", caches, seen(func(s *Seen) { s.Runtime.LastActivity = last.Add(time.Second) }), ChangeActivity},
		{"older activity reported", caches, seen(func(s *Seen) { s.Activity = last.Add(-time.Hour) }), ""},
		{"fingerprint", caches, seen(func(s *Seen) { s.Runtime.Fingerprint = "f2" }), ChangeFiles},
		{"moved", archive, seen(func(s *Seen) { s.Runtime.Path = "/srv/runs/r1-moved" }), ChangePath},
		{"a file step does not care about the path", caches, seen(func(s *Seen) { s.Runtime.Path = "/srv/runs/r1-moved" }), ""},
		{"notice canceled meanwhile", archive, seen(func(s *Seen) { s.Record.ScheduledStep = "" }), ChangeNotScheduled},
		{"retention extended", archive, seen(func(s *Seen) {
			d := 60 * 24 * time.Hour
			s.Record.RetentionOverride = &d
		}), ChangeRetentionExtended},
		{"retention turned off", archive, seen(func(s *Seen) {
			d := time.Duration(0)
			s.Record.RetentionOverride = &d
		}), ChangeRetentionExtended},
		{"an orphan still due goes", orphan, seen(func(s *Seen) {
			s.Source, s.Record.ScheduledStep = orphans, string(backend.StepDelete)
		}), ""},
		{"an orphan registered meanwhile", orphan, seen(func(s *Seen) {
			s.Source, s.Record.ScheduledStep, s.Record.Conversations = orphans, string(backend.StepDelete), []string{"c1"}
		}), ChangeRegistered},
		{"an orphan's notice canceled", orphan, seen(func(s *Seen) { s.Source, s.Record.ScheduledStep = orphans, "" }), ChangeNotScheduled},
		{"a requested delete needs no notice", action(backend.StepDelete, policy.RuleRequest), seen(func(s *Seen) { s.Record.ScheduledStep = "" }), ""},
		{"a released runtime goes", action(backend.StepDelete, policy.RuleReleased), seen(func(s *Seen) { s.Record.ScheduledStep = "" }), ""},
		{"a released runtime registered again", action(backend.StepDelete, policy.RuleReleased), seen(func(s *Seen) {
			s.Record.ScheduledStep, s.Record.Conversations = "", []string{"c2"}
		}), ChangeRegistered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := recheck(tc.a, tc.s, now)
			if got.Code != tc.want {
				t.Fatalf("recheck = %+v, want code %q", got, tc.want)
			}
			if got.Code != "" && got.Text == "" {
				t.Fatal("a change without words")
			}
		})
	}
}
