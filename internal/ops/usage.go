package ops

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/views"
)

// ForecastWindow is how far back the forecast fits its rate: "full in
// about N hours at the last 6 hours' rate".
const ForecastWindow = 6 * time.Hour

// usagePruneEvery is how often the daemon prunes old usage samples, and
// the journal and notices past [server] journal_retention.
const usagePruneEvery = time.Hour

// UsageQuery selects usage samples.
type UsageQuery struct {
	// Since: samples at or after it (zero: the last 7 days).
	Since time.Time
	// Path: only this filesystem's ("" every one).
	Path string
	// Points bounds the samples of each filesystem, evenly thinned, the
	// newest always kept (0: DefaultUsagePoints; -1: every one).
	Points int
}

// DefaultUsagePoints is how many samples a series has at most unless
// asked: enough for a chart a few screens wide.
const DefaultUsagePoints = 500

// Usage is the usage of this host's managed filesystems over time, from
// the samples the daemon records at each pass, with each one's forecast.
func (a *App) Usage(ctx context.Context, q UsageQuery) (*views.UsageHistory, error) {
	now := a.now()
	if q.Since.IsZero() {
		q.Since = now.Add(-7 * 24 * time.Hour)
	}
	if q.Points < -1 || q.Points > 100000 {
		return nil, Input("points", "points %d: between 1 and 100000", q.Points)
	}
	samples, err := a.store.ListUsage(ctx, ledger.UsageFilter{Host: a.opts.Host, Path: q.Path, Since: q.Since})
	if err != nil {
		return nil, err
	}
	out := &views.UsageHistory{Since: q.Since.UTC(), Filesystems: []views.UsageSeries{}}
	index := map[string]int{}
	for _, s := range samples {
		i, ok := index[s.Path]
		if !ok {
			i = len(out.Filesystems)
			index[s.Path] = i
			out.Filesystems = append(out.Filesystems, views.UsageSeries{Path: s.Path, Samples: []views.UsagePoint{}})
		}
		out.Filesystems[i].Samples = append(out.Filesystems[i].Samples, views.UsagePoint{At: s.At, UsedBytes: s.UsedBytes,
			AvailBytes: s.AvailBytes, TotalBytes: s.TotalBytes, ReclaimableBytesByStep: s.ReclaimableBytes})
	}
	if w, _ := a.LastWorld(); w != nil {
		for _, fs := range w.Filesystems {
			if i, ok := index[fs.Path]; ok {
				out.Filesystems[i].High, out.Filesystems[i].Low = fs.High, fs.Low
			}
		}
	}
	points := q.Points
	if points == 0 {
		points = DefaultUsagePoints
	}
	for i := range out.Filesystems {
		f := &out.Filesystems[i]
		f.Forecast = Forecast(f.Samples, now, ForecastWindow)
		if points > 0 {
			f.Samples = thin(f.Samples, points)
		}
	}
	return out, nil
}

// thin keeps at most n of ps, evenly spread, the newest always.
func thin(ps []views.UsagePoint, n int) []views.UsagePoint {
	if len(ps) <= n {
		return ps
	}
	out := make([]views.UsagePoint, 0, n)
	for i := range n {
		// The i-th of n points, counted back from the newest.
		j := len(ps) - 1 - int(float64(n-1-i)*float64(len(ps)-1)/float64(n-1))
		if n == 1 {
			j = len(ps) - 1
		}
		out = append(out, ps[j])
	}
	return out
}

// Forecast is when the filesystem whose samples are ps (oldest first)
// would be full, at the rate its free space shrank over the samples of
// the window before now: a least-squares line through them. It is nil
// with fewer than two samples in the window, or ones less than a minute
// apart; not growing when the free space did not shrink.
func Forecast(ps []views.UsagePoint, now time.Time, window time.Duration) *views.Forecast {
	var in []views.UsagePoint
	for _, p := range ps {
		if !p.At.Before(now.Add(-window)) && !p.At.After(now) {
			in = append(in, p)
		}
	}
	if len(in) < 2 {
		return nil
	}
	first, last := in[0], in[len(in)-1]
	span := last.At.Sub(first.At)
	if span < time.Minute {
		return nil
	}
	// Least squares of free bytes over hours since the first sample.
	var sx, sy, sxx, sxy float64
	for _, p := range in {
		x := p.At.Sub(first.At).Hours()
		y := float64(p.AvailBytes)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(in))
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	f := &views.Forecast{RateBytesPerHour: math.Round(-slope) + 0, Window: spanText(span), Samples: len(in)}
	if -slope < 1 {
		// Less than a byte an hour: not growing.
		f.Text = "not growing"
		return f
	}
	f.Growing = true
	hours := float64(last.AvailBytes) / -slope
	f.FullAt = last.At.Add(time.Duration(hours * float64(time.Hour))).UTC().Truncate(time.Second)
	left := max(f.FullAt.Sub(now).Hours(), 0)
	f.FullInHours = math.Round(left*10) / 10
	rate := "at the last " + spanWords(span) + " rate"
	switch {
	case last.AvailBytes == 0:
		f.Text = "full now"
	case left < 1:
		f.Text = "full in less than an hour " + rate
	case left < 1.5:
		f.Text = "full in about an hour " + rate
	case left < 48:
		f.Text = fmt.Sprintf("full in about %d hours %s", int(math.Round(left)), rate)
	default:
		f.Text = fmt.Sprintf("full in about %d days %s", int(math.Round(left/24)), rate)
	}
	return f
}

