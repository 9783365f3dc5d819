package policy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// genOpts shape the random inputs of one property.
type genOpts struct {
	// requestSteps are the steps requests may ask for; none: no requests.
	requestSteps []backend.Step
	// filters draws Input.Steps and Input.Only now and then.
	filters bool
	// crowded puts most runtimes, with dependencies to shed, on two
	// filesystems, to give the disk budget work.
	crowded bool
}

var (
	allStates = []backend.State{backend.StateRunning, backend.StateStarting, backend.StateStopped,
		backend.StateSuspended, backend.StateUnowned, backend.StateArchived, backend.StateDeleted, backend.StateMissing, backend.StateUnknown}
	// weightedStates favours the states policies act on.
	weightedStates = append([]backend.State{backend.StateStopped, backend.StateStopped, backend.StateStopped,
		backend.StateStopped, backend.StateSuspended, backend.StateSuspended, backend.StateRunning}, allStates...)
	fsIDs        = []string{"fs0", "fs1", "fs2", ""}
	backendNames = []string{"dir", "docker", "worktree"}
)

// offset is a signed distance from Now: common edges (0, a minute, an
// hour, a day, a week either way) or any minute within 40 days.
func offset(t *rapid.T, label string) time.Duration {
	if rapid.Bool().Draw(t, label+"-edge") {
		return rapid.SampledFrom([]time.Duration{day, -day, 2 * day, -2 * day, hour, -hour, 7 * day, -7 * day,
			0, time.Minute, -time.Minute}).Draw(t, label)
	}
	return time.Duration(rapid.Int64Range(-40*24*60, 40*24*60).Draw(t, label)) * time.Minute
}

// duration is a policy setting: off, a common value, or any minute up to 20 days.
func duration(t *rapid.T, label string) time.Duration {
	if rapid.Bool().Draw(t, label+"-edge") {
		return rapid.SampledFrom([]time.Duration{2 * hour, day, 2 * day, 7 * day, hour, time.Minute, 0}).Draw(t, label)
	}
	return time.Duration(rapid.Int64Range(0, 20*24*60).Draw(t, label)) * time.Minute
}

// moment is zero, or Now plus an offset, mostly in the past.
func moment(t *rapid.T, base time.Time, label string) time.Time {
	switch rapid.IntRange(1, 10).Draw(t, label+"-when") {
	case 10:
		return time.Time{}
	case 9:
		return base.Add(offset(t, label)) // either way: clocks disagree
	}
	d := offset(t, label)
	return base.Add(-max(d, -d))
}

// oneIn is true with probability about 1/n (rapid leans to small values,
// so the rare outcome is the largest).
func oneIn(t *rapid.T, n int, label string) bool { return rapid.IntRange(1, n).Draw(t, label) == n }

func genFiles(t *rapid.T, dir, label string) []backend.File {
	n := rapid.IntRange(0, 3).Draw(t, label+"-n")
	var fs []backend.File
	for i := range n {
		fs = append(fs, backend.File{Path: fmt.Sprintf("%s/%s%d", dir, label, i), Bytes: rapid.SampledFrom([]int64{10, 20, 5, 40, 1, 60, 0}).Draw(t, label)})
	}
	return fs
}

// genDeps draws dependency folders, some of them kept by the backend (an
// ignored folder holding a secret).
func genDeps(t *rapid.T, dir string) []backend.File {
	fs := genFiles(t, dir, "dep")
	for i := range fs {
		if oneIn(t, 3, fmt.Sprintf("kept%d", i)) {
			fs[i].Kept = "it holds .env"
		}
	}
	return fs
}

