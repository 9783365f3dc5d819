package ops

import (
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/views"
)

func TestForecast(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	const gb = int64(1) << 30
	// series gives a sample every step from now-span to now, its free
	// space starting at free and changing by perHour.
	series := func(span, step time.Duration, free, perHour int64) []views.UsagePoint {
		var ps []views.UsagePoint
		for at := now.Add(-span); !at.After(now); at = at.Add(step) {
			avail := free + int64(float64(perHour)*at.Sub(now.Add(-span)).Hours())
			ps = append(ps, views.UsagePoint{At: at, AvailBytes: max(avail, 0), UsedBytes: 100*gb - max(avail, 0), TotalBytes: 100 * gb})
		}
		return ps
	}
	cases := []struct {
		name    string
		ps      []views.UsagePoint
		nil     bool
		growing bool
		text    string
		fullIn  float64
	}{
		{name: "none", ps: nil, nil: true},
		{name: "one sample", ps: series(0, time.Minute, 10*gb, 0), nil: true},
		{name: "samples too close", ps: series(30*time.Second, 10*time.Second, 10*gb, -gb), nil: true},
		{name: "only old samples", ps: series(time.Hour, 5*time.Minute, 10*gb, -gb)[:2], nil: false, growing: true},
		{name: "steady", ps: series(6*time.Hour, 5*time.Minute, 10*gb, 0), text: "not growing"},
		{name: "shrinking usage", ps: series(6*time.Hour, 5*time.Minute, 10*gb, gb), text: "not growing"},
		{name: "a GB an hour, 14 left after 6h", ps: series(6*time.Hour, 5*time.Minute, 20*gb, -gb), growing: true,
			text: "full in about 14 hours at the last 6 hours' rate", fullIn: 14},
		{name: "fast", ps: series(2*time.Hour, 5*time.Minute, 5*gb/2, -gb), growing: true,
			text: "full in less than an hour at the last 2 hours' rate", fullIn: 0.5},
		{name: "an hour", ps: series(2*time.Hour, 5*time.Minute, 3*gb, -gb), growing: true,
			text: "full in about an hour at the last 2 hours' rate", fullIn: 1},
		{name: "slow: days", ps: series(6*time.Hour, 10*time.Minute, 50*gb, -gb/10), growing: true,
			text: "full in about 21 days at the last 6 hours' rate", fullIn: 494},
		{name: "full now", ps: series(time.Hour, 5*time.Minute, gb/2, -gb), growing: true, text: "full now", fullIn: 0},
		{name: "half an hour of samples", ps: series(30*time.Minute, 5*time.Minute, 10*gb, -gb), growing: true,
			text: "full in about 10 hours at the last 30 minutes' rate", fullIn: 9.5},
		// Samples older than the window do not count: a jump a day ago
		// does not make today's steady disk grow.
		{name: "window only", ps: append([]views.UsagePoint{{At: now.Add(-24 * time.Hour), AvailBytes: 90 * gb}},
			series(6*time.Hour, 5*time.Minute, 10*gb, 0)...), text: "not growing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Forecast(tc.ps, now, ForecastWindow)
			if tc.name == "only old samples" {
				// Two samples an hour ago, five minutes apart: within the window.
				if f == nil || !f.Growing || f.Samples != 2 {
					t.Fatalf("%+v", f)
				}
				return
			}
			if (f == nil) != tc.nil {
				t.Fatalf("forecast %+v, want nil %v", f, tc.nil)
			}
			if f == nil {
				return
			}
			if f.Growing != tc.growing || f.Text != tc.text {
				t.Errorf("forecast %+v, want growing %v %q", f, tc.growing, tc.text)
			}
			if tc.growing && (f.FullInHours < tc.fullIn-0.6 || f.FullInHours > tc.fullIn+0.6 || f.FullAt.IsZero()) {
				t.Errorf("full in %.1f hours (at %s), want about %.1f", f.FullInHours, f.FullAt, tc.fullIn)
			}
			if !tc.growing && (!f.FullAt.IsZero() || f.FullInHours != 0) {
				t.Errorf("not growing, yet full at %s", f.FullAt)
			}
		})
	}
}

func TestThin(t *testing.T) {
	var ps []views.UsagePoint
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1000 {
		ps = append(ps, views.UsagePoint{At: t0.Add(time.Duration(i) * time.Minute), UsedBytes: int64(i)})
	}
	got := thin(ps, 10)
	if len(got) != 10 || got[9].UsedBytes != 999 || got[0].UsedBytes != 0 {
		t.Fatalf("thin to 10: %+v", got)
	}
	for i := 1; i < len(got); i++ {
		if gap := got[i].UsedBytes - got[i-1].UsedBytes; gap < 100 || gap > 112 {
			t.Errorf("uneven: %d after %d", got[i].UsedBytes, got[i-1].UsedBytes)
		}
	}
	if got := thin(ps[:5], 10); len(got) != 5 {
		t.Errorf("thin of fewer: %d", len(got))
	}
	if got := thin(ps, 1); len(got) != 1 || got[0].UsedBytes != 999 {
		t.Errorf("thin to 1: %+v", got)
	}
}
