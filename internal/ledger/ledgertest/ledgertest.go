// Package ledgertest is the conformance suite every ledger.Store must pass.
// It is the executable form of the contract in package ledger: a store that
// passes it can replace another without the engine noticing.
//
// A store's own test calls Run with a function that opens a fresh, empty
// store; Run closes each store when its subtest ends. Run it under -race:
// several subtests write from many goroutines at once.
package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// Run runs every conformance subtest against stores made by open. Each
// subtest gets its own store, and subtests run in parallel.
func Run(t *testing.T, open func(t *testing.T) ledger.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s ledger.Store)
	}{
		{"Runtimes/ObserveAndGet", testObserveAndGet},
		{"Runtimes/NotFound", testRuntimeNotFound},
		{"Runtimes/ObserveKeepsEngineFields", testObserveKeepsEngineFields},
		{"Runtimes/ObserveWithoutStateKeepsState", testObserveWithoutStateKeepsState},
		{"Runtimes/OlderObservationIgnored", testOlderObservationIgnored},
		{"Runtimes/ObserveBatchIsAtomic", testObserveBatchIsAtomic},
		{"Runtimes/ListOrderAndFilter", testListOrderAndFilter},
		{"Runtimes/Pagination", testPagination},
		{"Runtimes/StatesAndDecided", testStatesAndDecided},
		{"Runtimes/UpdateSetsAndClears", testUpdateSetsAndClears},
		{"Runtimes/UpdateWritesNothingOnError", testUpdateWritesNothingOnError},
		{"Runtimes/SourcesAreDistinct", testSourcesAreDistinct},
		{"Activity/KeepsNewest", testActivityKeepsNewest},
		{"Activity/BatchIsAtomic", testActivityBatchIsAtomic},
		{"Holds/Lifecycle", testHoldLifecycle},
		{"Holds/RenewExpiredOrUnknown", testRenewExpiredOrUnknown},
		{"Holds/OtherRuntime", testHoldOtherRuntime},
		{"Holds/ListAcrossRuntimes", testHoldsAcrossRuntimes},
		{"Holds/Prune", testPruneHolds},
		{"Archives/RecordAndRead", testArchives},
		{"Notices/RecordAndList", testNotices},
		{"Notices/Outbox", testOutbox},
		{"Usage/RecordListPrune", testUsageSamples},
		{"Journal/IntentsAndOutcomes", testJournal},
		{"Journal/Pagination", testJournalPagination},
		{"Journal/OutcomeOfUnknownEntry", testOutcomeOfUnknownEntry},
		{"Journal/Prune", testPruneJournal},
		{"Journal/PruneConcurrently", testPruneJournalConcurrently},
		{"InvalidInputWritesNothing", testInvalidInput},
		{"TimesOutOfRange", testTimesOutOfRange},
		{"CanceledContext", testCanceledContext},
		{"CloseTwice", testCloseTwice},
		{"Concurrent/Writers", testConcurrentWriters},
		{"Concurrent/UpdatesDoNotLoseWrites", testConcurrentUpdates},
		{"Concurrent/ReadersDuringWrites", testReadersDuringWrites},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// t0 has nanoseconds on purpose: stores must keep them.
var t0 = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

// elsewhere is a zone east of UTC: times given in it must read back in UTC.
var elsewhere = time.FixedZone("UTC+5", 5*60*60)

func at(d time.Duration) time.Time { return t0.Add(d) }

func key(backend, id string) ledger.Key { return ledger.Key{Backend: backend, ID: id} }

func mustNil(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func mustBe(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func mustFail(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one", what)
	}
}

func mustEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

func observe(t *testing.T, s ledger.Store, obs ...ledger.Observation) {
	t.Helper()
	mustNil(t, "Observe", s.Observe(ctx(t), obs))
}

func getRuntime(t *testing.T, s ledger.Store, k ledger.Key) ledger.RuntimeRecord {
	t.Helper()
	r, err := s.Runtime(ctx(t), k)
	mustNil(t, "Runtime "+k.String(), err)
	return r
}

func listKeys(t *testing.T, s ledger.Store, f ledger.RuntimeFilter) []ledger.Key {
	t.Helper()
	rs, err := s.ListRuntimes(ctx(t), f)
	mustNil(t, "ListRuntimes", err)
	keys := []ledger.Key{}
	for _, r := range rs {
		keys = append(keys, r.Key)
	}
	return keys
}

// sameJSON compares two JSON documents by value: a store may reformat them.
func sameJSON(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	var g, w any
	mustNil(t, what+": decode got", json.Unmarshal(got, &g))
	mustNil(t, what+": decode want", json.Unmarshal(want, &w))
	mustEqual(t, what, g, w)
}

func ptr[T any](v T) *T { return &v }
