package policy

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// verdictOf is the verdict of rule in ex (fails when there is none).
func verdictOf(t *testing.T, ex Explanation, rule Code) Verdict {
	t.Helper()
	for _, v := range ex.Verdicts {
		if v.Rule == rule {
			return v
		}
	}
	t.Fatalf("no verdict of %s in %+v (off: %v)", rule, ex.Verdicts, ex.Off)
	return Verdict{}
}

// TestExplainReasons pins, for each kind of reason, the verdict a rule
// gives and when its step would be due.
func TestExplainReasons(t *testing.T) {
	retention := func(d time.Duration) func(*Candidate) {
		return func(c *Candidate) { c.Settings.Retention = d; c.Settings.Grace = day }
	}
	idle := func(d time.Duration) func(*Candidate) { return func(c *Candidate) { c.Settings.IdleSuspend = d } }
	cacheDirs := func(c *Candidate) { c.Settings.CacheDirs = []string{".cache"} }
	lease := now.Add(3 * day)
	cases := []struct {
		name     string
		cand     Candidate
		fs       []Filesystem
		rule     Code
		outcome  Outcome
		code     Code
		text     string
		due      time.Time
		fullDisk bool
	}{
		{name: "pinned", cand: cand("a", retention(day), lastActive(ago(3*day)), func(c *Candidate) { c.Record.Pinned, c.Record.PinReason = true, "demo" }),
			rule: RuleRetention, outcome: Not, code: Pinned, text: "pinned: demo"},
		{name: "leased until T", cand: cand("a", retention(day), lastActive(ago(3*day)), func(c *Candidate) { c.Record.LeaseUntil = lease }),
			rule: RuleRetention, outcome: Not, code: Leased, text: "leased until " + lease.Format(time.RFC3339), due: lease},
		{name: "held by H", cand: cand("a", retention(day), lastActive(ago(3*day)), func(c *Candidate) { c.Record.HeldBy = "agent-7" }),
			rule: RuleRetention, outcome: Not, code: Held, text: "held by agent-7"},
		{name: "busy", cand: cand("a", retention(day), lastActive(ago(3*day)), func(c *Candidate) { c.Runtime.Busy = "pid 42 (vim) has its cwd inside" }),
			rule: RuleRetention, outcome: Not, code: Busy, text: "busy: pid 42"},
		{name: "running", cand: cand("a", cacheDirs, state(backend.StateRunning)),
			rule: RuleCaches, outcome: Not, code: Running, text: "running"},
		{name: "under budget", cand: cand("a", deps(50)), fs: []Filesystem{fsys("fs1", 40, 60, .85, .7)},
			rule: RuleBudget, outcome: Not, code: UnderBudget, text: "40.0% full, at or under disk_high 85%"},
		{name: "budget met before it", cand: cand("a", deps(50), lastActive(ago(hour))), fullDisk: true,
			fs:   []Filesystem{fsys("fs1", 90, 10, .85, .7)},
			rule: RuleBudget, outcome: Not, code: UnderBudget, text: "the budget is met before it"},
		{name: "too recent by D", cand: cand("a", retention(14*day), lastActive(ago(3*day))),
			rule: RuleRetention, outcome: Not, code: TooRecent, text: "too recent by 11d (inactive 3d, retention 14d)", due: ago(3 * day).Add(15 * day)},
		{name: "idle too recent", cand: cand("a", idle(time.Hour), state(backend.StateRunning), lastActive(ago(20*time.Minute))),
			rule: RuleIdle, outcome: Not, code: TooRecent, text: "too recent by 40m (idle 20m, idle_suspend 60m)", due: ago(20 * time.Minute).Add(time.Hour)},
		{name: "no capability: suspend", cand: cand("a", idle(time.Hour), state(backend.StateRunning), lastActive(ago(day)), func(c *Candidate) { c.Can.Suspend = false }),
			rule: RuleIdle, outcome: Not, code: CannotSuspend},
		{name: "no capability: remove", cand: cand("a", retention(day), lastActive(ago(3*day)), func(c *Candidate) { c.Can.Delete = false }),
			rule: RuleRetention, outcome: Not, code: CannotRemove},
		{name: "no capability: files", cand: cand("a", cacheDirs, func(c *Candidate) { c.Can.Files = false }),
			rule: RuleCaches, outcome: Not, code: CannotReclaim},
		{name: "not running", cand: cand("a", idle(time.Hour), lastActive(ago(day))),
			rule: RuleIdle, outcome: Not, code: NotRunning, text: "not running: stopped"},
		{name: "no activity", cand: cand("a", retention(day), lastActive(time.Time{})),
			rule: RuleRetention, outcome: Not, code: NoActivity},
		{name: "acts: caches", cand: cand("a", cacheDirs, caches(backend.File{Path: "/srv/runs/a/.cache", Bytes: 7})),
			rule: RuleCaches, outcome: Acts, code: RuleCaches, due: now},
		{name: "acts: idle suspend", cand: cand("a", idle(time.Hour), state(backend.StateRunning), lastActive(ago(2*time.Hour))),
			rule: RuleIdle, outcome: Acts, code: RuleIdle, text: "idle 2h, over idle_suspend 60m", due: now},
		{name: "acts: budget", cand: cand("a", deps(50)), fs: []Filesystem{fsys("fs1", 90, 10, .85, .7)},
			rule: RuleBudget, outcome: Acts, code: RuleBudget, due: now},
		{name: "announces", cand: cand("a", retention(day), lastActive(ago(3*day))),
			rule: RuleRetention, outcome: Announces, code: RuleRetention, text: "inactive 3d, over the retention of 24h", due: now.Add(day)},
		{name: "due at T", cand: cand("a", retention(day), lastActive(ago(3*day)), func(c *Candidate) {
			c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = backend.StepArchive, ago(hour), ago(hour).Add(day)
		}), rule: RuleRetention, outcome: Due, code: RuleRetention, due: ago(hour).Add(day)},
		{name: "cancels", cand: cand("a", retention(day), lastActive(ago(30*time.Minute)), func(c *Candidate) {
			c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = backend.StepArchive, ago(hour), ago(hour).Add(day)
		}), rule: RuleRetention, outcome: Cancels, code: ActiveAgain},
		{name: "orphan owned", cand: cand("a", func(c *Candidate) { c.Settings.RegisteredOnly, c.Record.Owners = true, 2 }),
			rule: RuleOrphan, outcome: Not, code: Registered, text: "owned: 2 conversation(s)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: now, Candidates: []Candidate{tc.cand}, Filesystems: tc.fs}
			if tc.fullDisk {
				// A runtime less recently active frees enough before it.
				in.Candidates = append([]Candidate{cand("0old", deps(80), lastActive(ago(9*day)))}, in.Candidates...)
			}
			ex := Explain(in, tc.cand.Runtime.Key)
			if !ex.Found {
				t.Fatal("not found")
			}
			v := verdictOf(t, ex, tc.rule)
			if v.Outcome != tc.outcome || v.Reason.Code != tc.code || !strings.Contains(v.Reason.Text, tc.text) || !v.Due.Equal(tc.due) {
				t.Errorf("verdict %+v, want %s %s %q due %s", v, tc.outcome, tc.code, tc.text, tc.due)
			}
		})
	}
}

