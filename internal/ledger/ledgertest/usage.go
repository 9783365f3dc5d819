package ledgertest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

func testUsageSamples(t *testing.T, s ledger.Store) {
	ctx := context.Background()
	sample := func(host, path string, d time.Duration, used int64, rec map[string]int64) ledger.UsageSample {
		return ledger.UsageSample{Host: host, Path: path, At: at(d).In(elsewhere), UsedBytes: used, AvailBytes: 1000 - used,
			TotalBytes: 1000, ReclaimableBytes: rec}
	}
	if err := s.RecordUsage(ctx, nil); err != nil {
		t.Fatalf("RecordUsage(nil): %v", err)
	}
	batch := []ledger.UsageSample{
		sample("", "/srv", 0, 100, map[string]int64{"caches": 10, "dependencies": 20}),
		sample("", "/data", 0, 500, nil),
		sample("", "/srv", time.Hour, 200, map[string]int64{"archive": 5}),
		sample("b", "/srv", time.Hour, 900, nil),
		sample("", "/srv", 2*time.Hour, 250, nil),
		sample("", "/srv", 2*time.Hour, 300, nil), // the same host, path and time: the last wins
	}
	if err := s.RecordUsage(ctx, batch); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListUsage(ctx, ledger.UsageFilter{Path: "/srv"})
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.UsageSample{batch[0], batch[2], batch[5]}
	for i := range want {
		want[i].At = want[i].At.UTC()
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListUsage(/srv) =\n%+v\nwant (oldest first, times in UTC, the last of a repeated sample)\n%+v", got, want)
	}
	// Recording a sample again replaces it.
	again := sample("", "/srv", time.Hour, 222, map[string]int64{"caches": 1})
	if err := s.RecordUsage(ctx, []ledger.UsageSample{again}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.ListUsage(ctx, ledger.UsageFilter{Path: "/srv", Since: at(time.Hour), Limit: 1})
	if len(got) != 1 || got[0].UsedBytes != 300 {
		t.Fatalf("the newest since an hour, limit 1: %+v, want the sample of 2h", got)
	}
	got, _ = s.ListUsage(ctx, ledger.UsageFilter{Path: "/srv", Since: at(time.Hour)})
	if len(got) != 2 || got[0].UsedBytes != 222 || got[0].ReclaimableBytes["caches"] != 1 || len(got[0].ReclaimableBytes) != 1 {
		t.Fatalf("after recording again: %+v", got)
	}
	all, _ := s.ListUsage(ctx, ledger.UsageFilter{AnyHost: true})
	other, _ := s.ListUsage(ctx, ledger.UsageFilter{Host: "b"})
	if len(all) != 5 || len(other) != 1 || other[0].UsedBytes != 900 {
		t.Fatalf("every host: %d samples, host b: %+v", len(all), other)
	}
	for i := 1; i < len(all); i++ {
		if all[i].At.Before(all[i-1].At) {
			t.Fatalf("not oldest first: %+v", all)
		}
	}
	n, err := s.PruneUsage(ctx, at(time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("PruneUsage before 1h = %d, %v; want the 2 samples at 0", n, err)
	}
	all, _ = s.ListUsage(ctx, ledger.UsageFilter{AnyHost: true})
	if len(all) != 3 {
		t.Fatalf("after the prune: %+v", all)
	}
	for _, bad := range []ledger.UsageSample{
		{Path: "", At: t0},
		{Path: "/x"},
		{Path: "/x", At: t0, UsedBytes: -1},
		{Path: "/x", At: t0, ReclaimableBytes: map[string]int64{"caches": -1}},
		{Path: "/x", At: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if err := s.RecordUsage(ctx, []ledger.UsageSample{sample("", "/ok", 9*time.Hour, 1, nil), bad}); err == nil {
			t.Errorf("RecordUsage(%+v): no error", bad)
		}
	}
	if got, _ := s.ListUsage(ctx, ledger.UsageFilter{Path: "/ok"}); len(got) != 0 {
		t.Errorf("a batch with an invalid sample wrote %+v", got)
	}
}
