package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/reclaimer/reclaimer/internal/clock"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
)

// metrics are the daemon's Prometheus series, in a registry of their own.
// No label carries a runtime id: cardinality stays bounded by backends,
// steps, states and filesystems.
type metrics struct {
	reg            *prometheus.Registry
	passDuration   *prometheus.HistogramVec
	freed          *prometheus.CounterVec
	failed         *prometheus.CounterVec
	runtimes       *prometheus.GaugeVec
	usage          *prometheus.GaugeVec
	problems       *prometheus.GaugeVec
	listed         *prometheus.GaugeVec
	activity       prometheus.Counter
	holdsTaken     prometheus.Counter
	notices        *prometheus.CounterVec
	requestLatency *prometheus.HistogramVec
	// In a fleet: whether this replica leads, and how often who leads
	// changed as this replica saw it.
	leader        prometheus.Gauge
	leaderChanges prometheus.Counter
	// board: the series of the Grafana board and the alerts (metrics_board.go).
	board *boardMetrics
}

func newMetrics(activeHolds func() float64) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		passDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "reclaimer_pass_duration_seconds", Help: "Time one pass took, plan and apply.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12)}, []string{"trigger", "dry_run"}),
		freed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reclaimer_freed_bytes_total", Help: "Bytes freed, by step and backend."}, []string{"step", "backend"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reclaimer_actions_failed_total", Help: "Actions that failed, by step and backend."}, []string{"step", "backend"}),
		runtimes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reclaimer_runtimes", Help: "Runtimes seen by the last pass, by state and backend."}, []string{"state", "backend"}),
		usage: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reclaimer_filesystem_usage_ratio", Help: "Used fraction of each managed filesystem at the last pass."}, []string{"path"}),
		problems: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reclaimer_problems", Help: "What the last full pass could not look at, by problem code (alert on any)."}, []string{"code"}),
		listed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reclaimer_source_listed", Help: "1 when the last full pass could list the source, 0 when not."}, []string{"source", "backend"}),
		activity: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reclaimer_activity_reports_total", Help: "Activity reports accepted."}),
		holdsTaken: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reclaimer_holds_taken_total", Help: "Holds taken through the API."}),
		notices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reclaimer_notices_total", Help: "Webhook deliveries, by event and result."}, []string{"event", "result"}),
		requestLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "reclaimer_http_request_duration_seconds", Help: "API request latency, by route and status.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10}}, []string{"route", "code"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reclaimer_leader", Help: "1 while this replica leads the fleet's remote sources, else 0."}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reclaimer_leader_changes_total", Help: "Changes of the fleet's leader seen by this replica (its own terms included)."}),
	}
	m.reg.MustRegister(m.passDuration, m.freed, m.failed, m.runtimes, m.usage, m.problems, m.listed, m.activity, m.holdsTaken, m.notices,
		m.requestLatency, m.leader, m.leaderChanges,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reclaimer_holds_active", Help: "Holds in force now."}, activeHolds))
	m.board = newBoardMetrics(m.reg)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// observePass records one pass.
func (m *metrics) observePass(trigger string, dryRun bool, took time.Duration, w *engine.World, p *plan.Plan, res *plan.Applied) {
	dry := "false"
	if dryRun {
		dry = "true"
	}
	m.passDuration.WithLabelValues(trigger, dry).Observe(took.Seconds())
	if res != nil {
		for _, r := range res.Results {
			switch r.Outcome {
			case plan.Done:
				m.freed.WithLabelValues(string(r.Step), r.Backend).Add(float64(max(r.FreedBytes, 0)))
			case plan.Failed:
				m.failed.WithLabelValues(string(r.Step), r.Backend).Inc()
			}
		}
	}
	if w == nil {
		return
	}
	m.problems.Reset()
	if p != nil {
		for _, pr := range p.Problems {
			m.problems.WithLabelValues(string(pr.Code)).Inc()
		}
	}
	m.listed.Reset()
	for _, l := range w.Sources {
		up := 0.0
		if l.OK {
			up = 1
		}
		m.listed.WithLabelValues(l.Source.Name, l.Source.Backend.Name()).Set(up)
	}
	m.runtimes.Reset()
	for _, s := range w.Runtimes {
		m.runtimes.WithLabelValues(string(s.Runtime.State), s.Runtime.Backend).Inc()
	}
	for _, g := range w.Gone {
		m.runtimes.WithLabelValues(g.State, g.Key.Backend).Inc()
	}
	// What this pass removed is counted in its new state.
	if res != nil {
		for _, r := range res.Results {
			s := w.Find(r.Key())
			if r.Outcome != plan.Done || !r.Step.Destructive() || s == nil {
				continue
			}
			m.runtimes.WithLabelValues(string(s.Runtime.State), r.Backend).Dec()
			state := "deleted"
			if r.Step == "archive" {
				state = "archived"
			}
			m.runtimes.WithLabelValues(state, r.Backend).Inc()
		}
	}
	m.usage.Reset()
	for _, fs := range w.Filesystems {
		m.usage.WithLabelValues(fs.Path).Set(fs.Fraction)
	}
}

// activeHoldsFunc counts holds in force, for the gauge (read at scrape).
func activeHoldsFunc(store ledger.Store, c clock.Clock) func() float64 {
	return func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs, err := store.ListHolds(ctx, ledger.HoldFilter{Now: c.Now()})
		if err != nil {
			return -1
		}
		return float64(len(hs))
	}
}
