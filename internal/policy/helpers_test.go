package policy

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// now is the pass time of every table test.
var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const (
	hour = time.Hour
	day  = 24 * time.Hour
)

func ago(d time.Duration) time.Time { return now.Add(-d) }

func durp(d time.Duration) *time.Duration { return &d }

func key(id string) backend.Key { return backend.Key{Backend: "dir", ID: id} }

// cand is a stopped, unprotected runtime on fs1 with every capability, last
// active an hour ago and no policy switched on; mods adjust it.
func cand(id string, mods ...func(*Candidate)) Candidate {
	c := Candidate{
		Runtime: &backend.Runtime{
			Key:          key(id),
			State:        backend.StateStopped,
			Path:         "/srv/runs/" + id,
			Root:         "/srv/runs",
			LastActivity: ago(hour),
		},
		Can:        Capabilities{Suspend: true, Delete: true, Export: true, Files: true, Archive: true},
		Filesystem: "fs1",
		SizeBytes:  1000,
	}
	for _, m := range mods {
		m(&c)
	}
	return c
}

func state(s backend.State) func(*Candidate) {
	return func(c *Candidate) { c.Runtime.State = s }
}

func caches(files ...backend.File) func(*Candidate) {
	return func(c *Candidate) { c.Caches = files }
}

// deps gives c one dependency folder of n bytes.
func deps(n int64) func(*Candidate) {
	return func(c *Candidate) {
		c.Dependencies = []backend.File{{Path: c.Runtime.Path + "/node_modules", Bytes: n}}
	}
}

func lastActive(t time.Time) func(*Candidate) {
	return func(c *Candidate) { c.Runtime.LastActivity = t }
}

func onFS(id string) func(*Candidate) {
	return func(c *Candidate) { c.Filesystem = id }
}

func depsAction(id string, n int64, reason string) Action {
	return Action{Key: key(id), Step: backend.StepDependencies, Paths: []string{"/srv/runs/" + id + "/node_modules"},
		Bytes: n, Reason: reason, Filesystem: "fs1"}
}

// fsys is a filesystem with consistent usage (Fraction = used/(used+avail)).
func fsys(id string, used, avail uint64, high, low float64) Filesystem {
	return Filesystem{ID: id, Path: "/srv/" + id, UsedBytes: used, AvailBytes: avail,
		Fraction: float64(used) / float64(used+avail), High: high, Low: low}
}

// checkOutput compares got with want exactly, except that every Reason and
// Message of want need only be a substring of got's, and a Code of want is
// compared only when set. Every code of got must be set.
func checkOutput(t *testing.T, got, want Output) {
	t.Helper()
	var diffs []string
	diff := func(what string, n, m int, eq func(i int) bool, show func(o Output, i int) string) {
		if n != m {
			diffs = append(diffs, fmt.Sprintf("%s: got %d, want %d", what, n, m))
		}
		for i := range max(n, m) {
			switch {
			case i >= n:
				diffs = append(diffs, fmt.Sprintf("%s[%d]: missing, want %s", what, i, show(want, i)))
			case i >= m:
				diffs = append(diffs, fmt.Sprintf("%s[%d]: got %s, want none", what, i, show(got, i)))
			case !eq(i):
				diffs = append(diffs, fmt.Sprintf("%s[%d]:\n\t got %s\n\twant %s", what, i, show(got, i), show(want, i)))
			}
		}
	}
	diff("Actions", len(got.Actions), len(want.Actions), func(i int) bool {
		g, w := got.Actions[i], want.Actions[i]
		return g.Key == w.Key && g.Step == w.Step && slicesEqual(g.Paths, w.Paths) && g.Bytes == w.Bytes &&
			g.Filesystem == w.Filesystem && strings.Contains(g.Reason, w.Reason) && codeOK(g.Code, w.Code)
	}, func(o Output, i int) string { return fmt.Sprintf("%+v", o.Actions[i]) })
	diff("Skipped", len(got.Skipped), len(want.Skipped), func(i int) bool {
		g, w := got.Skipped[i], want.Skipped[i]
		return g.Key == w.Key && g.Step == w.Step && strings.Contains(g.Reason, w.Reason) && codeOK(g.Code, w.Code)
	}, func(o Output, i int) string { return fmt.Sprintf("%+v", o.Skipped[i]) })
	notices := func(what string, g, w []Notice, pick func(Output) []Notice) {
		diff(what, len(g), len(w), func(i int) bool {
			return g[i].Key == w[i].Key && g[i].Step == w[i].Step && g[i].Due.Equal(w[i].Due) &&
				strings.Contains(g[i].Reason, w[i].Reason) && codeOK(g[i].Code, w[i].Code)
		}, func(o Output, i int) string { return showNotice(pick(o)[i]) })
	}
	notices("Schedule", got.Schedule, want.Schedule, func(o Output) []Notice { return o.Schedule })
	notices("Cancel", got.Cancel, want.Cancel, func(o Output) []Notice { return o.Cancel })
	diff("Messages", len(got.Messages), len(want.Messages), func(i int) bool {
		return strings.Contains(got.Messages[i], want.Messages[i])
	}, func(o Output, i int) string { return fmt.Sprintf("%q", o.Messages[i]) })
	if len(diffs) > 0 {
		t.Errorf("Decide output differs:\n%s", strings.Join(diffs, "\n"))
	}
}

func showNotice(n Notice) string {
	return fmt.Sprintf("{Key:%v Step:%s Due:%s Reason:%q}", n.Key, n.Step, n.Due.UTC().Format(time.RFC3339), n.Reason)
}

// slicesEqual treats nil and empty alike.
func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type decideCase struct {
	name string
	in   Input
	want Output
}

func runCases(t *testing.T, cases []decideCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.Now.IsZero() {
				tc.in.Now = now
			}
			checkOutput(t, Decide(tc.in), tc.want)
		})
	}
}

// TestMain keeps rapid from writing fail files into testdata/ (the seed it
// prints reproduces a failure) unless asked for with -rapid.nofailfile=false
// or RAPID_NOFAILFILE.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.nofailfile" })
	if _, env := os.LookupEnv("RAPID_NOFAILFILE"); !set && !env {
		if err := flag.Set("rapid.nofailfile", "true"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// codeOK: got's code is set, and is want's when want names one.
func codeOK(got, want Code) bool { return got != "" && (want == "" || got == want) }
