package dashboard

import (
	"fmt"
	"strings"
	"time"
)

// The usage chart: drawn here, on the server, as SVG coordinates for the
// template (numbers only, so nothing in it needs escaping). What it draws
// is the usage view's: its samples, watermarks and forecast.

// chartPoint is one usage sample: its used and available bytes, whose
// ratio is the fraction the watermarks are compared with (as df counts
// it: the blocks reserved for root are neither).
type chartPoint struct {
	At          time.Time
	Used, Avail int64
}

func (p chartPoint) fraction() float64 { return float64(p.Used) / float64(p.Used+p.Avail) }

// chart is one filesystem's usage over time in SVG user units.
type chart struct {
	W, H int
	// Line and Area are the used fraction over time (polyline and
	// polygon points); Forecast the line from the last sample towards
	// full at the forecast's rate, cut at the right edge.
	Line, Area, Forecast string
	// HighY and LowY place the watermarks ("" without a budget).
	HighY, LowY string
	XTicks      []tick
	YTicks      []tick
	// Left and Bottom bound the plot area (for the axes).
	Left, Right, Top, Bottom int
}

type tick struct {
	Pos   string
	Label string
}

const (
	chartW, chartH                    = 960, 240
	padLeft, padRight, padTop, padBot = 48, 12, 10, 26
)

// drawUsage lays out points (oldest first) from their first to now, and
// a quarter of that span beyond now when the forecast says the disk fills
// (fullAt), so the dashed line shows where it is heading. Nil without two
// points to draw a line between.
func drawUsage(points []chartPoint, high, low float64, fullAt, now time.Time) *chart {
	var ps []chartPoint
	for _, p := range points {
		if p.Used+p.Avail > 0 {
			ps = append(ps, p)
		}
	}
	if len(ps) < 2 {
		return nil
	}
	t0 := ps[0].At
	end := now
	if last := ps[len(ps)-1].At; last.After(end) {
		end = last
	}
	span := end.Sub(t0)
	if span <= 0 {
		return nil
	}
	if !fullAt.IsZero() {
		end = end.Add(span / 4)
	}
	c := &chart{W: chartW, H: chartH, Left: padLeft, Right: chartW - padRight, Top: padTop, Bottom: chartH - padBot}
	plotW, plotH := float64(c.Right-c.Left), float64(c.Bottom-c.Top)
	total := end.Sub(t0)
	x := func(t time.Time) float64 { return float64(c.Left) + plotW*float64(t.Sub(t0))/float64(total) }
	y := func(f float64) float64 { return float64(c.Top) + plotH*(1-clamp(f)) }
	var line []string
	for _, p := range ps {
		line = append(line, fmt.Sprintf("%.1f,%.1f", x(p.At), y(p.fraction())))
	}
	c.Line = strings.Join(line, " ")
	first, last := ps[0], ps[len(ps)-1]
	c.Area = fmt.Sprintf("%.1f,%.1f %s %.1f,%.1f", x(first.At), y(0), c.Line, x(last.At), y(0))
	if !fullAt.IsZero() && fullAt.After(last.At) {
		f0 := last.fraction()
		tEnd, fEnd := fullAt, 1.0
		if fullAt.After(end) {
			// Cut at the right edge, on the same straight line.
			tEnd = end
			fEnd = f0 + (1-f0)*float64(end.Sub(last.At))/float64(fullAt.Sub(last.At))
		}
		c.Forecast = fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(last.At), y(f0), x(tEnd), y(fEnd))
	}
	if high > 0 {
		c.HighY, c.LowY = fmt.Sprintf("%.1f", y(high)), fmt.Sprintf("%.1f", y(low))
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.YTicks = append(c.YTicks, tick{Pos: fmt.Sprintf("%.1f", y(f)), Label: fmt.Sprintf("%.0f%%", f*100)})
	}
	// Five time ticks, labeled by day and hour (UTC), or hour and minute
	// for a span under two days.
	layout := "Jan 2 15:04"
	if total < 48*time.Hour {
		layout = "15:04"
	}
	for i := range 5 {
		t := t0.Add(total * time.Duration(i) / 4)
		c.XTicks = append(c.XTicks, tick{Pos: fmt.Sprintf("%.1f", x(t)), Label: t.UTC().Format(layout)})
	}
	return c
}
