package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/reclaimer/reclaimer/internal/clock"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

var metricName = regexp.MustCompile(`\breclaimer_[a-z0-9_]+`)

// boardMetricNames are the metrics the Grafana board's queries name.
func boardMetricNames(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "reclaimer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &board); err != nil {
		t.Fatalf("deploy/grafana/reclaimer.json: %v", err)
	}
	if board.UID == "" || board.Title == "" {
		t.Fatalf("the board has no uid or title")
	}
	var names []string
	titles := map[string]bool{}
	for _, p := range board.Panels {
		titles[p.Title] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			found := metricName.FindAllString(q.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: query %q names no reclaimer metric", p.Title, q.Expr)
			}
			names = append(names, found...)
		}
	}
	for _, v := range board.Templating.List {
		names = append(names, metricName.FindAllString(v.Definition, -1)...)
	}
	// What the board is for.
	for _, want := range []string{"Filesystem usage against watermarks", "Freed by step", "Pass duration", "Actions by outcome",
		"Sources with problems", "Activity reports per second", "Holds", "Leader"} {
		if !titles[want] {
			t.Errorf("the board has no panel %q", want)
		}
	}
	return names
}

// alertMetricNames are the metrics the alerting rules name.
func alertMetricNames(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(data, &rules); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yaml: %v", err)
	}
	var names []string
	alerts := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: an alert needs a name, an expression, a severity and a summary", r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			alerts[r.Alert] = r.For + " " + r.Expr
			names = append(names, metricName.FindAllString(r.Expr, -1)...)
			for _, a := range r.Annotations {
				names = append(names, metricName.FindAllString(a, -1)...)
			}
		}
	}
	// The four it must have: usage above the high watermark for 15 minutes, a
	// source unreadable for 3 passes, passes failing, no pass for 3
	// intervals.
	for name, want := range map[string]string{
		"ReclaimerFilesystemAboveHighWatermark": "15m reclaimer_filesystem_usage_ratio > on (instance, job, path) reclaimer_filesystem_high_watermark_ratio",
		"ReclaimerSourceUnreadable":             " reclaimer_source_unreadable_passes >= 3",
		"ReclaimerPassesFailing":                `reclaimer_passes_total{result="failed"}`,
		"ReclaimerNoPass":                       "time() - reclaimer_last_pass_timestamp_seconds > 3 * reclaimer_pass_interval_seconds",
	} {
		if got, ok := alerts[name]; !ok || !strings.Contains(got, want) {
			t.Errorf("alert %s: %q, want it to contain %q", name, got, want)
		}
	}
	return names
}

// TestDeployedBoardAndAlertsNameRealMetrics: every metric the Grafana
// board and the alerting rules name is in the /metrics of a real daemon
// that ran passes over a run folder with caches (freed, actions done),
// a repository that is gone (a source unreadable for three passes),
// a webhook, a hold and an activity report.
func TestDeployedBoardAndAlertsNameRealMetrics(t *testing.T) {
	names := append(boardMetricNames(t), alertMetricNames(t)...)
	slices.Sort(names)
	names = slices.Compact(names)

	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	runs := runFolders(t, dir, "r1", "r2")
	testtree.Write(t, filepath.Join(runs, "r1", "persistence", ".cache", "blob"), strings.Repeat("c", 64<<10))
	gone := filepath.Join(dir, "gone")
	delivered := make(chan struct{}, 8)
	fake := clock.NewFake(time.Now())
	h := startDaemon(t, dir, writeConfig(t, dir, "", "[[dirs]]\nroot = \""+runs+"\"\nhome = \"persistence\"\ndisk_high = 0.999\ndisk_low = 0.998\n"+
		"[[worktrees]]\nrepo = \""+gone+"\"\n[[notify]]\nurl = \""+hook.URL+"\"\n"),
		server.Options{Clock: fake, Events: func(e server.Event) {
			if e.Kind == "delivery" {
				select {
				case delivered <- struct{}{}:
				default:
				}
			}
		}})
	if p := h.waitPass("start"); p.Applied == nil || p.Applied.FreedBytes <= 0 {
		t.Fatalf("the start pass freed nothing: %+v", p.Applied)
	}
	for range 2 {
		fake.BlockUntil(2)
		fake.Advance(time.Hour)
		h.waitPass("timer")
	}
	select {
	case <-delivered:
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook delivery")
	}
	if resp, err := h.api.TakeHoldWithResponse(h.ctx(), "r2", nil, openapi.HoldRequest{Holder: "host-1", Ttl: "10m"}); err != nil || resp.JSON201 == nil {
		t.Fatalf("hold: %v %s", err, body(resp))
	}
	if resp, err := h.api.ReportActivityWithResponse(h.ctx(), "r2", nil, openapi.Activity{At: fake.Now().Add(-time.Minute)}); err != nil || status(resp) != 204 {
		t.Fatalf("activity: %v %s", err, body(resp))
	}

	req, _ := http.NewRequest("GET", h.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	exported := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		exported[name] = true
	}
	if len(names) < 15 {
		t.Fatalf("only %d metrics named: %v", len(names), names)
	}
	for _, n := range names {
		if !exported[n] {
			t.Errorf("%s is named by deploy/ but a daemon does not export it", n)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", data)
	}
	if !strings.Contains(string(data), `reclaimer_source_unreadable_passes{backend="worktree",source="worktrees:`+gone+`"} 3`) {
		t.Errorf("the gone repository is not unreadable for 3 passes:\n%s", grep(string(data), "unreadable"))
	}
	if !strings.Contains(string(data), `reclaimer_actions_total{backend="dir",outcome="done",step="caches"} 1`) {
		t.Errorf("the caches action is not counted done:\n%s", grep(string(data), "actions_total"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
