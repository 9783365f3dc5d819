package ops

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/views"
)

// TestSortRuntimes: each order puts first what an operator looks for
// first (largest, newest, soonest due; nothing due last), ties in key
// order; desc reverses it whole.
func TestSortRuntimes(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	list := []views.Runtime{
		{ID: "a", Backend: "dir", SizeBytes: 10, LastActivity: t0, ScheduledDue: t0.Add(2 * time.Hour)},
		{ID: "b", Backend: "dir", SizeBytes: 30, LastActivity: t0.Add(time.Hour)},
		{ID: "c", Backend: "dir", SizeBytes: -1, ScheduledDue: t0.Add(time.Hour)},
		{ID: "d", Backend: "dir", SizeBytes: 30, LastActivity: t0.Add(-time.Hour)},
		{ID: "e", Backend: "worktree", SizeBytes: 5, LastActivity: t0.Add(time.Hour)},
	}
	ids := func(l []views.Runtime) []string {
		var out []string
		for _, r := range l {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		by   string
		desc bool
		want []string
	}{
		{"size", false, []string{"b", "d", "a", "e", "c"}},
		{"size", true, []string{"c", "e", "a", "d", "b"}},
		{"activity", false, []string{"b", "e", "a", "d", "c"}},
		{"due", false, []string{"c", "a", "b", "d", "e"}},
		{"due", true, []string{"e", "d", "b", "a", "c"}},
	} {
		l := slices.Clone(list)
		sortRuntimes(l, tc.by, tc.desc)
		if got := ids(l); !slices.Equal(got, tc.want) {
			t.Errorf("sort by %s (desc %v): %v, want %v", tc.by, tc.desc, got, tc.want)
		}
	}
}

func TestMatches(t *testing.T) {
	v := views.Runtime{ID: "conv1:repo", Backend: "worktree", Source: "worktrees:/srv/wt", Path: "/srv/wt/conv1/repo",
		Labels: map[string]string{"team": "Search"}, Conversations: []string{"c-42"}, PinReason: "demo friday"}
	for q, want := range map[string]bool{"conv1": true, "WORKTREE": true, "/srv/wt/conv1": true, "team=search": true,
		"search": true, "c-42": true, "friday": true, "conv2": false, "docker": false} {
		if got := matches(&v, strings.ToLower(q)); got != want {
			t.Errorf("matches(%q) = %v", q, got)
		}
	}
}