// genCandidate draws runtime i; about one in rare of its protections is on.
func genCandidate(t *rapid.T, base time.Time, i, rare int, crowded bool) Candidate {
	k := backend.Key{Backend: rapid.SampledFrom(backendNames).Draw(t, "backend"), ID: fmt.Sprintf("r%d", i)}
	dir := "/srv/" + k.Backend + "/" + k.ID
	c := Candidate{
		Runtime: &backend.Runtime{
			Key:          k,
			State:        backend.StateStopped,
			Path:         dir,
			Root:         "/srv/" + k.Backend,
			LastActivity: moment(t, base, "lastActivity"),
			CreatedAt:    moment(t, base, "createdAt"),
			Unsaved:      rapid.SampledFrom([]string{"", "", "3 uncommitted files"}).Draw(t, "unsaved"),
			Unarchivable: rapid.SampledFrom([]string{"", "", "", "a merge in progress"}).Draw(t, "unarchivable"),
		},
		Record: Record{
			Pinned:   oneIn(t, rare, "pinned"),
			Activity: moment(t, base, "activity"),
		},
		Settings: Settings{
			Retention:   duration(t, "retention"),
			Grace:       duration(t, "grace"),
			IdleSuspend: duration(t, "idleSuspend"),
			MaxLifetime: duration(t, "maxLifetime"),
		},
		Can: Capabilities{
			Suspend: rapid.Bool().Draw(t, "canSuspend"),
			Delete:  !oneIn(t, 4, "cannotDelete"),
			Export:  rapid.Bool().Draw(t, "canExport"),
			Files:   !oneIn(t, 4, "noFiles"),
			Archive: !oneIn(t, 4, "cannotArchive"),
		},
		Filesystem:   rapid.SampledFrom(append([]string{"fs0", "fs0", "fs1"}, fsIDs...)).Draw(t, "filesystem"),
		Caches:       genFiles(t, dir, "cache"),
		Dependencies: genDeps(t, dir),
		SizeBytes:    rapid.Int64Range(-1, 5000).Draw(t, "size"),
	}
	if oneIn(t, 6, "deletesOnSuspend") {
		// A provider that deletes what is suspended, which reclaimer may
		// or may not turn off (suspend_deletes).
		l := backend.Lifecycle{Delete: backend.Immediately}
		if rapid.Bool().Draw(t, "canTurnOff") {
			l.Can = []string{backend.TimerDelete}
		}
		c.Runtime.Native = &l
	}
	if crowded {
		c.Filesystem = rapid.SampledFrom([]string{"fs0", "fs1"}).Draw(t, "crowdedFS")
		c.Can.Files = !oneIn(t, 16, "crowdedNoFiles")
		if rapid.Bool().Draw(t, "tiedActivity") { // ties, broken by key
			c.Runtime.LastActivity = base.Add(-rapid.SampledFrom([]time.Duration{day, 2 * day}).Draw(t, "tied"))
			c.Record.Activity = time.Time{}
		}
		if len(c.Dependencies) == 0 {
			c.Dependencies = []backend.File{{Path: dir + "/node_modules", Bytes: rapid.SampledFrom([]int64{10, 20, 5, 40, 1}).Draw(t, "crowdedDep")}}
		}
	}
	if oneIn(t, rare+2, "backendPinned") {
		c.Runtime.Pinned = "git worktree lock"
	}
	if oneIn(t, rare, "busy") {
		c.Runtime.Busy = "pid 4242"
	}
	if oneIn(t, rare, "held") {
		c.Record.HeldBy = "agent-server-1"
	}
	if rare < 40 || oneIn(t, 4, "calmButNotStopped") {
		c.Runtime.State = rapid.SampledFrom(weightedStates).Draw(t, "state")
	}
	if c.Record.Pinned {
		c.Record.PinReason = rapid.SampledFrom([]string{"", "demo"}).Draw(t, "pinReason")
	}
	if oneIn(t, rare/2, "leased") {
		c.Record.LeaseUntil = base.Add(offset(t, "leaseUntil")) // before, at or after Now
	}
	if oneIn(t, 4, "hasOverride") {
		r := duration(t, "override")
		c.Record.Retention = &r
	}
	if rapid.Bool().Draw(t, "scheduled") {
		c.Record.Scheduled = rapid.SampledFrom([]backend.Step{backend.StepArchive, backend.StepArchive, backend.StepDelete}).Draw(t, "scheduledStep")
		c.Record.ScheduledAt = moment(t, base, "scheduledAt")
		if last := lastActiveOf(&c); !last.IsZero() && rapid.Bool().Draw(t, "announcedInTime") {
			// Announced when the retention ran out, as the engine would.
			c.Record.ScheduledAt = last.Add(retentionOf(&c) + duration(t, "announceLag")/8)
		}
		if c.Record.ScheduledAt.IsZero() || rapid.Bool().Draw(t, "dueAfterGrace") {
			c.Record.ScheduledDue = c.Record.ScheduledAt.Add(c.Settings.Grace)
		} else {
			c.Record.ScheduledDue = c.Record.ScheduledAt.Add(duration(t, "notice"))
		}
	}
	if oneIn(t, 6, "labels") {
		c.Runtime.Labels = map[string]string{"conversation": k.ID}
		c.Runtime.Workspaces = []string{dir + "/workspace"}
	}
	return c
}

func genFilesystem(t *rapid.T, id string) Filesystem {
	used := rapid.Uint64Range(0, 200).Draw(t, "used")
	avail := rapid.Uint64Range(0, 200).Draw(t, "avail")
	if rapid.Bool().Draw(t, "full") {
		avail /= 8
	}
	f := Filesystem{ID: id, Path: "/srv/" + id, UsedBytes: used, AvailBytes: avail,
		High: rapid.SampledFrom([]float64{.85, .7, .9, .5, .3, .95, .8, 0}).Draw(t, "high")}
	if used+avail > 0 {
		f.Fraction = float64(used) / float64(used+avail)
	}
	f.Low = f.High * rapid.SampledFrom([]float64{.9, .8, 1, .5, 0}).Draw(t, "lowOfHigh")
	return f
}

