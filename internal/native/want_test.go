package native_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/native"
	"github.com/reclaimer/reclaimer/internal/policy"
)

func dur(t *rapid.T, label string) time.Duration {
	return time.Duration(rapid.IntRange(0, 30*24*60).Draw(t, label)) * time.Minute
}

// TestWantProperties: whatever the policy and ledger say, the wanted
// settings never let a provider delete, never move a deadline past the
// lifetime cap, and leave a pinned runtime alone.
func TestWantProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := t0.Add(dur(t, "now"))
		created := now.Add(-dur(t, "age"))
		in := native.Input{
			Now:      now,
			Settings: policy.Settings{IdleSuspend: dur(t, "idle"), Retention: dur(t, "retention"), MaxLifetime: dur(t, "lifetime")},
			Runtime: backend.Runtime{State: rapid.SampledFrom([]backend.State{backend.StateRunning, backend.StateSuspended}).Draw(t, "state"),
				CreatedAt: created, LastActivity: created.Add(dur(t, "last"))},
			Activity:       now.Add(-dur(t, "activity")),
			ProtectedUntil: now.Add(dur(t, "protected") - 15*24*time.Hour),
			Pinned:         rapid.Bool().Draw(t, "pinned"),
			Provider: backend.Lifecycle{Can: []string{backend.TimerIdleSuspend, backend.TimerArchive, backend.TimerDelete, backend.TimerDeadline, backend.TimerTouch},
				Delete: dur(t, "providerDelete"), Deadline: now.Add(dur(t, "providerDeadline"))},
		}
		got := native.Want(in)
		if in.Pinned && (len(got.Opinions) > 0 || got.Touch) {
			t.Fatalf("pinned runtime got opinions %v", got.Opinions)
		}
		if got.Lifecycle.Delete != 0 {
			t.Fatalf("wants a provider delete timer: %v", got.Lifecycle.Delete)
		}
		if got.Has(backend.TimerDeadline) {
			if in.Settings.MaxLifetime > 0 && got.Lifecycle.Deadline.After(created.Add(in.Settings.MaxLifetime)) {
				t.Fatalf("deadline %v past the cap", got.Lifecycle.Deadline)
			}
			if !got.Lifecycle.Deadline.After(now) {
				t.Fatalf("deadline %v not in the future", got.Lifecycle.Deadline)
			}
		}
		if got.Has(backend.TimerArchive) && got.Lifecycle.Archive <= 0 {
			t.Fatal("archive wanted without a value")
		}
	})
}
