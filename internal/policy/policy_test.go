package policy

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
)

func TestDecideEmpty(t *testing.T) {
	if got := Decide(Input{Now: now}); !reflect.DeepEqual(got, Output{}) {
		t.Errorf("Decide(empty) = %+v, want the zero Output", got)
	}
}

func TestLastActive(t *testing.T) {
	for _, tc := range []struct {
		name             string
		record, observed time.Time
		want             time.Time
	}{
		{"neither", time.Time{}, time.Time{}, time.Time{}},
		{"only observed", time.Time{}, ago(hour), ago(hour)},
		{"only recorded", ago(hour), time.Time{}, ago(hour)},
		{"recorded newer", ago(hour), ago(day), ago(hour)},
		{"observed newer", ago(day), ago(hour), ago(hour)},
		{"equal", ago(hour), ago(hour), ago(hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Candidate{Record: Record{Activity: tc.record}, Runtime: &backend.Runtime{LastActivity: tc.observed}}
			if got := c.LastActive(); !got.Equal(tc.want) {
				t.Errorf("LastActive() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHuman(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                        "0s",
		1500 * time.Millisecond:  "2s",
		90 * time.Second:         "1m30s",
		2 * time.Minute:          "2m",
		119 * time.Minute:        "119m",
		2 * hour:                 "2h",
		47*hour + 59*time.Minute: "47h",
		48 * hour:                "2d",
		30*day + 23*hour:         "30d",
	} {
		if got := human(d); got != want {
			t.Errorf("human(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestCaches(t *testing.T) {
	files := caches(
		backend.File{Path: "/srv/runs/a/home/.cache", Bytes: 300},
		backend.File{Path: "/srv/runs/a/home/.npm", Bytes: 200},
		backend.File{Path: "/srv/runs/a/home/core.4242", Bytes: 50},
	)
	freed := Action{Key: key("a"), Step: backend.StepCaches,
		Paths: []string{"/srv/runs/a/home/.cache", "/srv/runs/a/home/.npm", "/srv/runs/a/home/core.4242"},
		Bytes: 550, Reason: "caches of a stopped runtime", Filesystem: "fs1"}
	acted := Output{Actions: []Action{freed}}
	skipped := func(reason string) Output {
		return Output{Skipped: []Skip{{Key: key("a"), Step: backend.StepCaches, Reason: reason}}}
	}
	runCases(t, []decideCase{
		{name: "stopped", in: Input{Candidates: []Candidate{cand("a", files)}}, want: acted},
		{name: "suspended", in: Input{Candidates: []Candidate{cand("a", files, state(backend.StateSuspended))}}, want: acted},
		{name: "running", in: Input{Candidates: []Candidate{cand("a", files, state(backend.StateRunning))}},
			want: skipped("running")},
		{name: "starting", in: Input{Candidates: []Candidate{cand("a", files, state(backend.StateStarting))}},
			want: skipped("starting")},
		{name: "busy", in: Input{Candidates: []Candidate{cand("a", files, func(c *Candidate) {
			c.Runtime.Busy = "pid 4242 has its cwd inside"
		})}}, want: skipped("busy: pid 4242 has its cwd inside")},
		{name: "pinned in the ledger with a reason", in: Input{Candidates: []Candidate{cand("a", files, func(c *Candidate) {
			c.Record.Pinned, c.Record.PinReason = true, "release candidate"
		})}}, want: skipped("pinned: release candidate")},
		{name: "pinned in the ledger without a reason", in: Input{Candidates: []Candidate{cand("a", files, func(c *Candidate) {
			c.Record.Pinned = true
		})}}, want: skipped("pinned")},
		{name: "pinned by the backend", in: Input{Candidates: []Candidate{cand("a", files, func(c *Candidate) {
			c.Runtime.Pinned = "git worktree lock"
		})}}, want: skipped("pinned: git worktree lock")},
		{name: "leased until after now", in: Input{Candidates: []Candidate{cand("a", files, func(c *Candidate) {
			c.Record.LeaseUntil = now.Add(hour)
		})}}, want: skipped("leased until 2025-06-01T13:00:00Z")},
		{name: "lease in another zone is reported in UTC", in: Input{Candidates: []Candidate{cand("a", files, func(c *Candidate) {
			c.Record.LeaseUntil = now.Add(hour).In(time.FixedZone("CEST", 2*3600))
		})}}, want: skipped("leased until 2025-06-01T13:00:00Z")},
		{name: "lease in the past does not protect", in: Input{Candidates: []Candidate{cand("a", files, func(c *Candidate) {
			c.Record.LeaseUntil = ago(time.Minute)
		})}}, want: acted},
		{name: "lease ending exactly now does not protect", in: Input{Candidates: []Candidate{cand("a", files, func(c *Candidate) {
			c.Record.LeaseUntil = now
		})}}, want: acted},
		{name: "held", in: Input{Candidates: []Candidate{cand("a", files, func(c *Candidate) {
			c.Record.HeldBy = "agent-server-1"
		})}}, want: skipped("held by agent-server-1")},
		{name: "pin is reported before running", in: Input{Candidates: []Candidate{cand("a", files, state(backend.StateRunning), func(c *Candidate) {
			c.Runtime.Pinned = "git worktree lock"
		})}}, want: skipped("pinned: git worktree lock")},
		{name: "lease is reported before hold and busy", in: Input{Candidates: []Candidate{cand("a", files, func(c *Candidate) {
			c.Record.LeaseUntil, c.Record.HeldBy, c.Runtime.Busy = now.Add(day), "ci", "pid 1"
		})}}, want: skipped("leased until 2025-06-02T12:00:00Z")},
		{name: "no Files capability", in: Input{Candidates: []Candidate{cand("a", files, func(c *Candidate) {
			c.Can.Files = false
		})}}, want: Output{}},
		{name: "no Files capability and protected", in: Input{Candidates: []Candidate{cand("a", files, state(backend.StateRunning), func(c *Candidate) {
			c.Can.Files = false
		})}}, want: Output{}},
		{name: "no caches", in: Input{Candidates: []Candidate{cand("a")}}, want: Output{}},
		{name: "empty caches", in: Input{Candidates: []Candidate{cand("a", caches())}}, want: Output{}},
		{name: "no caches while running", in: Input{Candidates: []Candidate{cand("a", state(backend.StateRunning))}}, want: Output{}},
		{name: "remote runtime", in: Input{Candidates: []Candidate{cand("a", onFS(""), caches(backend.File{Path: "/home/.cache", Bytes: 7}))}},
			want: Output{Actions: []Action{{Key: key("a"), Step: backend.StepCaches, Paths: []string{"/home/.cache"}, Bytes: 7, Reason: "caches"}}}},
		{name: "in key order whatever the input order", in: Input{Candidates: []Candidate{
			cand("b", caches(backend.File{Path: "/b/.cache", Bytes: 2})),
			{Runtime: &backend.Runtime{Key: backend.Key{Backend: "docker", ID: "a"}, State: backend.StateStopped},
				Can: Capabilities{Files: true}, Caches: []backend.File{{Path: "/d/.cache", Bytes: 3}}},
			cand("a", caches(backend.File{Path: "/a/.cache", Bytes: 1})),
		}}, want: Output{Actions: []Action{
			{Key: key("a"), Step: backend.StepCaches, Paths: []string{"/a/.cache"}, Bytes: 1, Filesystem: "fs1"},
			{Key: key("b"), Step: backend.StepCaches, Paths: []string{"/b/.cache"}, Bytes: 2, Filesystem: "fs1"},
			{Key: backend.Key{Backend: "docker", ID: "a"}, Step: backend.StepCaches, Paths: []string{"/d/.cache"}, Bytes: 3},
		}}},
	})
}

// TestCachesOnlyWhileStopped: DESIGN §5 says caches are freed "only while the
// runtime is stopped". A runtime whose state its backend could not tell
// (unknown: a failed inspect, say) may be running and must not lose its
// caches.
func TestCachesOnlyWhileStopped(t *testing.T) {
	in := Input{Now: now, Candidates: []Candidate{cand("a", state(backend.StateUnknown),
		caches(backend.File{Path: "/srv/runs/a/home/.cache", Bytes: 300}))}}
	for _, a := range Decide(in).Actions {
		t.Errorf("runtime in state %q got %+v; caches only while stopped", backend.StateUnknown, a)
	}
}

func TestDiskBudget(t *testing.T) {
	over := "/srv/fs1 is 90.0% full, over disk_high 85%; least recently active first"
	fs90 := []Filesystem{fsys("fs1", 90, 10, .85, .80)}
	// Activity order d, c, b, a (oldest first); key order a, b, c, d.
	four := []Candidate{
		cand("a", deps(4), lastActive(ago(1*day))),
		cand("b", deps(7), lastActive(ago(2*day))),
		cand("c", deps(5), lastActive(ago(3*day))),
		cand("d", deps(3), lastActive(ago(4*day))),
	}
	shuffled := []Candidate{four[0], four[3], four[1], four[2]}
	protected := func(id string, days int, m func(*Candidate)) Candidate {
		return cand(id, deps(100), lastActive(ago(time.Duration(days)*day)), m)
	}
	runCases(t, []decideCase{
		{name: "under high", in: Input{Candidates: four, Filesystems: []Filesystem{fsys("fs1", 80, 20, .85, .80)}}},
		{name: "exactly at high", in: Input{Candidates: four, Filesystems: []Filesystem{fsys("fs1", 85, 15, .85, .80)}}},
		{name: "least recently active first until at or under low", in: Input{Candidates: shuffled, Filesystems: fs90},
			// d: 87/100, c: 82/100, b: 75/100 <= .80: stop; a kept.
			want: Output{Actions: []Action{depsAction("d", 3, over), depsAction("c", 5, over), depsAction("b", 7, over)}}},
		{name: "stops exactly at low", in: Input{Candidates: four, Filesystems: []Filesystem{fsys("fs1", 85, 15, .84, .80)}},
			// d frees 3: 82/100 > .80; c frees 5: 77 <= .80.
			want: Output{Actions: []Action{
				depsAction("d", 3, "over disk_high 84%"), depsAction("c", 5, "over disk_high 84%")}}},
		{name: "lands exactly on low", in: Input{Candidates: []Candidate{
			cand("c", deps(2), lastActive(ago(3*day))), cand("d", deps(5), lastActive(ago(4*day)))},
			Filesystems: []Filesystem{fsys("fs1", 85, 15, .84, .80)}},
			want: Output{Actions: []Action{depsAction("d", 5, "85.0% full")}}},
		{name: "big ones first when they are oldest", in: Input{Candidates: []Candidate{
			cand("b", deps(3), lastActive(ago(2*day))),
			cand("c", deps(5), lastActive(ago(3*day))),
			cand("d", deps(7), lastActive(ago(4*day)))}, Filesystems: fs90},
			// d: 83, c: 78 <= 80: stop.
			want: Output{Actions: []Action{depsAction("d", 7, over), depsAction("c", 5, over)}}},
		{name: "recorded activity makes a runtime recent", in: Input{Candidates: []Candidate{
			cand("b", deps(7), lastActive(ago(2*day))),
			cand("c", deps(5), lastActive(ago(3*day))),
			cand("d", deps(3), lastActive(ago(4*day)), func(c *Candidate) { c.Record.Activity = ago(hour) })},
			Filesystems: fs90},
			// c: 85, b: 78: stop; d is the most recently active.
			want: Output{Actions: []Action{depsAction("c", 5, over), depsAction("b", 7, over)}}},
		{name: "caches of the same pass count toward the projection", in: Input{Candidates: []Candidate{
			cand("d", deps(3), lastActive(ago(4*day))),
			cand("e", deps(20), caches(backend.File{Path: "/srv/runs/e/.cache", Bytes: 10}))}, Filesystems: fs90},
			// caches: 80/100 <= .80 before any dependency.
			want: Output{Actions: []Action{{Key: key("e"), Step: backend.StepCaches, Paths: []string{"/srv/runs/e/.cache"},
				Bytes: 10, Reason: "caches", Filesystem: "fs1"}}}},
		{name: "caches count partly", in: Input{Candidates: []Candidate{
			cand("d", deps(4), lastActive(ago(4*day))),
			cand("e", deps(3), lastActive(ago(day)), caches(backend.File{Path: "/srv/runs/e/.cache", Bytes: 5}))},
			Filesystems: fs90},
			// caches: 85; d: 81; e: 78.
			want: Output{Actions: []Action{
				{Key: key("e"), Step: backend.StepCaches, Paths: []string{"/srv/runs/e/.cache"}, Bytes: 5, Filesystem: "fs1"},
				depsAction("d", 4, over), depsAction("e", 3, over)}}},
		{name: "caches on another filesystem do not count", in: Input{Candidates: []Candidate{
			cand("d", deps(4), lastActive(ago(4*day))),
			cand("e", onFS("fs2"), caches(backend.File{Path: "/srv/runs/e/.cache", Bytes: 50}))},
			Filesystems: fs90},
			want: Output{Actions: []Action{
				{Key: key("e"), Step: backend.StepCaches, Paths: []string{"/srv/runs/e/.cache"}, Bytes: 50, Filesystem: "fs2"},
				depsAction("d", 4, over)},
				Messages: []string{"/srv/fs1 would still be 86.0% full"}}},
		{name: "protected runtimes are skipped and reported", in: Input{Candidates: []Candidate{
			cand("a", deps(4), lastActive(ago(1*day))),
			cand("b", deps(7), lastActive(ago(2*day))),
			protected("c", 3, func(c *Candidate) { c.Record.LeaseUntil = now.Add(hour) }),
			protected("d", 4, func(c *Candidate) { c.Record.Pinned = true }),
			protected("e", 5, func(c *Candidate) { c.Runtime.Busy = "pid 7" }),
			protected("f", 6, func(c *Candidate) { c.Record.HeldBy = "ci" }),
			protected("g", 7, func(c *Candidate) { c.Runtime.State = backend.StateRunning }),
			protected("h", 8, func(c *Candidate) { c.Runtime.State = backend.StateStarting }),
			protected("i", 9, func(c *Candidate) { c.Runtime.Pinned = "git worktree lock" }),
		}, Filesystems: fs90},
			// b: 83, a: 79.
			want: Output{
				Actions: []Action{depsAction("b", 7, over), depsAction("a", 4, over)},
				Skipped: []Skip{
					{key("c"), backend.StepDependencies, "leased until 2025-06-01T13:00:00Z", ""},
					{key("d"), backend.StepDependencies, "pinned", ""},
					{key("e"), backend.StepDependencies, "busy: pid 7", ""},
					{key("f"), backend.StepDependencies, "held by ci", ""},
					{key("g"), backend.StepDependencies, "running", ""},
					{key("h"), backend.StepDependencies, "starting", ""},
					{key("i"), backend.StepDependencies, "pinned: git worktree lock", ""},
				}}},
		{name: "a lease in the past does not protect", in: Input{Candidates: []Candidate{
			protected("c", 3, func(c *Candidate) { c.Record.LeaseUntil = ago(hour) })}, Filesystems: fs90},
			want: Output{Actions: []Action{depsAction("c", 100, over)}}},
		{name: "everything shed and still above low: one message", in: Input{Candidates: []Candidate{
			cand("c", deps(5), lastActive(ago(3*day))),
			cand("d", deps(3), lastActive(ago(4*day)))}, Filesystems: fs90},
			want: Output{Actions: []Action{depsAction("d", 3, over), depsAction("c", 5, over)},
				Messages: []string{"disk budget: /srv/fs1 would still be 82.0% full (disk_low 80%): nothing more to shed"}}},
		{name: "nothing to shed: one message", in: Input{Candidates: []Candidate{
			protected("d", 4, func(c *Candidate) { c.Record.Pinned = true })}, Filesystems: fs90},
			want: Output{Skipped: []Skip{{key("d"), backend.StepDependencies, "pinned", ""}},
				Messages: []string{"/srv/fs1 would still be 90.0% full (disk_low 80%)"}}},
		{name: "no candidates: one message", in: Input{Filesystems: fs90},
			want: Output{Messages: []string{"/srv/fs1 would still be 90.0% full"}}},
		{name: "high 0 is off", in: Input{Candidates: four, Filesystems: []Filesystem{fsys("fs1", 99, 1, 0, 0)}}},
		{name: "runtimes on another filesystem are not used", in: Input{Candidates: []Candidate{
			cand("d", deps(50), onFS("fs2"), lastActive(ago(4*day))),
			cand("r", deps(50), onFS(""), lastActive(ago(4*day)))},
			Filesystems: []Filesystem{fsys("fs1", 90, 10, .85, .80), fsys("fs2", 10, 90, .85, .80)}},
			want: Output{Messages: []string{"/srv/fs1 would still be 90.0% full"}}},
		{name: "each filesystem on its own", in: Input{Candidates: []Candidate{
			cand("a", deps(10), lastActive(ago(1*day))),
			cand("b", deps(10), onFS("fs2"), lastActive(ago(2*day))),
			cand("c", deps(10), onFS("fs2"), lastActive(ago(3*day))),
			cand("d", deps(10), lastActive(ago(4*day)))},
			Filesystems: []Filesystem{fsys("fs2", 95, 5, .9, .8), fsys("fs1", 90, 10, .85, .80)}},
			// fs2 first as listed: c 85, b 75; then fs1: d 80.
			want: Output{Actions: []Action{
				{Key: key("c"), Step: backend.StepDependencies, Paths: []string{"/srv/runs/c/node_modules"}, Bytes: 10,
					Reason: "/srv/fs2 is 95.0% full, over disk_high 90%", Filesystem: "fs2"},
				{Key: key("b"), Step: backend.StepDependencies, Paths: []string{"/srv/runs/b/node_modules"}, Bytes: 10,
					Reason: "/srv/fs2 is 95.0% full", Filesystem: "fs2"},
				depsAction("d", 10, over)}}},
		{name: "ties in activity are broken by key", in: Input{Candidates: []Candidate{
			cand("c", deps(5), lastActive(ago(2*day))),
			cand("a", deps(5), lastActive(ago(2*day))),
			cand("b", deps(5), lastActive(ago(2*day)))}, Filesystems: fs90},
			// a: 85, b: 80.
			want: Output{Actions: []Action{depsAction("a", 5, over), depsAction("b", 5, over)}}},
		{name: "ties in activity are broken by backend first", in: Input{Candidates: []Candidate{
			cand("x", deps(10), lastActive(ago(2*day)), func(c *Candidate) { c.Runtime.Backend = "worktree" }),
			cand("x", deps(10), lastActive(ago(2*day)))}, Filesystems: fs90},
			want: Output{Actions: []Action{depsAction("x", 10, over)}}},
		{name: "several dependency folders of one runtime", in: Input{Candidates: []Candidate{
			cand("d", lastActive(ago(4*day)), func(c *Candidate) {
				c.Dependencies = []backend.File{{Path: "/srv/runs/d/node_modules", Bytes: 6}, {Path: "/srv/runs/d/.venv", Bytes: 4}}
			})}, Filesystems: fs90},
			want: Output{Actions: []Action{{Key: key("d"), Step: backend.StepDependencies,
				Paths: []string{"/srv/runs/d/node_modules", "/srv/runs/d/.venv"}, Bytes: 10, Reason: over, Filesystem: "fs1"}}}},
		{name: "no Files capability: not used, not reported", in: Input{Candidates: []Candidate{
			cand("d", deps(50), func(c *Candidate) { c.Can.Files = false })}, Filesystems: fs90},
			want: Output{Messages: []string{"would still be 90.0% full"}}},
		{name: "a runtime archived in the same pass is not also shed", in: Input{Candidates: []Candidate{
			cand("c", deps(10), lastActive(ago(3*day))),
			cand("d", deps(50), lastActive(ago(10*day)), func(c *Candidate) {
				c.Settings.Retention, c.Settings.Grace = 7*day, 2*day
				c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = backend.StepArchive, ago(3*day), ago(day)
			})}, Filesystems: fs90},
			want: Output{Actions: []Action{
				{Key: key("d"), Step: backend.StepArchive, Paths: []string{"/srv/runs/d"}, Bytes: 1000, Reason: "announced", Filesystem: "fs1"},
				depsAction("c", 10, over)}}},
		{name: "a runtime deleted on request is not also shed", in: Input{Candidates: []Candidate{
			cand("c", deps(10), lastActive(ago(3*day))),
			cand("d", deps(50), lastActive(ago(10*day)))},
			Requests:    []Request{{Key: key("d"), Step: backend.StepDelete}},
			Filesystems: fs90},
			want: Output{Actions: []Action{
				{Key: key("d"), Step: backend.StepDelete, Paths: []string{"/srv/runs/d"}, Bytes: 1000, Reason: "requested", Filesystem: "fs1"},
				depsAction("c", 10, over)}}},
		{name: "a runtime scheduled for archive may still shed", in: Input{Candidates: []Candidate{
			cand("d", deps(10), lastActive(ago(10*day)), func(c *Candidate) { c.Settings.Retention, c.Settings.Grace = 7*day, 2*day })},
			Filesystems: fs90},
			want: Output{Actions: []Action{depsAction("d", 10, over)},
				Schedule: []Notice{{key("d"), backend.StepArchive, now.Add(2 * day), "inactive 10d", ""}}}},
	})
}

func TestRetention(t *testing.T) {
	// Retention 7d, grace 2d, last active 10 days ago.
	ret := func(c *Candidate) {
		c.Settings.Retention, c.Settings.Grace = 7*day, 2*day
		c.Runtime.LastActivity = ago(10 * day)
	}
	sched := func(at, due time.Time) func(*Candidate) {
		return func(c *Candidate) {
			c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = backend.StepArchive, at, due
		}
	}
	due := sched(ago(3*day), ago(day))
	one := func(mods ...func(*Candidate)) Input {
		return Input{Candidates: []Candidate{cand("a", append([]func(*Candidate){ret}, mods...)...)}}
	}
	announced := Output{Schedule: []Notice{{key("a"), backend.StepArchive, now.Add(2 * day), "inactive 10d, over the retention of 7d", ""}}}
	archived := Output{Actions: []Action{{Key: key("a"), Step: backend.StepArchive, Paths: []string{"/srv/runs/a"}, Bytes: 1000,
		Reason: "inactive 10d, over the retention of 7d; announced 2025-05-29T12:00:00Z", Filesystem: "fs1"}}}
	cancelled := func(reason string) Output {
		return Output{Cancel: []Notice{{key("a"), backend.StepArchive, ago(day), reason, ""}}}
	}
	skipped := func(reason string) Output {
		return Output{Skipped: []Skip{{key("a"), backend.StepArchive, reason, ""}}}
	}
	// A protection that cancels a notice is also reported once for the
	// runtime as a whole (a Skip with no step).
	cancelledProtected := func(reason string) Output {
		out := cancelled(reason)
		out.Skipped = []Skip{{key("a"), "", reason, ""}}
		return out
	}
	runCases(t, []decideCase{
		{name: "inactive over retention is announced, not archived", in: one(), want: announced},
		{name: "suspended runtime is announced", in: one(state(backend.StateSuspended)), want: announced},
		{name: "within retention", in: one(lastActive(ago(6 * day)))},
		{name: "exactly at retention", in: one(lastActive(ago(7 * day)))},
		{name: "recorded activity keeps it", in: one(func(c *Candidate) { c.Record.Activity = ago(day) })},
		{name: "no activity known", in: one(lastActive(time.Time{}))},
		{name: "retention off", in: one(func(c *Candidate) { c.Settings.Retention = 0 })},
		{name: "grace 0 is due at once", in: one(func(c *Candidate) { c.Settings.Grace = 0 }),
			want: Output{Schedule: []Notice{{key("a"), backend.StepArchive, now, "inactive 10d", ""}}}},
		{name: "announced and due", in: one(due), want: archived},
		{name: "remote runtime without path or size", in: one(due, onFS(""), func(c *Candidate) {
			c.Runtime.Path, c.SizeBytes = "", -1
		}), want: Output{Actions: []Action{{Key: key("a"), Step: backend.StepArchive, Reason: "announced"}}}},
		{name: "due exactly now, grace exactly passed", in: one(sched(ago(2*day), now)),
			want: Output{Actions: []Action{{Key: key("a"), Step: backend.StepArchive, Paths: []string{"/srv/runs/a"}, Bytes: 1000,
				Reason: "announced 2025-05-30T12:00:00Z", Filesystem: "fs1"}}}},
		{name: "announced, not yet due", in: one(sched(ago(day), now.Add(day)))},
		{name: "due a second from now", in: one(sched(ago(3*day), now.Add(time.Second)))},
		{name: "due, but grace since the notice not passed", in: one(sched(ago(day), ago(hour)))},
		{name: "grace grew since the notice", in: one(due, func(c *Candidate) { c.Settings.Grace = 5 * day })},
		{name: "activity since the notice cancels", in: one(due, func(c *Candidate) { c.Record.Activity = ago(2 * day) }),
			want: cancelled("active again since the notice")},
		{name: "observed activity since the notice cancels", in: one(due, lastActive(ago(2*day))),
			want: cancelled("active again since the notice")},
		{name: "activity since the notice cancels even when still over retention", in: one(due,
			func(c *Candidate) { c.Settings.Retention = day; c.Record.Activity = ago(2 * day) }),
			want: cancelled("active again since the notice")},
		{name: "ledger pin cancels", in: one(due, func(c *Candidate) { c.Record.Pinned, c.Record.PinReason = true, "demo" }),
			want: cancelledProtected("pinned: demo")},
		{name: "backend pin cancels", in: one(due, func(c *Candidate) { c.Runtime.Pinned = "git worktree lock" }),
			want: cancelledProtected("pinned: git worktree lock")},
		{name: "lease cancels", in: one(due, func(c *Candidate) { c.Record.LeaseUntil = now.Add(hour) }),
			want: cancelledProtected("leased until 2025-06-01T13:00:00Z")},
		{name: "hold cancels", in: one(due, func(c *Candidate) { c.Record.HeldBy = "agent-server-1" }),
			want: cancelledProtected("held by agent-server-1")},
		{name: "start cancels", in: one(due, state(backend.StateStarting)), want: cancelled("starting")},
		{name: "running cancels", in: one(due, state(backend.StateRunning)), want: cancelled("running")},
		{name: "pin cancels a notice not yet due", in: one(sched(ago(day), now.Add(day)), func(c *Candidate) { c.Record.Pinned = true }),
			want: Output{Cancel: []Notice{{key("a"), backend.StepArchive, now.Add(day), "pinned", ""}},
				Skipped: []Skip{{key("a"), "", "pinned", ""}}}},
		{name: "past lease does not cancel", in: one(due, func(c *Candidate) { c.Record.LeaseUntil = ago(hour) }), want: archived},
		{name: "busy while due: skipped, notice kept", in: one(due, func(c *Candidate) { c.Runtime.Busy = "pid 7" }),
			want: skipped("busy: pid 7")},
		{name: "override shorter than the settings", in: one(func(c *Candidate) {
			c.Settings.Retention, c.Record.Retention = 30*day, durp(7*day)
		}), want: announced},
		{name: "override longer than the settings", in: one(func(c *Candidate) { c.Record.Retention = durp(30 * day) })},
		{name: "override 0 means never", in: one(lastActive(ago(400*day)), func(c *Candidate) { c.Record.Retention = durp(0) })},
		{name: "override 0 cancels a notice", in: one(due, func(c *Candidate) { c.Record.Retention = durp(0) }),
			want: cancelled("no longer over its retention")},
		{name: "longer override cancels a notice", in: one(due, func(c *Candidate) { c.Record.Retention = durp(30 * day) }),
			want: cancelled("no longer over its retention")},
		{name: "override with settings off", in: one(func(c *Candidate) {
			c.Settings.Retention, c.Record.Retention = 0, durp(7*day)
		}), want: announced},
		{name: "unsaved work without export: not announced", in: one(func(c *Candidate) {
			c.Runtime.Unsaved, c.Can.Export = "3 uncommitted files", false
		}), want: skipped("unsaved work (3 uncommitted files) and no way to archive it")},
		{name: "unsaved work without export: not archived when due", in: one(due, func(c *Candidate) {
			c.Runtime.Unsaved, c.Can.Export = "2 commits on no remote", false
		}), want: skipped("unsaved work (2 commits on no remote)")},
		{name: "unsaved work with export", in: one(due, func(c *Candidate) { c.Runtime.Unsaved = "3 uncommitted files" }), want: archived},
		{name: "nothing unsaved, no export needed", in: one(due, func(c *Candidate) { c.Can.Export = false }), want: archived},
		{name: "without delete", in: one(func(c *Candidate) { c.Can.Delete = false }), want: skipped("its backend cannot remove it")},
		{name: "without delete when due", in: one(due, func(c *Candidate) { c.Can.Delete = false }), want: skipped("cannot remove")},
		{name: "leased and not announced", in: one(func(c *Candidate) { c.Record.LeaseUntil = now.Add(hour) }),
			want: skipped("leased until 2025-06-01T13:00:00Z")},
		{name: "running and not announced", in: one(state(backend.StateRunning)), want: skipped("running")},
		{name: "two runtimes in key order", in: Input{Candidates: []Candidate{cand("b", ret), cand("a", ret, due)}},
			want: Output{
				Actions:  archived.Actions,
				Schedule: []Notice{{key("b"), backend.StepArchive, now.Add(2 * day), "inactive 10d", ""}}}},
	})
}

func TestSuspend(t *testing.T) {
	idle := func(c *Candidate) {
		c.Runtime.State = backend.StateRunning
		c.Settings.IdleSuspend = hour
		c.Runtime.LastActivity = ago(3 * hour)
	}
	capped := func(c *Candidate) {
		c.Runtime.State = backend.StateRunning
		c.Settings.MaxLifetime = 2 * day
		c.Runtime.CreatedAt = ago(3 * day)
		c.Runtime.LastActivity = ago(time.Minute)
	}
	one := func(mods ...func(*Candidate)) Input { return Input{Candidates: []Candidate{cand("a", mods...)}} }
	suspended := func(reason string) Output {
		return Output{Actions: []Action{{Key: key("a"), Step: backend.StepSuspend, Reason: reason}}}
	}
	skipped := func(reason string) Output {
		return Output{Skipped: []Skip{{key("a"), backend.StepSuspend, reason, ""}}}
	}
	runCases(t, []decideCase{
		{name: "idle running", in: one(idle), want: suspended("idle 3h, over idle_suspend 60m")},
		{name: "idle starting", in: one(idle, state(backend.StateStarting)), want: suspended("idle 3h")},
		{name: "not idle long enough", in: one(idle, lastActive(ago(30*time.Minute)))},
		{name: "idle exactly the limit", in: one(idle, lastActive(ago(hour)))},
		{name: "recorded activity counts", in: one(idle, func(c *Candidate) { c.Record.Activity = ago(10 * time.Minute) })},
		{name: "no activity known", in: one(idle, lastActive(time.Time{}))},
		{name: "idle suspend off", in: one(idle, func(c *Candidate) { c.Settings.IdleSuspend = 0 })},
		{name: "cannot suspend", in: one(idle, func(c *Candidate) { c.Can.Suspend = false })},
		{name: "stopped", in: one(idle, state(backend.StateStopped))},
		{name: "already suspended", in: one(idle, state(backend.StateSuspended))},
		{name: "idle but pinned", in: one(idle, func(c *Candidate) { c.Record.Pinned, c.Record.PinReason = true, "demo" }),
			want: skipped("pinned: demo")},
		{name: "idle but pinned by the backend", in: one(idle, func(c *Candidate) { c.Runtime.Pinned = "git worktree lock" }),
			want: skipped("pinned: git worktree lock")},
		{name: "idle but leased", in: one(idle, func(c *Candidate) { c.Record.LeaseUntil = now.Add(hour) }),
			want: skipped("leased until 2025-06-01T13:00:00Z")},
		{name: "idle, lease in the past", in: one(idle, func(c *Candidate) { c.Record.LeaseUntil = ago(hour) }),
			want: suspended("idle 3h")},
		{name: "idle but held", in: one(idle, func(c *Candidate) { c.Record.HeldBy = "ci" }), want: skipped("held by ci")},
		{name: "idle but busy", in: one(idle, func(c *Candidate) { c.Runtime.Busy = "pid 7" }), want: skipped("busy: pid 7")},
		{name: "over the lifetime cap while active", in: one(capped), want: suspended("running 3d, over the lifetime cap of 2d")},
		{name: "over the lifetime cap while starting", in: one(capped, state(backend.StateStarting)), want: suspended("lifetime cap")},
		{name: "lifetime cap before idle", in: one(capped, idle), want: suspended("over the lifetime cap of 2d")},
		{name: "under the lifetime cap", in: one(capped, func(c *Candidate) { c.Runtime.CreatedAt = ago(day) })},
		{name: "creation unknown", in: one(capped, func(c *Candidate) { c.Runtime.CreatedAt = time.Time{} })},
		{name: "lifetime cap off", in: one(capped, func(c *Candidate) { c.Settings.MaxLifetime = 0 })},
		{name: "over the lifetime cap, cannot suspend", in: one(capped, func(c *Candidate) { c.Can.Suspend = false })},
		{name: "over the lifetime cap, stopped", in: one(capped, state(backend.StateStopped))},
		{name: "over the lifetime cap but pinned", in: one(capped, func(c *Candidate) { c.Record.Pinned = true }),
			want: skipped("pinned")},
		{name: "over the lifetime cap but pinned by the backend", in: one(capped, func(c *Candidate) { c.Runtime.Pinned = "git worktree lock" }),
			want: skipped("pinned: git worktree lock")},
		{name: "suspend is not also archived", in: one(idle, lastActive(ago(10*day)), func(c *Candidate) {
			c.Settings.Retention, c.Settings.Grace = 7*day, 2*day
		}), want: suspended("idle 10d")},
	})
}

// TestLifetimeCapRespectsLeaseHoldAndBusy: doc.go says protected runtimes
// get no step and only "a lifetime cap may still suspend a running one"; a
// lease, a hold or a process inside are protections in their own right.
// TestLifetimeCapOverridesLeaseHoldAndBusy: the lifetime cap is a hard cap
// (DESIGN §5: "except that a lifetime cap may suspend it"; leases are
// capped by max_lifetime): it suspends a leased, held or busy runtime, and
// only a pin stops it.
func TestLifetimeCapOverridesLeaseHoldAndBusy(t *testing.T) {
	capped := func(c *Candidate) {
		c.Runtime.State = backend.StateRunning
		c.Settings.MaxLifetime = 2 * day
		c.Runtime.CreatedAt = ago(3 * day)
	}
	suspended := Output{Actions: []Action{{Key: key("a"), Step: backend.StepSuspend, Reason: "over the lifetime cap of 2d"}}}
	runCases(t, []decideCase{
		{name: "leased", in: Input{Candidates: []Candidate{cand("a", capped, func(c *Candidate) { c.Record.LeaseUntil = now.Add(hour) })}},
			want: suspended},
		{name: "held", in: Input{Candidates: []Candidate{cand("a", capped, func(c *Candidate) { c.Record.HeldBy = "ci" })}},
			want: suspended},
		{name: "busy", in: Input{Candidates: []Candidate{cand("a", capped, func(c *Candidate) { c.Runtime.Busy = "pid 7" })}},
			want: suspended},
		{name: "pinned", in: Input{Candidates: []Candidate{cand("a", capped, func(c *Candidate) { c.Record.Pinned = true })}},
			want: Output{Skipped: []Skip{{key("a"), backend.StepSuspend, "pinned", ""}}}},
	})
}

func TestRequests(t *testing.T) {
	del := func(id string) []Request { return []Request{{Key: key(id), Step: backend.StepDelete}} }
	one := func(mods ...func(*Candidate)) []Candidate { return []Candidate{cand("a", mods...)} }
	deleted := Output{Actions: []Action{{Key: key("a"), Step: backend.StepDelete, Paths: []string{"/srv/runs/a"}, Bytes: 1000,
		Reason: "requested", Filesystem: "fs1"}}}
	skipped := func(reason string) Output {
		return Output{Skipped: []Skip{{key("a"), backend.StepDelete, reason, ""}}}
	}
	runCases(t, []decideCase{
		{name: "delete, no notice", in: Input{Candidates: one(), Requests: del("a")}, want: deleted},
		{name: "delete of a recently active runtime", in: Input{Candidates: one(lastActive(ago(time.Minute))), Requests: del("a")}, want: deleted},
		{name: "delete of a suspended runtime", in: Input{Candidates: one(state(backend.StateSuspended)), Requests: del("a")}, want: deleted},
		{name: "delete, size unknown", in: Input{Candidates: one(func(c *Candidate) { c.SizeBytes = -1 }), Requests: del("a")},
			want: Output{Actions: []Action{{Key: key("a"), Step: backend.StepDelete, Paths: []string{"/srv/runs/a"}, Reason: "requested", Filesystem: "fs1"}}}},
		{name: "delete of a remote runtime", in: Input{Candidates: one(onFS(""), func(c *Candidate) { c.Runtime.Path = "" }), Requests: del("a")},
			want: Output{Actions: []Action{{Key: key("a"), Step: backend.StepDelete, Bytes: 1000, Reason: "requested"}}}},
		{name: "archive on request, no notice", in: Input{Candidates: one(), Requests: []Request{{Key: key("a"), Step: backend.StepArchive}}},
			want: Output{Actions: []Action{{Key: key("a"), Step: backend.StepArchive, Paths: []string{"/srv/runs/a"}, Bytes: 1000,
				Reason: "requested", Filesystem: "fs1"}}}},
		{name: "pinned", in: Input{Candidates: one(func(c *Candidate) { c.Record.Pinned, c.Record.PinReason = true, "demo" }), Requests: del("a")},
			want: skipped("pinned: demo")},
		{name: "pinned by the backend", in: Input{Candidates: one(func(c *Candidate) { c.Runtime.Pinned = "git worktree lock" }), Requests: del("a")},
			want: skipped("pinned: git worktree lock")},
		{name: "leased", in: Input{Candidates: one(func(c *Candidate) { c.Record.LeaseUntil = now.Add(hour) }), Requests: del("a")},
			want: skipped("leased until 2025-06-01T13:00:00Z")},
		{name: "lease in the past", in: Input{Candidates: one(func(c *Candidate) { c.Record.LeaseUntil = ago(hour) }), Requests: del("a")},
			want: deleted},
		{name: "held", in: Input{Candidates: one(func(c *Candidate) { c.Record.HeldBy = "ci" }), Requests: del("a")}, want: skipped("held by ci")},
		{name: "busy", in: Input{Candidates: one(func(c *Candidate) { c.Runtime.Busy = "pid 7" }), Requests: del("a")}, want: skipped("busy: pid 7")},
		{name: "running", in: Input{Candidates: one(state(backend.StateRunning)), Requests: del("a")}, want: skipped("running")},
		{name: "starting", in: Input{Candidates: one(state(backend.StateStarting)), Requests: del("a")}, want: skipped("starting")},
		{name: "unknown key", in: Input{Candidates: one(), Requests: del("nope")},
			want: Output{Skipped: []Skip{{key("nope"), backend.StepDelete, "not found", ""}}}},
		{name: "unknown backend", in: Input{Candidates: one(), Requests: []Request{{Key: backend.Key{Backend: "docker", ID: "a"}, Step: backend.StepDelete}}},
			want: Output{Skipped: []Skip{{backend.Key{Backend: "docker", ID: "a"}, backend.StepDelete, "not found", ""}}}},
		{name: "unsaved work without export", in: Input{Candidates: one(func(c *Candidate) {
			c.Runtime.Unsaved, c.Can.Export = "3 uncommitted files", false
		}), Requests: del("a")}, want: skipped("unsaved work (3 uncommitted files) and no way to archive it")},
		{name: "unsaved work with export", in: Input{Candidates: one(func(c *Candidate) { c.Runtime.Unsaved = "3 uncommitted files" }),
			Requests: del("a")}, want: deleted},
		{name: "without delete", in: Input{Candidates: one(func(c *Candidate) { c.Can.Delete = false }), Requests: del("a")},
			want: skipped("its backend cannot remove it")},
		{name: "twice: one action, the second reported", in: Input{Candidates: one(), Requests: append(del("a"), del("a")...)},
			want: Output{Actions: deleted.Actions, Skipped: []Skip{{key("a"), backend.StepDelete, "another step was already planned", ""}}}},
		{name: "archived by retention in the same pass: no second destructive action", in: Input{Candidates: one(
			lastActive(ago(10*day)), func(c *Candidate) {
				c.Settings.Retention, c.Settings.Grace = 7*day, 2*day
				c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = backend.StepArchive, ago(3*day), ago(day)
			}), Requests: del("a")},
			want: Output{Actions: []Action{{Key: key("a"), Step: backend.StepArchive, Paths: []string{"/srv/runs/a"}, Bytes: 1000,
				Reason: "announced", Filesystem: "fs1"}}, Skipped: []Skip{{key("a"), backend.StepDelete, "another step was already planned", ""}}}},
		{name: "in request order", in: Input{Candidates: []Candidate{cand("a"), cand("b")}, Requests: append(del("b"), del("a")...)},
			want: Output{Actions: []Action{
				{Key: key("b"), Step: backend.StepDelete, Paths: []string{"/srv/runs/b"}, Bytes: 1000, Reason: "requested", Filesystem: "fs1"},
				deleted.Actions[0]}}},
	})
}

// TestRequestOnlyPresentRuntimes: "archived/deleted/missing runtimes get
// nothing" (backend.State.Present); a request for one must not yield an
// action (a skip is fine).
func TestRequestOnlyPresentRuntimes(t *testing.T) {
	for _, s := range []backend.State{backend.StateArchived, backend.StateDeleted, backend.StateMissing} {
		for _, step := range backend.Steps {
			t.Run(string(s)+"/"+string(step), func(t *testing.T) {
				in := Input{Now: now, Candidates: []Candidate{cand("a", state(s))},
					Requests: []Request{{Key: key("a"), Step: step}}}
				for _, a := range Decide(in).Actions {
					t.Errorf("runtime in state %q got %+v", s, a)
				}
			})
		}
	}
}

// TestRequestNeedsCapability: a step the runtime's backend cannot do is not
// proposed (it would only fail at apply).
func TestRequestNeedsCapability(t *testing.T) {
	for _, tc := range []struct {
		step backend.Step
		can  func(*Capabilities)
	}{
		{backend.StepSuspend, func(c *Capabilities) { c.Suspend = false }},
		{backend.StepCaches, func(c *Capabilities) { c.Files = false }},
		{backend.StepDependencies, func(c *Capabilities) { c.Files = false }},
		{backend.StepArchive, func(c *Capabilities) { c.Delete = false }},
		{backend.StepDelete, func(c *Capabilities) { c.Delete = false }},
	} {
		t.Run(string(tc.step), func(t *testing.T) {
			c := cand("a")
			tc.can(&c.Can)
			out := Decide(Input{Now: now, Candidates: []Candidate{c}, Requests: []Request{{Key: key("a"), Step: tc.step}}})
			for _, a := range out.Actions {
				t.Errorf("capabilities %+v, got %+v", c.Can, a)
			}
		})
	}
}

// TestRequestInvalidStep: a request for a step that does not exist is not
// turned into an action.
func TestRequestInvalidStep(t *testing.T) {
	for _, step := range []backend.Step{"", "reboot", "Delete"} {
		out := Decide(Input{Now: now, Candidates: []Candidate{cand("a")}, Requests: []Request{{Key: key("a"), Step: step}}})
		for _, a := range out.Actions {
			t.Errorf("request for step %q got %+v", step, a)
		}
	}
}

// TestRequestedFilesStepNeverNamesTheRuntime: caches and dependencies free
// selected files; a request for them must not propose the runtime's own
// folder (and its whole size) under a files step.
func TestRequestedFilesStepNeverNamesTheRuntime(t *testing.T) {
	for _, step := range []backend.Step{backend.StepCaches, backend.StepDependencies} {
		c := cand("a", deps(10), caches(backend.File{Path: "/srv/runs/a/home/.cache", Bytes: 5}))
		out := Decide(Input{Now: now, Candidates: []Candidate{c}, Requests: []Request{{Key: key("a"), Step: step}}})
		for _, a := range out.Actions {
			if slices.Contains(a.Paths, c.Runtime.Path) {
				t.Errorf("request for %s got %+v: the runtime's own folder under a files step", step, a)
			}
		}
	}
}

// TestRequestsRespectFilters: Input.Steps limits the pass to those steps and
// Input.Only to those runtimes; requests are part of the pass.
func TestRequestsRespectFilters(t *testing.T) {
	t.Run("steps", func(t *testing.T) {
		out := Decide(Input{Now: now, Candidates: []Candidate{cand("a")}, Steps: []backend.Step{backend.StepCaches},
			Requests: []Request{{Key: key("a"), Step: backend.StepDelete}}})
		for _, a := range out.Actions {
			t.Errorf("Steps=[caches] got %+v", a)
		}
	})
	t.Run("only", func(t *testing.T) {
		out := Decide(Input{Now: now, Candidates: []Candidate{cand("a"), cand("b")}, Only: []backend.Key{key("a")},
			Requests: []Request{{Key: key("b"), Step: backend.StepDelete}}})
		for _, a := range out.Actions {
			t.Errorf("Only=[a] got %+v", a)
		}
		for _, s := range out.Skipped {
			t.Errorf("Only=[a] got %+v (b exists: it is outside the pass, not missing)", s)
		}
	})
}

func TestFilters(t *testing.T) {
	fs90 := []Filesystem{fsys("fs1", 90, 10, .85, .80)}
	over := "/srv/fs1 is 90.0% full, over disk_high 85%"
	// a: caches 10, dependencies 4, due for archive; b: older, dependencies 5;
	// c: running and idle.
	all := func() []Candidate {
		return []Candidate{
			cand("a", deps(4), lastActive(ago(10*day)), caches(backend.File{Path: "/srv/runs/a/.cache", Bytes: 10}), func(c *Candidate) {
				c.Settings.Retention, c.Settings.Grace = 7*day, 2*day
				c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = backend.StepArchive, ago(3*day), ago(day)
			}),
			cand("b", deps(5), lastActive(ago(20*day))),
			cand("c", state(backend.StateRunning), lastActive(ago(3*hour)), func(c *Candidate) { c.Settings.IdleSuspend = hour }),
		}
	}
	cachesA := Action{Key: key("a"), Step: backend.StepCaches, Paths: []string{"/srv/runs/a/.cache"}, Bytes: 10, Reason: "caches", Filesystem: "fs1"}
	archiveA := Action{Key: key("a"), Step: backend.StepArchive, Paths: []string{"/srv/runs/a"}, Bytes: 1000, Reason: "announced", Filesystem: "fs1"}
	suspendC := Action{Key: key("c"), Step: backend.StepSuspend, Reason: "idle 3h"}
	runCases(t, []decideCase{
		{name: "no filter", in: Input{Candidates: all(), Filesystems: fs90},
			// caches: 80/100 <= .80: nothing to shed.
			want: Output{Actions: []Action{cachesA, archiveA, suspendC}}},
		{name: "caches only", in: Input{Candidates: all(), Filesystems: fs90, Steps: []backend.Step{backend.StepCaches}},
			want: Output{Actions: []Action{cachesA}}},
		{name: "dependencies only: caches not proposed, not counted", in: Input{Candidates: all(), Filesystems: fs90,
			Steps: []backend.Step{backend.StepDependencies}},
			// b: 85, a: 81, still above.
			want: Output{Actions: []Action{depsAction("b", 5, over), depsAction("a", 4, over)},
				Messages: []string{"/srv/fs1 would still be 81.0% full"}}},
		{name: "suspend only", in: Input{Candidates: all(), Filesystems: fs90, Steps: []backend.Step{backend.StepSuspend}},
			want: Output{Actions: []Action{suspendC}}},
		{name: "archive only", in: Input{Candidates: all(), Filesystems: fs90, Steps: []backend.Step{backend.StepArchive}},
			want: Output{Actions: []Action{archiveA}}},
		{name: "archive only, announcing", in: Input{Candidates: []Candidate{cand("b", lastActive(ago(20*day)), func(c *Candidate) {
			c.Settings.Retention, c.Settings.Grace = 7*day, 2*day
		}), cand("c", caches(backend.File{Path: "/c", Bytes: 1}))}, Steps: []backend.Step{backend.StepArchive}},
			want: Output{Schedule: []Notice{{key("b"), backend.StepArchive, now.Add(2 * day), "inactive 20d", ""}}}},
		{name: "not archive: no notices", in: Input{Candidates: []Candidate{cand("b", lastActive(ago(20*day)), func(c *Candidate) {
			c.Settings.Retention, c.Settings.Grace = 7*day, 2*day
		}), cand("c", lastActive(ago(20*day)), func(c *Candidate) {
			c.Settings.Retention, c.Settings.Grace = 7*day, 2*day
			c.Record.Pinned = true
			c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = backend.StepArchive, ago(3*day), ago(day)
		})}, Steps: []backend.Step{backend.StepCaches, backend.StepSuspend, backend.StepDependencies, backend.StepDelete}},
			want: Output{Skipped: []Skip{{key("c"), "", "pinned", ""}}}},
		{name: "caches and dependencies", in: Input{Candidates: all(), Filesystems: []Filesystem{fsys("fs1", 95, 5, .85, .80)},
			Steps: []backend.Step{backend.StepDependencies, backend.StepCaches}},
			// caches: 85; b: 80.
			want: Output{Actions: []Action{cachesA, depsAction("b", 5, "95.0% full")}}},
		{name: "only a", in: Input{Candidates: all(), Filesystems: fs90, Only: []backend.Key{key("a")}},
			want: Output{Actions: []Action{cachesA, archiveA}}},
		{name: "only b: its dependencies, a's caches not counted", in: Input{Candidates: all(), Filesystems: fs90, Only: []backend.Key{key("b")}},
			want: Output{Actions: []Action{depsAction("b", 5, over)}, Messages: []string{"/srv/fs1 would still be 85.0% full"}}},
		{name: "only c, suspend only", in: Input{Candidates: all(), Filesystems: fs90, Only: []backend.Key{key("c"), key("zz")},
			Steps: []backend.Step{backend.StepSuspend}}, want: Output{Actions: []Action{suspendC}}},
		{name: "only an unknown runtime", in: Input{Candidates: all(), Only: []backend.Key{key("zz")}}},
	})
}

func TestNotPresentRuntimesGetNothing(t *testing.T) {
	for _, s := range []backend.State{backend.StateArchived, backend.StateDeleted, backend.StateMissing} {
		t.Run(string(s), func(t *testing.T) {
			c := cand("a", state(s), deps(50), lastActive(ago(10*day)),
				caches(backend.File{Path: "/srv/runs/a/.cache", Bytes: 10}), func(c *Candidate) {
					c.Settings = Settings{Retention: 7 * day, Grace: 2 * day, IdleSuspend: hour, MaxLifetime: day}
					c.Runtime.CreatedAt = ago(30 * day)
				})
			scheduled := c
			scheduled.Runtime.Key = key("b")
			scheduled.Record.Scheduled, scheduled.Record.ScheduledAt, scheduled.Record.ScheduledDue = backend.StepArchive, ago(3*day), ago(day)
			pinned := scheduled
			pinned.Runtime.Key = key("c")
			pinned.Record.Pinned = true
			checkOutput(t, Decide(Input{Now: now, Candidates: []Candidate{c, scheduled, pinned}, Filesystems: []Filesystem{fsys("fs1", 90, 10, .85, .80)}}),
				Output{Messages: []string{"/srv/fs1 would still be 90.0% full"}})
		})
	}
}

func TestEverythingAtOnce(t *testing.T) {
	// One pass over a mixed host, checked in full.
	in := Input{
		Now: now,
		Candidates: []Candidate{
			cand("idle-agent", state(backend.StateRunning), lastActive(ago(5*hour)), func(c *Candidate) { c.Settings.IdleSuspend = 2 * hour }),
			cand("old-run", lastActive(ago(40*day)), deps(30), func(c *Candidate) { c.Settings.Retention, c.Settings.Grace = 30*day, 3*day }),
			cand("stopped", lastActive(ago(2*day)), deps(8), caches(backend.File{Path: "/srv/runs/stopped/.npm", Bytes: 4})),
			cand("locked", lastActive(ago(50*day)), deps(40), func(c *Candidate) { c.Runtime.Pinned = "git worktree lock" }),
			cand("gone", state(backend.StateMissing), deps(90)),
		},
		Filesystems: []Filesystem{fsys("fs1", 180, 20, .85, .75)},
		Requests:    []Request{{Key: key("stopped"), Step: backend.StepDelete}, {Key: key("ghost"), Step: backend.StepDelete}},
	}
	over := "/srv/fs1 is 90.0% full, over disk_high 85%"
	checkOutput(t, Decide(in), Output{
		Actions: []Action{
			{Key: key("idle-agent"), Step: backend.StepSuspend, Reason: "idle 5h, over idle_suspend 2h"},
			{Key: key("stopped"), Step: backend.StepCaches, Paths: []string{"/srv/runs/stopped/.npm"}, Bytes: 4, Filesystem: "fs1"},
			{Key: key("stopped"), Step: backend.StepDelete, Paths: []string{"/srv/runs/stopped"}, Bytes: 1000, Reason: "requested", Filesystem: "fs1"},
			// caches: 176/200 = .88; old-run: 146/200 = .73 <= .75.
			depsAction("old-run", 30, over),
		},
		Skipped: []Skip{
			{key("ghost"), backend.StepDelete, "not found", ""},
			{key("locked"), backend.StepDependencies, "pinned: git worktree lock", ""},
		},
		Schedule: []Notice{{key("old-run"), backend.StepArchive, now.Add(3 * day), "inactive 40d, over the retention of 30d", ""}},
	})
}

// TestCapLease: a lease never outlives the lifetime cap; past the cap no
// lease is possible; without a cap (or a birth time) it is as asked.
func TestCapLease(t *testing.T) {
	capped := Settings{MaxLifetime: 12 * hour}
	born := ago(10 * hour)
	for _, tc := range []struct {
		name          string
		s             Settings
		born, until   time.Time
		want          time.Time
		capped, valid bool
	}{
		{"no cap", Settings{}, born, now.Add(30 * 24 * hour), now.Add(30 * 24 * hour), false, true},
		{"no birth time", capped, time.Time{}, now.Add(30 * hour), now.Add(30 * hour), false, true},
		{"within the cap", capped, born, now.Add(hour), now.Add(hour), false, true},
		{"at the cap", capped, born, born.Add(12 * hour), born.Add(12 * hour), false, true},
		{"past the cap: shortened", capped, born, now.Add(30 * 24 * hour), born.Add(12 * hour), true, true},
		{"born past the cap: refused", capped, ago(13 * hour), now.Add(hour), time.Time{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, c, ok := CapLease(tc.s, tc.born, tc.until, now)
			if !got.Equal(tc.want) || c != tc.capped || ok != tc.valid {
				t.Fatalf("CapLease = %v, %v, %v; want %v, %v, %v", got, c, ok, tc.want, tc.capped, tc.valid)
			}
		})
	}
}