func genInput(t *rapid.T, o genOpts) Input {
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(rapid.IntRange(0, 1000).Draw(t, "base")) * time.Minute)
	in := Input{Now: base}
	n := rapid.IntRange(0, 4).Draw(t, "few") + rapid.IntRange(0, 12).Draw(t, "more")
	// Some inputs are calm (few protections), some fraught.
	rares := []int{8, 40, 4}
	if o.crowded {
		rares = []int{40, 8, 4}
	}
	rare := rapid.SampledFrom(rares).Draw(t, "rare")
	for i := range n {
		in.Candidates = append(in.Candidates, genCandidate(t, base, i, rare, o.crowded))
	}
	for _, id := range fsIDs[:3] {
		if !oneIn(t, 4, "noFS-"+id) {
			in.Filesystems = append(in.Filesystems, genFilesystem(t, id))
		}
	}
	if len(o.requestSteps) > 0 {
		for range rapid.IntRange(0, 4).Draw(t, "requests") {
			k := backend.Key{Backend: "dir", ID: "unknown"}
			if n > 0 && !oneIn(t, 6, "requestUnknown") {
				k = in.Candidates[rapid.IntRange(0, n-1).Draw(t, "requestOf")].Runtime.Key
			}
			in.Requests = append(in.Requests, Request{Key: k, Step: rapid.SampledFrom(o.requestSteps).Draw(t, "requestStep")})
		}
	}
	if o.filters {
		if oneIn(t, 4, "filterSteps") {
			for _, s := range backend.Steps {
				if rapid.Bool().Draw(t, "step-"+string(s)) {
					in.Steps = append(in.Steps, s)
				}
			}
		}
		if n > 0 && oneIn(t, 4, "filterOnly") {
			for _, c := range in.Candidates {
				if rapid.Bool().Draw(t, "only") {
					in.Only = append(in.Only, c.Runtime.Key)
				}
			}
		}
	}
	return in
}

// allRequestSteps are every step, delete the most often, and one a caller
// may send that does not exist.
var allRequestSteps = []backend.Step{backend.StepDelete, backend.StepCaches, backend.StepDependencies, backend.StepSuspend,
	backend.StepArchive, backend.StepDelete, backend.StepDelete, "reboot"}

// The oracle below re-states the rules from DESIGN.md and doc.go rather than
// calling the package's helpers.

func candidateOf(in Input, k backend.Key) *Candidate {
	for i := range in.Candidates {
		if in.Candidates[i].Runtime.Key == k {
			return &in.Candidates[i]
		}
	}
	return nil
}

func lastActiveOf(c *Candidate) time.Time {
	if c.Record.Activity.After(c.Runtime.LastActivity) {
		return c.Record.Activity
	}
	return c.Runtime.LastActivity
}

func retentionOf(c *Candidate) time.Duration {
	if c.Record.Retention != nil {
		return *c.Record.Retention
	}
	return c.Settings.Retention
}

func isPinned(c *Candidate) bool { return c.Record.Pinned || c.Runtime.Pinned != "" }

func isLeased(c *Candidate, now time.Time) bool { return c.Record.LeaseUntil.After(now) }

func isProtected(c *Candidate, now time.Time) bool {
	return isPinned(c) || isLeased(c, now) || c.Record.HeldBy != "" || c.Runtime.Busy != "" ||
		c.Runtime.State == backend.StateRunning || c.Runtime.State == backend.StateStarting ||
		c.Runtime.State == backend.StateUnknown || c.Runtime.State == ""
}

func wanted(in Input, s backend.Step) bool { return len(in.Steps) == 0 || slices.Contains(in.Steps, s) }

func inPass(in Input, k backend.Key) bool { return len(in.Only) == 0 || slices.Contains(in.Only, k) }

func dump(v any) string { return fmt.Sprintf("%+v", v) }

// check runs prop over random inputs of o and reports the input with any
// failure.
func check(t *testing.T, o genOpts, prop func(t *rapid.T, in Input, out Output)) {
	t.Helper()
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t, o)
		out := Decide(in)
		prop(t, in, out)
	})
}

func TestPropertyNeverActsOnPinned(t *testing.T) {
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			if c := candidateOf(in, a.Key); c != nil && isPinned(c) {
				t.Fatalf("action %+v on a pinned runtime %+v", a, c.Record)
			}
		}
	})
}

// TestPropertyNeverShedsAKeptFolder: an ignored folder the backend keeps
// (not rebuildable) is never in an action, and every one of a runtime the
// dependencies step looked at is listed as skipped with why.
func TestPropertyNeverShedsAKeptFolder(t *testing.T) {
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			c := candidateOf(in, a.Key)
			if c == nil {
				continue
			}
			for _, p := range a.Paths {
				for _, f := range c.Dependencies {
					if f.Path == p && f.Kept != "" {
						t.Fatalf("action %+v sheds %s, which the backend keeps (%s)", a, p, f.Kept)
					}
				}
			}
			if a.Step != backend.StepDependencies {
				continue
			}
			for _, f := range c.Dependencies {
				if f.Kept != "" && !slices.ContainsFunc(out.Skipped, func(s Skip) bool {
					return s.Key == a.Key && s.Step == backend.StepDependencies && strings.Contains(s.Reason, f.Path)
				}) {
					t.Fatalf("kept %s of %v not reported: %+v", f.Path, a.Key, out.Skipped)
				}
			}
		}
	})
}

// TestPropertyNeverRemovesWhatCannotBeArchived: a runtime holding state
// its backend cannot archive and restore exactly is never archived or
// deleted, whatever the policy, the request or the notice in force; it is
// listed as skipped with that state named.
func TestPropertyNeverRemovesWhatCannotBeArchived(t *testing.T) {
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			if c := candidateOf(in, a.Key); c != nil && c.Runtime.Unarchivable != "" &&
				(a.Step == backend.StepArchive || a.Step == backend.StepDelete) {
				t.Fatalf("action %+v on a runtime holding %q", a, c.Runtime.Unarchivable)
			}
		}
		for _, n := range out.Schedule {
			if c := candidateOf(in, n.Key); c != nil && c.Runtime.Unarchivable != "" {
				t.Fatalf("notice %+v for a runtime holding %q", n, c.Runtime.Unarchivable)
			}
		}
	})
}