func TestExplainOffRulesAndNext(t *testing.T) {
	c := cand("a", func(c *Candidate) {
		c.Settings.Retention, c.Settings.Grace, c.Settings.IdleSuspend = 14*day, day, hour
		c.Runtime.LastActivity = ago(3 * day)
	})
	ex := Explain(Input{Now: now, Candidates: []Candidate{c}}, c.Runtime.Key)
	if want := []Code{RuleCaches, RuleLifetime, RuleOrphan, RuleBudget}; !reflect.DeepEqual(ex.Off, want) {
		t.Errorf("off %v, want %v", ex.Off, want)
	}
	if len(ex.Verdicts) != 2 || ex.Verdicts[0].Rule != RuleIdle || ex.Verdicts[1].Rule != RuleRetention {
		t.Fatalf("verdicts %+v, want idle suspend then retention", ex.Verdicts)
	}
	if ex.Next == nil || ex.Next.Rule != RuleRetention || !ex.Next.Due.Equal(ago(3*day).Add(15*day)) {
		t.Errorf("next %+v, want the archive 14d after the last activity plus a day's grace", ex.Next)
	}
	if len(ex.Actions)+len(ex.Schedule)+len(ex.Cancel) != 0 {
		t.Errorf("the pass does something: %+v", ex)
	}

	gone := cand("b", state(backend.StateArchived))
	ex = Explain(Input{Now: now, Candidates: []Candidate{gone}}, gone.Runtime.Key)
	if !ex.Found || ex.Gone.Code != AlreadyGone || len(ex.Verdicts) != 0 || ex.Next != nil {
		t.Errorf("archived runtime: %+v", ex)
	}
	ex = Explain(Input{Now: now, Candidates: []Candidate{gone}}, key("nope"))
	if ex.Found {
		t.Errorf("unknown runtime found: %+v", ex)
	}
}

