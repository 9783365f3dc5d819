package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/clock"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/server"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestUsageSamplesAndForecast: each pass of the daemon samples its
// managed filesystem (a small tmpfs that an agent fills by 8 MiB an hour),
// GET /v1/usage gives the series, status the forecast at the recent rate,
// and samples older than usage_retention are pruned.
func TestUsageSamplesAndForecast(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	testtree.MountTmpfs(t, runs, "size=64m")
	runFolders(t, dir, "r1")
	fake := clock.NewFake(time.Now())
	h := startDaemon(t, dir, writeConfig(t, dir, "usage_retention = \"2h\"\n", "[[dirs]]\nroot = \""+runs+"\"\n"), server.Options{Clock: fake})
	h.waitPass("start")
	for i := range 4 {
		testtree.Write(t, filepath.Join(runs, "r1", "persistence", fmt.Sprintf("blob%d", i)), strings.Repeat("x", 8<<20))
		fake.BlockUntil(2)
		fake.Advance(time.Hour)
		if p := h.waitPass("timer"); p.Err != nil {
			t.Fatal(p.Err)
		}
	}
	resp, err := h.api.GetUsageWithResponse(h.ctx(), &openapi.GetUsageParams{Since: fake.Now().Add(-24 * time.Hour)})
	if err != nil || resp.JSON200 == nil || len(resp.JSON200.Filesystems) != 1 {
		t.Fatalf("GET /v1/usage: %v %s", err, body(resp))
	}
	series := resp.JSON200.Filesystems[0]
	// Five passes an hour apart; the retention of 2h pruned the first.
	if series.Path != runs || len(series.Samples) < 3 || len(series.Samples) > 4 {
		t.Fatalf("series %s: %d samples, want 3 or 4 (the oldest pruned)\n%s", series.Path, len(series.Samples), body(resp))
	}
	for i := 1; i < len(series.Samples); i++ {
		a, b := series.Samples[i-1], series.Samples[i]
		if !b.At.After(a.At) || b.UsedBytes < a.UsedBytes+7<<20 || b.TotalBytes != 64<<20 {
			t.Fatalf("samples not an hour and 8 MiB apart: %+v then %+v", a, b)
		}
	}
	if first := series.Samples[0].At; first.Before(fake.Now().Add(-2*time.Hour - time.Minute)) {
		t.Errorf("a sample of %s survived the retention of 2h (now %s)", first, fake.Now())
	}
	f := series.Forecast
	if f == nil || !f.Growing || f.RateBytesPerHour < 7<<20 || !strings.HasPrefix(f.Text, "full in about ") || f.FullInHours <= 0 {
		t.Fatalf("forecast %+v", f)
	}

	st, err := h.api.GetStatusWithResponse(h.ctx())
	if err != nil || st.JSON200 == nil || len(st.JSON200.Filesystems) != 1 {
		t.Fatalf("status: %v %s", err, body(st))
	}
	if sf := st.JSON200.Filesystems[0].Forecast; sf == nil || sf.Text != f.Text || !sf.FullAt.Equal(f.FullAt) {
		t.Errorf("status forecast %+v, usage forecast %+v", sf, f)
	}

	// In the ledger itself, under this host's name.
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "state", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	all, err := store.ListUsage(context.Background(), ledger.UsageFilter{AnyHost: true})
	if err != nil || len(all) != len(series.Samples) || all[0].Host == "" {
		t.Fatalf("ledger samples %+v, %v", all, err)
	}

	if bad, err := h.api.GetUsageWithResponse(h.ctx(), &openapi.GetUsageParams{Points: -5}); err != nil || status(bad) != 400 {
		t.Errorf("points=-5: %v %s", err, body(bad))
	}
}