func TestPropertyNeverActsOnLeasedHeldOrBusy(t *testing.T) {
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			c := candidateOf(in, a.Key)
			if c == nil {
				continue
			}
			if a.Step == backend.StepSuspend && strings.Contains(a.Reason, "lifetime cap") {
				continue // the hard cap overrides leases, holds and busy (never a pin)
			}
			switch {
			case isLeased(c, in.Now):
				t.Fatalf("action %+v on a runtime leased until %v (now %v)", a, c.Record.LeaseUntil, in.Now)
			case c.Record.HeldBy != "":
				t.Fatalf("action %+v on a runtime held by %q", a, c.Record.HeldBy)
			case c.Runtime.Busy != "":
				t.Fatalf("action %+v on a busy runtime (%q)", a, c.Runtime.Busy)
			}
		}
	})
}

func TestPropertyActiveRuntimesAreOnlySuspended(t *testing.T) {
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			c := candidateOf(in, a.Key)
			if c == nil || !c.Runtime.State.Active() {
				continue
			}
			if a.Code == RuleSuspendDeletes || a.Code == RuleIdleArchive {
				// A running runtime whose suspension is a deletion, or whose
				// sleep loses its files, is deleted after notice instead:
				// TestSuspendThatDeletes and the idle_archive tests.
				continue
			}
			if a.Step != backend.StepSuspend {
				t.Fatalf("action %+v on a %s runtime", a, c.Runtime.State)
			}
			if isPinned(c) {
				t.Fatalf("suspend %+v of a pinned runtime", a)
			}
			s := c.Settings
			capped := s.MaxLifetime > 0 && !c.Runtime.CreatedAt.IsZero() && in.Now.Sub(c.Runtime.CreatedAt) > s.MaxLifetime
			last := lastActiveOf(c)
			idle := s.IdleSuspend > 0 && !last.IsZero() && in.Now.Sub(last) > s.IdleSuspend
			switch {
			case strings.Contains(a.Reason, "lifetime cap"):
				if !capped {
					t.Fatalf("suspend %+v: created %v, lifetime cap %v, now %v", a, c.Runtime.CreatedAt, s.MaxLifetime, in.Now)
				}
			case strings.Contains(a.Reason, "idle_suspend"):
				if !idle {
					t.Fatalf("suspend %+v: last active %v, idle_suspend %v, now %v", a, last, s.IdleSuspend, in.Now)
				}
			default:
				t.Fatalf("suspend %+v of a %s runtime by neither the lifetime cap nor idle suspend", a, c.Runtime.State)
			}
			if !c.Can.Suspend {
				t.Fatalf("suspend %+v without the Suspend capability", a)
			}
		}
	})
}

// TestPropertyRetentionHonoursNotice: an archive (requests for archive
// aside, which need no notice) only follows a notice in force for at least
// Grace, due, with no activity since.
func TestPropertyRetentionHonoursNotice(t *testing.T) {
	steps := []backend.Step{backend.StepCaches, backend.StepDependencies, backend.StepSuspend, backend.StepDelete}
	check(t, genOpts{requestSteps: steps, filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			if a.Code != RuleRetention && a.Code != RuleRetentionDelete && a.Code != RuleIdleArchive {
				continue
			}
			c := candidateOf(in, a.Key)
			r := c.Record
			// Retention archives where the backend can, and deletes,
			// called a delete, where it cannot.
			step, _ := retentionStep(c)
			if a.Step != step {
				t.Fatalf("retention %+v: step %s, want %s (archive %v)", a, a.Step, step, c.Can.Archive)
			}
			last := lastActiveOf(c)
			switch {
			case r.Scheduled != step:
				t.Fatalf("archive %+v without an archive notice (scheduled %q)", a, r.Scheduled)
			case in.Now.Before(r.ScheduledAt.Add(c.Settings.Grace)):
				t.Fatalf("archive %+v at %v: notice at %v, grace %v", a, in.Now, r.ScheduledAt, c.Settings.Grace)
			case in.Now.Before(r.ScheduledDue):
				t.Fatalf("archive %+v at %v before due %v", a, in.Now, r.ScheduledDue)
			case last.After(r.ScheduledAt):
				t.Fatalf("archive %+v: active at %v after the notice at %v", a, last, r.ScheduledAt)
			}
			ret := retentionOf(c)
			if ret <= 0 || last.IsZero() || in.Now.Sub(last) <= ret {
				t.Fatalf("archive %+v: retention %v, last active %v, now %v", a, ret, last, in.Now)
			}
			if isProtected(c, in.Now) {
				t.Fatalf("archive %+v of a protected runtime", a)
			}
		}
		scheduled := map[backend.Key]bool{}
		for _, n := range out.Schedule {
			if n.Code == RuleSuspendDeletes {
				continue // not retention's: the delete a suspension would be (TestSuspendThatDeletes)
			}
			c := candidateOf(in, n.Key)
			step, _ := retentionStep(c)
			switch {
			case n.Step != step:
				t.Fatalf("notice %+v for a step other than retention's %s", n, step)
			case !n.Due.Equal(in.Now.Add(c.Settings.Grace)):
				t.Fatalf("notice %+v due %v, want now %v + grace %v", n, n.Due, in.Now, c.Settings.Grace)
			case c.Record.Scheduled == step:
				t.Fatalf("notice %+v for a runtime already announced at %v", n, c.Record.ScheduledAt)
			case isProtected(c, in.Now):
				t.Fatalf("notice %+v for a protected runtime", n)
			case scheduled[n.Key]:
				t.Fatalf("two notices for %v", n.Key)
			case !c.Can.Delete || (c.Runtime.Unsaved != "" && !c.Can.Export) || c.Runtime.Unarchivable != "":
				t.Fatalf("notice %+v of a removal that cannot happen (capabilities %+v, unsaved %q)", n, c.Can, c.Runtime.Unsaved)
			}
			if last, ret := lastActiveOf(c), retentionOf(c); ret <= 0 || last.IsZero() || in.Now.Sub(last) <= ret {
				t.Fatalf("notice %+v: retention %v, last active %v, now %v", n, ret, last, in.Now)
			}
			scheduled[n.Key] = true
			for _, a := range out.Actions {
				if a.Key == n.Key && a.Step.Destructive() && a.Reason != "requested" {
					t.Fatalf("notice %+v and action %+v in the same pass", n, a)
				}
			}
		}
		for _, n := range out.Cancel {
			c := candidateOf(in, n.Key)
			step, _ := retentionStep(c)
			if n.Step == backend.StepDelete && suspendDeletes(c) {
				// The delete a suspend its provider turns into a deletion
				// announced (deleteOnSuspend): the same rules hold for it.
				step = backend.StepDelete
			}
			if c.Record.Scheduled != step || n.Step != step || !n.Due.Equal(c.Record.ScheduledDue) {
				t.Fatalf("cancel %+v of a notice not in force (record %+v)", n, c.Record)
			}
			for _, a := range out.Actions {
				if a.Key == n.Key && a.Step == step && a.Code != RuleRequest {
					t.Fatalf("cancel %+v and archive %+v in the same pass", n, a)
				}
			}
		}
	})
}

