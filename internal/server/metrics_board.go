package server

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/plan"
)

// boardMetrics are the series the Grafana board and the alerts of deploy/
// need beyond the first ones: the watermarks to draw usage against, every
// action by outcome, passes by result, when the last pass ended and how
// often one should, and how many passes in a row could not read a source.
type boardMetrics struct {
	high, low  *prometheus.GaugeVec
	actions    *prometheus.CounterVec
	passes     *prometheus.CounterVec
	lastPass   prometheus.Gauge
	interval   prometheus.Gauge
	unreadable *prometheus.GaugeVec

	mu     sync.Mutex
	missed map[[2]string]int // (source, backend) → passes in a row it could not be listed
}

func newBoardMetrics(reg *prometheus.Registry) *boardMetrics {
	b := &boardMetrics{
		high: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reclaimer_filesystem_high_watermark_ratio", Help: "disk_high of each managed filesystem with a disk budget."}, []string{"path"}),
		low: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reclaimer_filesystem_low_watermark_ratio", Help: "disk_low of each managed filesystem with a disk budget."}, []string{"path"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reclaimer_actions_total", Help: "Actions applied, by step, backend and outcome (done, skipped, failed)."},
			[]string{"step", "backend", "outcome"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reclaimer_passes_total", Help: "Passes that applied (dry runs aside), by trigger and result (ok, failed: the pass itself failed)."},
			[]string{"trigger", "result"}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reclaimer_last_pass_timestamp_seconds", Help: "When the last pass that applied ended (Unix time; 0 before the first)."}),
		interval: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reclaimer_pass_interval_seconds", Help: "The configured time between two passes ([server] interval)."}),
		unreadable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reclaimer_source_unreadable_passes", Help: "Full passes in a row that could not list the source (0 once listed)."},
			[]string{"source", "backend"}),
		missed: map[[2]string]int{},
	}
	reg.MustRegister(b.high, b.low, b.actions, b.passes, b.lastPass, b.interval, b.unreadable)
	return b
}

// observe records one pass (w is nil for a narrowed one). It also gives
// every step of every listed backend its freed and failed series at zero,
// so that a rate or an alert over them has a series before the first
// action.
func (b *boardMetrics) observe(m *metrics, rep ops.PassReport, w *engine.World, interval time.Duration, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.interval.Set(interval.Seconds())
	dry := rep.Request.DryRun
	if !dry {
		result := "ok"
		if rep.Err != nil {
			result = "failed"
		}
		b.passes.WithLabelValues(rep.Request.Trigger, result).Inc()
		b.lastPass.Set(float64(now.UnixNano()) / 1e9)
	}
	if res := rep.Applied; res != nil {
		for _, r := range res.Results {
			b.actions.WithLabelValues(string(r.Step), r.Backend, string(r.Outcome)).Inc()
		}
	}
	if w == nil {
		return
	}
	b.high.Reset()
	b.low.Reset()
	for _, fs := range w.Filesystems {
		if fs.High > 0 {
			b.high.WithLabelValues(fs.Path).Set(fs.High)
			b.low.WithLabelValues(fs.Path).Set(fs.Low)
		}
	}
	for _, l := range w.Sources {
		name := l.Source.Backend.Name()
		for _, step := range backend.Steps {
			m.freed.WithLabelValues(string(step), name)
			m.failed.WithLabelValues(string(step), name)
			for _, o := range []plan.Outcome{plan.Done, plan.Failed} {
				b.actions.WithLabelValues(string(step), name, string(o))
			}
		}
		if dry {
			continue // a dry run (a status poll) is no pass of the loop
		}
		k := [2]string{l.Source.Name, name}
		if l.OK {
			b.missed[k] = 0
		} else {
			b.missed[k]++
		}
		b.unreadable.WithLabelValues(k[0], k[1]).Set(float64(b.missed[k]))
	}
}
