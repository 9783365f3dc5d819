package dashboard

import (
	"fmt"
	"html/template"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/humanize"
)

// funcs are the templates' formatting helpers: how a view is written, not
// what it says.
var funcs = template.FuncMap{
	"bytes":      humanBytes,
	"pct":        func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
	"ts":         func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"rel":        relative,
	"runtimeURL": runtimeURL,
	"journalURL": func(source, backend, id string) string {
		return "/journal?" + url.Values{"runtime": {id}, "backend": {backend}, "source": {source}}.Encode()
	},
	"steps":    stepsOf,
	"counts":   countsOf,
	"x":        func(f float64) string { return fmt.Sprintf("%.1f", clamp(f)*1000) },
	"sortLink": sortLink,
	"sortMark": sortMark,
	"join":     strings.Join,
	"labels": func(m map[string]string) string {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, k+"="+m[k])
		}
		return strings.Join(out, ", ")
	},
	"eq1": func(a, b string) bool { return a == b },
}

func clamp(f float64) float64 { return min(max(f, 0), 1) }

// humanBytes writes a size in binary units ("1.4 GiB"); -1 is unknown.
func humanBytes(n int64) string {
	if n < 0 {
		return "—"
	}
	return humanize.Bytes(n)
}

// relative writes t from now: "in 3h 5m", "12m ago", "now".
func relative(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := t.Sub(now)
	if d > -time.Second && d < time.Second {
		return "now"
	}
	if d > 0 {
		return "in " + span(d)
	}
	return span(-d) + " ago"
}

func span(d time.Duration) string {
	d = d.Round(time.Second)
	days, d := d/(24*time.Hour), d%(24*time.Hour)
	h, d := d/time.Hour, d%time.Hour
	m, sec := d/time.Minute, (d%time.Minute)/time.Second
	switch {
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, h)
	case h > 0:
		return fmt.Sprintf("%dh %dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm %ds", m, sec)
	}
	return fmt.Sprintf("%ds", sec)
}

func runtimeURL(source, backend, id string) string {
	return "/runtime?" + url.Values{"source": {source}, "backend": {backend}, "id": {id}}.Encode()
}

// stepOrder is the steps in rising cost to the user, as the plan orders them.
var stepOrder = []string{"caches", "dependencies", "suspend", "archive", "delete"}

type stepBytes struct {
	Step  string
	Bytes int64
}

// stepsOf lists a by-step map in the steps' order (every step, zero too).
func stepsOf(m map[string]int64) []stepBytes {
	out := make([]stepBytes, 0, len(stepOrder))
	for _, s := range stepOrder {
		out = append(out, stepBytes{s, m[s]})
	}
	for _, s := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(stepOrder, s) {
			out = append(out, stepBytes{s, m[s]})
		}
	}
	return out
}

type count struct {
	Name string
	N    int
}

// countsOf lists a count map by name.
func countsOf(m map[string]int) []count {
	out := make([]count, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, count{k, m[k]})
	}
	return out
}

// sortLink is the link that sorts the runtimes table by key: the first
// click in the key's natural order, the next reverses it.
func sortLink(data runtimesData, key string) string {
	v, _ := url.ParseQuery(data.Query)
	v.Set("sort", key)
	if data.Sort == key && !data.Desc {
		v.Set("desc", "1")
	}
	return "/runtimes?" + v.Encode()
}

// sortMark is the aria-sort of a column.
func sortMark(data runtimesData, key string) string {
	if data.Sort != key {
		return "none"
	}
	// Each key's natural order is the one an operator looks for first
	// (largest, newest, soonest): "descending" for size and activity.
	natural := map[string]string{"size": "descending", "activity": "descending", "due": "ascending"}[key]
	if data.Desc {
		if natural == "descending" {
			return "ascending"
		}
		return "descending"
	}
	return natural
}