// TestPropertyNoticeOverPasses runs one runtime through many passes,
// applying each pass's notices to its record as the engine would, and checks
// that an archive comes only Grace after its notice, after the retention,
// and that it does come.
func TestPropertyNoticeOverPasses(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
		c := cand("a", lastActive(start))
		c.Settings.Retention = time.Duration(rapid.Int64Range(1, 10*24*60).Draw(t, "retention")) * time.Minute
		c.Settings.Grace = time.Duration(rapid.Int64Range(0, 5*24*60).Draw(t, "grace")) * time.Minute
		// Between 1 and 60 passes per retention and grace, a minute at least.
		stepBy := max(time.Minute, (c.Settings.Retention+c.Settings.Grace)/time.Duration(rapid.IntRange(1, 60).Draw(t, "passes")))
		activityAt := rapid.IntRange(-1, 100).Draw(t, "activityAt") // pass with new activity; -1 none
		pinnedAt := rapid.IntRange(-1, 100).Draw(t, "pinnedAt")     // pass during which it is pinned; -1 never
		var archivedAt time.Time
		pass := 0
		for now := start; ; now, pass = now.Add(stepBy), pass+1 {
			if pass == activityAt {
				c.Record.Activity = now
			}
			c.Record.Pinned = pass == pinnedAt
			out := Decide(Input{Now: now, Candidates: []Candidate{c}})
			for _, n := range out.Cancel {
				if c.Record.Scheduled != backend.StepArchive {
					t.Fatalf("pass %d: cancel %+v with no notice in force", pass, n)
				}
				c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = "", time.Time{}, time.Time{}
			}
			for _, n := range out.Schedule {
				c.Record.Scheduled, c.Record.ScheduledAt, c.Record.ScheduledDue = n.Step, now, n.Due
			}
			for _, a := range out.Actions {
				if a.Step != backend.StepArchive {
					t.Fatalf("pass %d: unexpected %+v", pass, a)
				}
				last := lastActiveOf(&c)
				if c.Record.Scheduled != backend.StepArchive || now.Sub(c.Record.ScheduledAt) < c.Settings.Grace ||
					c.Record.ScheduledAt.Sub(last) <= c.Settings.Retention || c.Record.Pinned {
					t.Fatalf("pass %d at %v: archive %+v; record %+v, last active %v, settings %+v", pass, now, a, c.Record, last, c.Settings)
				}
				archivedAt = now
			}
			if !archivedAt.IsZero() {
				break
			}
			// Liveness: once the last disturbance is over, an announcement
			// comes within a step after the retention and an archive within
			// a step after the grace.
			calm := lastActiveOf(&c)
			if p := start.Add(time.Duration(pinnedAt) * stepBy); pinnedAt >= 0 && p.After(calm) {
				calm = p
			}
			if now.After(calm.Add(c.Settings.Retention + c.Settings.Grace + 3*stepBy)) {
				t.Fatalf("no archive by pass %d at %v: record %+v, settings %+v", pass, now, c.Record, c.Settings)
			}
		}
	})
}