// TestPropertyExplainAgreesWithDecide: for every runtime of random
// inputs, what Explain says a rule does is exactly what Decide does: each
// Acts verdict is an action of that rule and step and the other way
// round, each Announces a notice with the same due time, each Cancels a
// withdrawn notice; and Explain's share of the output is Decide's.
func TestPropertyExplainAgreesWithDecide(t *testing.T) {
	for _, o := range []genOpts{{}, {crowded: true}, {requestSteps: allRequestSteps, filters: true}} {
		rapid.Check(t, func(t *rapid.T) {
			in := genInput(t, o)
			out := Decide(in)
			for _, c := range in.Candidates {
				k := c.Runtime.Key
				ex := Explain(in, k)
				var acts, announces, cancels int
				for _, v := range ex.Verdicts {
					if v.Reason.Code == "" {
						t.Fatalf("verdict without a reason: %+v", v)
					}
					switch v.Outcome {
					case Acts:
						acts++
						if !hasAction(out, k, v.Step, v.Rule) {
							t.Fatalf("%v: verdict %+v, but Decide has no such action: %s", k, v, dump(out.Actions))
						}
					case Announces:
						announces++
						if !hasNotice(out.Schedule, k, v.Step, v.Due) {
							t.Fatalf("%v: verdict %+v, but Decide schedules no such notice: %s", k, v, dump(out.Schedule))
						}
					case Cancels:
						cancels++
						if !hasNotice(out.Cancel, k, v.Step, time.Time{}) {
							t.Fatalf("%v: verdict %+v, but Decide cancels no such notice: %s", k, v, dump(out.Cancel))
						}
					}
				}
				if n := count(out, k); acts != n.actions || announces != n.schedule || cancels != n.cancel {
					t.Fatalf("%v: verdicts %s\nsay %d actions, %d notices, %d cancels; Decide: %+v\n%s", k, dump(ex.Verdicts), acts, announces, cancels, n, dump(out))
				}
				if len(ex.Actions) != acts || len(ex.Schedule) != announces || len(ex.Cancel) != cancels {
					t.Fatalf("%v: explanation's share of the output %s disagrees with its verdicts %s", k, dump(ex), dump(ex.Verdicts))
				}
			}
		})
	}
}

func hasAction(out Output, k backend.Key, step backend.Step, rule Code) bool {
	for _, a := range out.Actions {
		if a.Key == k && a.Step == step && a.Code == rule {
			return true
		}
	}
	return false
}

func hasNotice(ns []Notice, k backend.Key, step backend.Step, due time.Time) bool {
	for _, n := range ns {
		if n.Key == k && n.Step == step && (due.IsZero() || n.Due.Equal(due)) {
			return true
		}
	}
	return false
}

type counts struct{ actions, schedule, cancel int }

func count(out Output, k backend.Key) counts {
	var n counts
	for _, a := range out.Actions {
		if a.Key == k {
			n.actions++
		}
	}
	for _, x := range out.Schedule {
		if x.Key == k {
			n.schedule++
		}
	}
	for _, x := range out.Cancel {
		if x.Key == k {
			n.cancel++
		}
	}
	return n
}