// spanText is a window in the form of durations: "6h", "45m".
func spanText(d time.Duration) string {
	if d >= 2*time.Hour {
		return DurationText(d.Round(time.Hour))
	}
	return DurationText(d.Round(time.Minute))
}

// spanWords is a window in words, possessive: "6 hours'", "an hour's",
// "45 minutes'".
func spanWords(d time.Duration) string {
	switch h := int(d.Round(time.Hour).Hours()); {
	case d >= 90*time.Minute:
		return fmt.Sprintf("%d hours'", h)
	case d >= 55*time.Minute:
		return "hour's"
	}
	return fmt.Sprintf("%d minutes'", int(d.Round(time.Minute).Minutes()))
}

// recordUsage records a usage sample of every filesystem a full pass
// measured (the daemon's, Options.SampleUsage), with what its plan would
// free there, and now and then prunes the samples older than
// [server] usage_retention and the journal older than journal_retention
// (pruneJournal). A failure is logged: it must not fail a pass.
func (a *App) recordUsage(ctx context.Context, w *engine.World, p *plan.Plan) {
	byPath := map[string]int{}
	var samples []ledger.UsageSample
	ids := map[string]int{}
	for _, fs := range w.Filesystems {
		if _, dup := byPath[fs.Path]; dup {
			ids[fs.ID] = byPath[fs.Path]
			continue
		}
		u := w.Usage[fs.ID]
		byPath[fs.Path] = len(samples)
		ids[fs.ID] = len(samples)
		samples = append(samples, ledger.UsageSample{Host: a.opts.Host, Path: fs.Path, At: w.Now,
			UsedBytes: clampInt64(u.UsedBytes), AvailBytes: clampInt64(u.AvailBytes), TotalBytes: clampInt64(u.TotalBytes)})
	}
	if p != nil {
		for _, act := range p.Actions {
			i, ok := ids[act.Filesystem]
			if !ok || act.Bytes <= 0 {
				continue
			}
			if samples[i].ReclaimableBytes == nil {
				samples[i].ReclaimableBytes = map[string]int64{}
			}
			samples[i].ReclaimableBytes[string(act.Step)] += act.Bytes
		}
	}
	if err := a.store.RecordUsage(ctx, samples); err != nil {
		a.log.Warn("record usage samples", "err", err)
	}
	a.stateMu.Lock()
	prune := a.now().Sub(a.usagePruned) >= usagePruneEvery
	if prune {
		a.usagePruned = a.now()
	}
	a.stateMu.Unlock()
	if prune {
		ss := a.setupNow().cfg.ServerSettings()
		if n, err := a.store.PruneUsage(ctx, a.now().Add(-ss.UsageRetention)); err != nil {
			a.log.Warn("prune usage samples", "err", err)
		} else if n > 0 {
			a.log.Debug("pruned usage samples", "samples", n)
		}
		a.pruneJournal(ctx, ss.JournalRetention, ss.NoticeHorizon)
	}
}

// pruneJournal deletes the journal entries finished longer than keep ago
// and the notices (with their webhook deliveries) recorded that long ago;
// keep 0 ([server] journal_retention = "off") keeps them all. A notice
// younger than the outbox's horizon may still be owed to a webhook, so
// nothing younger than horizon goes, whatever keep says: the outbox never
// sends an older one. Unfinished entries are the store's to keep.
func (a *App) pruneJournal(ctx context.Context, keep, horizon time.Duration) {
	if keep <= 0 {
		return
	}
	p, err := a.store.PruneJournal(ctx, a.now().Add(-max(keep, horizon)))
	if err != nil {
		// A prune cut short leaves whole batches done: log those too.
		a.log.Warn("prune journal", "entries", p.Entries, "notices", p.Notices, "err", err)
	} else if p.Total() > 0 {
		a.log.Debug("pruned journal", "entries", p.Entries, "notices", p.Notices, "deliveries", p.Deliveries)
	}
}

func clampInt64(n uint64) int64 { return int64(min(n, math.MaxInt64)) }

// forecasts gives each filesystem of st its forecast from this host's
// usage samples of the last ForecastWindow.
func (a *App) forecasts(ctx context.Context, st *views.Status) {
	now := a.now()
	for i := range st.Filesystems {
		f := &st.Filesystems[i]
		samples, err := a.store.ListUsage(ctx, ledger.UsageFilter{Host: a.opts.Host, Path: f.Path, Since: now.Add(-ForecastWindow)})
		if err != nil {
			a.log.Warn("read usage samples", "err", err)
			return
		}
		ps := make([]views.UsagePoint, len(samples))
		for j, s := range samples {
			ps[j] = views.UsagePoint{At: s.At, UsedBytes: s.UsedBytes, AvailBytes: s.AvailBytes, TotalBytes: s.TotalBytes}
		}
		f.Forecast = Forecast(ps, now, ForecastWindow)
	}
}