// shedOrder is the eligible pool of a filesystem, least recently active
// first, ties by key.
func shedOrder(in Input, out Output, fs Filesystem) []backend.Key {
	acted := map[backend.Key]bool{}
	for _, a := range out.Actions {
		if a.Step == backend.StepSuspend || a.Step.Destructive() {
			acted[a.Key] = true
		}
	}
	var pool []*Candidate
	for i := range in.Candidates {
		c := &in.Candidates[i]
		if c.Filesystem == fs.ID && inPass(in, c.Runtime.Key) && c.Runtime.State.Present() && c.Can.Files &&
			len(backend.Shed(c.Dependencies)) > 0 && !acted[c.Runtime.Key] && !isProtected(c, in.Now) {
			pool = append(pool, c)
		}
	}
	slices.SortFunc(pool, func(a, b *Candidate) int {
		if la, lb := lastActiveOf(a), lastActiveOf(b); !la.Equal(lb) {
			return la.Compare(lb)
		}
		return strings.Compare(a.Runtime.Key.String(), b.Runtime.Key.String())
	})
	var keys []backend.Key
	for _, c := range pool {
		keys = append(keys, c.Runtime.Key)
	}
	return keys
}

func depsActionsOn(out Output, fs string) []Action {
	var as []Action
	for _, a := range out.Actions {
		if a.Step == backend.StepDependencies && a.Filesystem == fs {
			as = append(as, a)
		}
	}
	return as
}

func overHigh(fs Filesystem) bool { return fs.High > 0 && fs.Fraction > fs.High }

// budgetSteps leave out requests for files steps, whose actions the budget
// oracle could not tell from its own.
var budgetSteps = []backend.Step{backend.StepSuspend, backend.StepArchive, backend.StepDelete}

func TestPropertyBudgetLeastRecentlyActiveFirst(t *testing.T) {
	check(t, genOpts{requestSteps: budgetSteps, filters: true, crowded: true}, func(t *rapid.T, in Input, out Output) {
		for _, fs := range in.Filesystems {
			shed := depsActionsOn(out, fs.ID)
			if !wanted(in, backend.StepDependencies) || !overHigh(fs) {
				if len(shed) > 0 {
					t.Fatalf("filesystem %+v not over its high watermark, yet %s", fs, dump(shed))
				}
				continue
			}
			order := shedOrder(in, out, fs)
			if len(shed) > len(order) {
				t.Fatalf("on %s: %d actions, %d eligible: %s", fs.ID, len(shed), len(order), dump(shed))
			}
			for i, a := range shed {
				if a.Key != order[i] {
					t.Fatalf("on %s: action %d is %v, want %v (eligible, least recently active first: %v)", fs.ID, i, a.Key, order[i], order)
				}
				c := candidateOf(in, a.Key)
				var paths []string
				var bytes int64
				for _, f := range backend.Shed(c.Dependencies) {
					paths = append(paths, f.Path)
					bytes += f.Bytes
				}
				if !reflect.DeepEqual(a.Paths, paths) || a.Bytes != bytes {
					t.Fatalf("action %+v, want the dependencies %+v", a, c.Dependencies)
				}
			}
			// Protected runtimes the budget passed over are reported.
			for i := range in.Candidates {
				c := &in.Candidates[i]
				if c.Filesystem != fs.ID || !inPass(in, c.Runtime.Key) || !c.Runtime.State.Present() || !c.Can.Files ||
					len(c.Dependencies) == 0 || !isProtected(c, in.Now) {
					continue
				}
				// Reported by the budget, or already by a rule before it
				// (the delete its suspension would be, deleteOnSuspend:
				// skipped, its notice canceled with the protection, or,
				// running, announced).
				if !slices.ContainsFunc(out.Skipped, func(s Skip) bool {
					return s.Key == c.Runtime.Key
				}) && !slices.ContainsFunc(out.Cancel, func(n Notice) bool { return n.Key == c.Runtime.Key }) &&
					!slices.ContainsFunc(out.Schedule, func(n Notice) bool { return n.Key == c.Runtime.Key && n.Code == RuleSuspendDeletes }) &&
					!slices.ContainsFunc(out.Actions, func(a Action) bool { return a.Key == c.Runtime.Key }) {
					t.Fatalf("protected %v on %s neither shed nor reported skipped: record %+v native %+v out %+v", c.Runtime.Key, fs.ID, c.Record, c.Runtime.Native, out)
				}
			}
		}
		for _, a := range out.Actions {
			if a.Step == backend.StepDependencies && !slices.ContainsFunc(in.Filesystems, func(f Filesystem) bool { return f.ID == a.Filesystem }) {
				t.Fatalf("dependencies %+v on a filesystem not in the input", a)
			}
		}
	})
}

