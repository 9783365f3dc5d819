package policy

import (
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// orphaned makes c a runtime of a registered_only source with no owner
// since since, with a grace of grace.
func orphaned(since time.Time, grace time.Duration) func(*Candidate) {
	return func(c *Candidate) {
		c.Settings.RegisteredOnly, c.Settings.Grace = true, grace
		c.Record.OrphanSince = since
	}
}

func scheduledDelete(at, due time.Time) func(*Candidate) {
	return func(c *Candidate) {
		c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = backend.StepDelete, at, due
	}
}

func TestOrphans(t *testing.T) {
	since := ago(3 * hour)
	reason := "orphan: no host has owned it since " + since.Format(time.RFC3339)
	tests := []struct {
		name string
		c    Candidate
		want Output
	}{
		{"not registered_only: left alone", cand("a", func(c *Candidate) { c.Record.OrphanSince = since }), Output{}},
		{"owned: left alone", cand("a", orphaned(since, hour), func(c *Candidate) { c.Record.Owners = 2 }), Output{}},
		{"new orphan: announced, due grace after it became one",
			cand("a", orphaned(ago(10*time.Minute), hour)),
			Output{Schedule: []Notice{{key("a"), backend.StepDelete, ago(10 * time.Minute).Add(hour),
				"orphan: no host has owned it since " + ago(10*time.Minute).Format(time.RFC3339), RuleOrphan}}}},
		{"old orphan: announced now, acted on at the next pass",
			cand("a", orphaned(since, hour)),
			Output{Schedule: []Notice{{key("a"), backend.StepDelete, now, reason, RuleOrphan}}}},
		{"announced, not yet due", cand("a", orphaned(ago(10*time.Minute), hour), scheduledDelete(ago(10*time.Minute), now.Add(50*time.Minute))), Output{}},
		{"announced and due: deleted",
			cand("a", orphaned(since, hour), scheduledDelete(ago(2*hour), ago(hour))),
			Output{Actions: []Action{{Key: key("a"), Step: backend.StepDelete, Paths: []string{"/srv/runs/a"}, Bytes: 1000,
				Reason: reason + "; announced " + ago(2*hour).Format(time.RFC3339), Filesystem: "fs1", Code: RuleOrphan}}}},
		{"registered again: notice canceled",
			cand("a", orphaned(time.Time{}, hour), func(c *Candidate) { c.Record.Owners = 1 }, scheduledDelete(ago(2*hour), ago(hour))),
			Output{Cancel: []Notice{{key("a"), backend.StepDelete, ago(hour), "registered by a host", Registered}}}},
		{"held: notice canceled",
			cand("a", orphaned(since, hour), scheduledDelete(ago(2*hour), ago(hour)), func(c *Candidate) { c.Record.HeldBy = "host-1" }),
			Output{Skipped: []Skip{{Key: key("a"), Reason: "held by host-1", Code: Held}},
				Cancel: []Notice{{key("a"), backend.StepDelete, ago(hour), "held by host-1", Held}}}},
		{"running: not announced",
			cand("a", orphaned(since, hour), state(backend.StateRunning)),
			Output{Skipped: []Skip{{key("a"), backend.StepDelete, "running", Running}}}},
		{"unsaved work and no export: kept",
			cand("a", orphaned(since, hour), func(c *Candidate) { c.Runtime.Unsaved = "2 uncommitted files"; c.Can.Export = false }),
			Output{Skipped: []Skip{{key("a"), backend.StepDelete, "unsaved work (2 uncommitted files) and no way to archive it", UnsavedNoArchive}}}},
		{"reported by its backend, any source: announced with the backend's reason",
			cand("a", func(c *Candidate) {
				c.Runtime.Orphan, c.Settings.Grace, c.Record.OrphanSince = "a container without a manifest", hour, since
			}),
			Output{Schedule: []Notice{{key("a"), backend.StepDelete, now,
				"orphan: a container without a manifest (seen so since " + since.Format(time.RFC3339) + ")", RuleOrphan}}}},
		{"reported by its backend but registered by a host: left alone",
			cand("a", func(c *Candidate) { c.Runtime.Orphan, c.Record.Owners = "no manifest", 1 }), Output{}},
		{"an archive notice in force: withdrawn first",
			cand("a", orphaned(since, hour), func(c *Candidate) {
				c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = backend.StepArchive, ago(hour), now.Add(hour)
			}),
			Output{Cancel: []Notice{{key("a"), backend.StepArchive, now.Add(hour), "an orphan now: deleted instead", OrphanInstead}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(Input{Now: now, Candidates: []Candidate{tc.c}, Steps: []backend.Step{backend.StepDelete}})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestPropertyOrphanSweep: an orphan deletion happens only to an unowned,
// unprotected runtime of a registered_only source whose delete notice is in
// force and due, at least Grace after it became an orphan; an owned runtime
// is never announced for deletion.
func TestPropertyOrphanSweep(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t, genOpts{filters: true})
		for i := range in.Candidates {
			c := &in.Candidates[i]
			c.Settings.RegisteredOnly = rapid.Bool().Draw(t, "registeredOnly")
			if rapid.Bool().Draw(t, "backendOrphan") {
				c.Runtime.Orphan = "reported by its backend"
			}
			c.Record.Owners = rapid.IntRange(0, 2).Draw(t, "owners")
			if c.Record.Owners == 0 {
				c.Record.OrphanSince = moment(t, in.Now, "orphanSince")
			}
		}
		out := Decide(in)
		for _, a := range out.Actions {
			if a.Code != RuleOrphan {
				continue
			}
			c := candidateOf(in, a.Key)
			r := c.Record
			switch {
			case a.Step != backend.StepDelete:
				t.Fatalf("orphan action %+v is not a delete", a)
			case !IsOrphan(c):
				t.Fatalf("orphan delete %+v of a runtime that is not one: %+v", a, r)
			case r.Scheduled != backend.StepDelete || in.Now.Before(r.ScheduledDue):
				t.Fatalf("orphan delete %+v without a due notice: %+v", a, r)
			case in.Now.Before(r.OrphanSince.Add(c.Settings.Grace)):
				t.Fatalf("orphan delete %+v within the grace: since %v, grace %v", a, r.OrphanSince, c.Settings.Grace)
			case isProtected(c, in.Now):
				t.Fatalf("orphan delete %+v of a protected runtime", a)
			case !c.Can.Delete || (c.Runtime.Unsaved != "" && !c.Can.Export):
				t.Fatalf("orphan delete %+v that cannot be done safely", a)
			}
		}
		for _, n := range out.Schedule {
			c := candidateOf(in, n.Key)
			if n.Code == RuleRetentionDelete && c.Can.Archive {
				t.Fatalf("retention delete notice %+v for a runtime its backend can archive", n)
			}
			if n.Step == backend.StepDelete && n.Code == RuleOrphan && (!IsOrphan(c) || isProtected(c, in.Now)) {
				t.Fatalf("delete notice %+v for a runtime that is owned or protected: %+v", n, c.Record)
			}
		}
	})
}
