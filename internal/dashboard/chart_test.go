package dashboard

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestDrawUsage(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ps := []chartPoint{
		{At: now.Add(-4 * time.Hour), Used: 40, Avail: 60},
		{At: now.Add(-2 * time.Hour), Used: 50, Avail: 50},
		{At: now, Used: 60, Avail: 40},
	}
	if drawUsage(ps[:1], 0.9, 0.85, time.Time{}, now) != nil {
		t.Fatal("a chart of one sample")
	}
	c := drawUsage(ps, 0.9, 0.85, time.Time{}, now)
	if c == nil || c.Forecast != "" || len(strings.Fields(c.Line)) != 3 || c.HighY == "" {
		t.Fatalf("chart without a forecast: %+v", c)
	}
	// The first point is at the left edge at 40%, the last at the right
	// edge at 60% (no forecast: the chart ends now).
	plotH := float64(c.Bottom - c.Top)
	wantFirst := "48.0," + ftoa(float64(c.Top)+plotH*0.6)
	wantLast := "948.0," + ftoa(float64(c.Top)+plotH*0.4)
	if f := strings.Fields(c.Line); f[0] != wantFirst || f[2] != wantLast {
		t.Fatalf("line %q, want it from %s to %s", c.Line, wantFirst, wantLast)
	}
	// Growing 5 points an hour: full 8 hours from now; the chart reaches
	// a quarter of its span (1h) beyond now, where usage is at 65%.
	c = drawUsage(ps, 0.9, 0.85, now.Add(8*time.Hour), now)
	f := strings.Fields(c.Forecast)
	if len(f) != 2 || !strings.HasPrefix(f[1], "948.0,") || f[1] != "948.0,"+ftoa(float64(c.Top)+plotH*0.35) {
		t.Fatalf("forecast %q (plot from %d to %d)", c.Forecast, c.Top, c.Bottom)
	}
	if len(c.XTicks) != 5 || c.XTicks[0].Label != "08:00" || c.XTicks[4].Label != "13:00" || len(c.YTicks) != 5 {
		t.Fatalf("ticks %+v %+v", c.XTicks, c.YTicks)
	}
}

func ftoa(f float64) string { return fmt.Sprintf("%.1f", f) }