func TestPropertyBudgetStopsWhenEnough(t *testing.T) {
	check(t, genOpts{requestSteps: budgetSteps, filters: true, crowded: true}, func(t *rapid.T, in Input, out Output) {
		for _, fs := range in.Filesystems {
			messages := 0
			for _, m := range out.Messages {
				if strings.Contains(m, fs.Path+" ") {
					messages++
				}
			}
			if !wanted(in, backend.StepDependencies) || !overHigh(fs) {
				if messages > 0 {
					t.Fatalf("filesystem %+v not over: messages %q", fs, out.Messages)
				}
				continue
			}
			used, avail := fs.UsedBytes, fs.AvailBytes
			give := func(n int64) {
				g := min(uint64(n), used)
				used, avail = used-g, avail+g
			}
			frac := func() float64 {
				if used+avail == 0 {
					return 0
				}
				return float64(used) / float64(used+avail)
			}
			for _, a := range out.Actions {
				if a.Step == backend.StepCaches && a.Filesystem == fs.ID {
					give(a.Bytes)
				}
			}
			shed := depsActionsOn(out, fs.ID)
			for i, a := range shed {
				if frac() <= fs.Low {
					t.Fatalf("on %+v: dependency action %d %+v though the projection %.4f was already at or under low (all: %s)",
						fs, i, a, frac(), dump(shed))
				}
				give(a.Bytes)
			}
			if frac() > fs.Low {
				if n := len(shedOrder(in, out, fs)); len(shed) != n {
					t.Fatalf("on %+v: still %.4f > low after %d of %d eligible", fs, frac(), len(shed), n)
				}
				if messages != 1 {
					t.Fatalf("on %+v: still %.4f > low, messages %q, want exactly one", fs, frac(), out.Messages)
				}
			} else if messages != 0 {
				t.Fatalf("on %+v: at %.4f <= low, yet messages %q", fs, frac(), out.Messages)
			}
		}
	})
}

func TestPropertyOneDestructiveActionPerRuntime(t *testing.T) {
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		seen := map[backend.Key]Action{}
		for _, a := range out.Actions {
			if !a.Step.Destructive() {
				continue
			}
			if b, ok := seen[a.Key]; ok {
				t.Fatalf("two destructive actions for %v: %+v and %+v", a.Key, b, a)
			}
			seen[a.Key] = a
		}
		// Nor a suspend beside a destructive action.
		for _, a := range out.Actions {
			if _, ok := seen[a.Key]; ok && a.Step == backend.StepSuspend {
				t.Fatalf("suspend and a destructive action for %v", a.Key)
			}
		}
	})
}

func TestPropertyOnlyPresentRuntimes(t *testing.T) {
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			c := candidateOf(in, a.Key)
			if c == nil {
				t.Fatalf("action %+v for a runtime not in the input", a)
			}
			if !c.Runtime.State.Present() {
				t.Fatalf("action %+v for a runtime in state %s", a, c.Runtime.State)
			}
		}
		for _, n := range append(slices.Clone(out.Schedule), out.Cancel...) {
			if c := candidateOf(in, n.Key); c == nil || !c.Runtime.State.Present() {
				t.Fatalf("notice %+v for a runtime not present", n)
			}
		}
	})
}

// TestPropertyPresentRuntimesOnlyWithoutRequests is the same property with no
// requests, so the policies themselves are checked apart from requests.
func TestPropertyPresentRuntimesOnlyWithoutRequests(t *testing.T) {
	check(t, genOpts{filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			if c := candidateOf(in, a.Key); c == nil || !c.Runtime.State.Present() {
				t.Fatalf("action %+v for a runtime not present", a)
			}
		}
	})
}

func TestPropertyUnsavedWorkNeedsExport(t *testing.T) {
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			c := candidateOf(in, a.Key)
			if c == nil || !a.Step.Destructive() {
				continue
			}
			if c.Runtime.Unsaved != "" && !c.Can.Export {
				t.Fatalf("%+v of a runtime with unsaved work (%q) and no Export", a, c.Runtime.Unsaved)
			}
			if !c.Can.Delete {
				t.Fatalf("%+v of a runtime whose backend cannot delete", a)
			}
		}
	})
}

// TestPropertyCapabilities: no step is proposed that the backend cannot do.
func TestPropertyCapabilities(t *testing.T) {
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			c := candidateOf(in, a.Key)
			if c == nil {
				continue
			}
			ok := map[backend.Step]bool{
				backend.StepCaches: c.Can.Files, backend.StepDependencies: c.Can.Files,
				backend.StepSuspend: c.Can.Suspend, backend.StepArchive: c.Can.Delete && c.Can.Archive, backend.StepDelete: c.Can.Delete,
			}[a.Step]
			if !ok {
				t.Fatalf("%+v with capabilities %+v", a, c.Can)
			}
		}
	})
}

// TestPropertyFiltersNarrow: nothing in the output is outside Input.Steps or
// Input.Only.
func TestPropertyFiltersNarrow(t *testing.T) {
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		inFilters := func(what string, k backend.Key, s backend.Step) {
			if !wanted(in, s) || !inPass(in, k) {
				t.Fatalf("%s for %v step %s outside Steps %v / Only %v", what, k, s, in.Steps, in.Only)
			}
		}
		for _, a := range out.Actions {
			inFilters("action", a.Key, a.Step)
		}
		for _, s := range out.Skipped {
			if s.Step == "" { // a protected runtime, reported once whatever the steps
				if !inPass(in, s.Key) {
					t.Fatalf("skip %+v outside Only %v", s, in.Only)
				}
				continue
			}
			inFilters("skip", s.Key, s.Step)
		}
		for _, n := range append(slices.Clone(out.Schedule), out.Cancel...) {
			inFilters("notice", n.Key, n.Step)
		}
	})
}

// TestPropertyFiltersNarrowWithoutRequests is the same with no requests.
func TestPropertyFiltersNarrowWithoutRequests(t *testing.T) {
	check(t, genOpts{filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			if !wanted(in, a.Step) || !inPass(in, a.Key) {
				t.Fatalf("action %+v outside Steps %v / Only %v", a, in.Steps, in.Only)
			}
		}
		for _, s := range out.Skipped {
			if (s.Step != "" && !wanted(in, s.Step)) || !inPass(in, s.Key) {
				t.Fatalf("skip %+v outside Steps %v / Only %v", s, in.Steps, in.Only)
			}
		}
	})
}

// TestPropertyOnlyEqualsFewerCandidates: a pass with Only=[k] decides
// exactly what a pass over just that candidate decides.
func TestPropertyOnlyEqualsFewerCandidates(t *testing.T) {
	check(t, genOpts{}, func(t *rapid.T, in Input, out Output) {
		if len(in.Candidates) == 0 {
			return
		}
		k := in.Candidates[rapid.IntRange(0, len(in.Candidates)-1).Draw(t, "only")].Runtime.Key
		withOnly := in
		withOnly.Only = []backend.Key{k}
		fewer := in
		fewer.Candidates = nil
		for _, c := range in.Candidates {
			if c.Runtime.Key == k {
				fewer.Candidates = append(fewer.Candidates, c)
			}
		}
		if a, b := Decide(withOnly), Decide(fewer); !reflect.DeepEqual(a, b) {
			t.Fatalf("Only=[%v]:\n%+v\njust that candidate:\n%+v", k, a, b)
		}
	})
}

func TestPropertyDeterministic(t *testing.T) {
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		shuffled := in
		shuffled.Candidates = rapid.Permutation(in.Candidates).Draw(t, "shuffled")
		if again := Decide(shuffled); !reflect.DeepEqual(out, again) {
			t.Fatalf("candidates shuffled, output differs:\n%+v\n%+v", out, again)
		}
		if again := Decide(in); !reflect.DeepEqual(out, again) {
			t.Fatalf("same input, output differs:\n%+v\n%+v", out, again)
		}
	})
}

func deepCopy(in Input) Input {
	out := in
	out.Candidates = nil
	for _, c := range in.Candidates {
		c.Runtime.Workspaces = slices.Clone(c.Runtime.Workspaces)
		if c.Runtime.Labels != nil {
			labels := make(map[string]string, len(c.Runtime.Labels))
			for k, v := range c.Runtime.Labels {
				labels[k] = v
			}
			c.Runtime.Labels = labels
		}
		if c.Record.Retention != nil {
			r := *c.Record.Retention
			c.Record.Retention = &r
		}
		c.Settings.CacheDirs = slices.Clone(c.Settings.CacheDirs)
		c.Caches = slices.Clone(c.Caches)
		c.Dependencies = slices.Clone(c.Dependencies)
		out.Candidates = append(out.Candidates, c)
	}
	if in.Candidates != nil && out.Candidates == nil {
		out.Candidates = []Candidate{}
	}
	out.Filesystems = slices.Clone(in.Filesystems)
	out.Requests = slices.Clone(in.Requests)
	out.Steps = slices.Clone(in.Steps)
	out.Only = slices.Clone(in.Only)
	return out
}

func TestPropertyPure(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t, genOpts{requestSteps: allRequestSteps, filters: true})
		for i := range in.Candidates {
			in.Candidates[i].Settings.CacheDirs = []string{".cache", ".npm"}
		}
		before := deepCopy(in)
		out := Decide(in)
		if !reflect.DeepEqual(in, before) {
			t.Fatalf("Decide modified its input:\nbefore %+v\nafter  %+v", before, in)
		}
		// Nor does the output share memory with the input.
		for i := range out.Actions {
			for j := range out.Actions[i].Paths {
				out.Actions[i].Paths[j] = "/scribbled"
			}
		}
		if !reflect.DeepEqual(in, before) {
			t.Fatalf("output paths alias the input")
		}
	})
}

// TestPropertyReasonsAreTyped: every action names the rule behind it, and
// every skip and notice a code; a skip whose code is a protection is
// exactly the protection the runtime has (decisions and the re-check
// under the lock compare codes, never texts).
func TestPropertyReasonsAreTyped(t *testing.T) {
	rules := []Code{RuleCaches, RuleBudget, RuleRetention, RuleRetentionDelete, RuleOrphan, RuleIdle, RuleLifetime, RuleSuspendDeletes, RuleIdleArchive, RuleRequest, RuleReleased}
	check(t, genOpts{requestSteps: allRequestSteps, filters: true}, func(t *rapid.T, in Input, out Output) {
		for _, a := range out.Actions {
			if !slices.Contains(rules, a.Code) {
				t.Fatalf("action %+v: code %q is not a rule", a, a.Code)
			}
		}
		for _, s := range out.Skipped {
			if s.Code == "" || s.Reason == "" {
				t.Fatalf("skip %+v without a code or words", s)
			}
			if c := candidateOf(in, s.Key); c != nil && s.Code.Protection() {
				if p := Protection(c, in.Now); p.Code != s.Code || p.Text != s.Reason {
					t.Fatalf("skip %+v, but the runtime's protection is %+v", s, p)
				}
			}
		}
		for _, n := range append(slices.Clone(out.Schedule), out.Cancel...) {
			if n.Code == "" || n.Reason == "" {
				t.Fatalf("notice %+v without a code or words", n)
			}
		}
	})
}
