package native

import (
	"fmt"
	"slices"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// Tolerance is how far a provider's value may be from the wanted one and
// still count as in step: providers keep minutes or seconds, and a pass
// runs every few minutes.
const Tolerance = time.Minute

// Input is everything Want needs about one runtime.
type Input struct {
	Now      time.Time
	Settings policy.Settings
	Runtime  backend.Runtime
	// Activity is the newest activity the ledger holds for the runtime.
	Activity time.Time
	// ProtectedUntil is the end of the latest lease or hold (zero: none).
	ProtectedUntil time.Time
	Pinned         bool
	// Provider is what the provider has now (its Can and DeadlineStep
	// shape what may be wanted).
	Provider backend.Lifecycle
}

// Target is what the policy wants of one runtime's native settings.
type Target struct {
	// Lifecycle holds the wanted values of the settings in Opinions.
	Lifecycle backend.Lifecycle
	// Opinions names the settings the policy has a value for; the others
	// stay as the provider has them.
	Opinions []string
	// Touch restarts the provider's idle timer (a lease or hold).
	Touch bool
	// Notes explain choices in plain words.
	Notes []string
}

func (t *Target) want(name string) { t.Opinions = append(t.Opinions, name) }

// Has tells whether the policy has a value for setting name.
func (t Target) Has(name string) bool { return slices.Contains(t.Opinions, name) }

// Want derives the wanted settings of one runtime. It is pure.
func Want(in Input) Target {
	var t Target
	if in.Pinned || in.Runtime.Pinned != "" {
		t.Notes = append(t.Notes, "pinned: its settings are left as they are")
		return t
	}
	s := in.Settings
	can := func(name string) bool { return slices.Contains(in.Provider.Can, name) }
	capAt := time.Time{}
	if s.MaxLifetime > 0 && !in.Runtime.CreatedAt.IsZero() {
		capAt = in.Runtime.CreatedAt.Add(s.MaxLifetime)
	}
	protected := in.ProtectedUntil.After(in.Now)

	if s.IdleSuspend > 0 && (can(backend.TimerIdleSuspend) || in.Provider.IdleSuspend > 0) {
		t.Lifecycle.IdleSuspend = s.IdleSuspend
		t.want(backend.TimerIdleSuspend)
	}
	if s.IdleSuspend > 0 && in.Provider.IdlePause > 0 {
		// A pause is a suspend that keeps memory: kept where the provider
		// has it on, at the policy's idle time.
		t.Lifecycle.IdlePause = s.IdleSuspend
		t.want(backend.TimerIdlePause)
	}
	if s.Retention > 0 && (can(backend.TimerArchive) || in.Provider.Archive > 0) {
		// The provider counts from the suspension, the policy from the last
		// activity; the suspension comes idle_suspend after it.
		t.Lifecycle.Archive = max(s.Retention-s.IdleSuspend, time.Minute)
		t.want(backend.TimerArchive)
	}
	if can(backend.TimerDelete) || in.Provider.Delete > 0 || in.Provider.IsUnknown(backend.TimerDelete) {
		t.Lifecycle.Delete = 0
		t.want(backend.TimerDelete)
	}
	if !in.Provider.Deadline.IsZero() || can(backend.TimerDeadline) {
		deadline(&t, in, capAt, protected)
	}
	newer := in.Activity.After(in.Runtime.LastActivity.Add(Tolerance)) && !in.Runtime.LastActivity.IsZero()
	if (protected || newer) && can(backend.TimerTouch) && in.Runtime.State.Active() {
		if !capAt.IsZero() && !in.Now.Before(capAt) {
			t.Notes = append(t.Notes, "leased or held, but over max_lifetime: its idle timer is not extended")
		} else {
			t.Touch = true
			if protected {
				t.Notes = append(t.Notes, "leased or held until "+in.ProtectedUntil.UTC().Format(time.RFC3339)+": its idle timer is restarted")
			} else {
				t.Notes = append(t.Notes, "the ledger saw activity the provider did not: its idle timer is restarted")
			}
		}
	}
	return t
}

// deadline wants an absolute timer: the last activity plus idle_suspend,
// later while a lease or hold lasts, never past the lifetime cap.
func deadline(t *Target, in Input, capAt time.Time, protected bool) {
	last := in.Activity
	if in.Runtime.LastActivity.After(last) {
		last = in.Runtime.LastActivity
	}
	var want time.Time
	if in.Settings.IdleSuspend > 0 && !last.IsZero() {
		want = last.Add(in.Settings.IdleSuspend)
	}
	if protected && in.ProtectedUntil.After(want) {
		want = in.ProtectedUntil
		t.Notes = append(t.Notes, "leased or held until "+in.ProtectedUntil.UTC().Format(time.RFC3339)+": its timeout is extended")
	}
	if want.IsZero() {
		return
	}
	if !capAt.IsZero() && want.After(capAt) {
		want = capAt
		t.Notes = append(t.Notes, "capped by max_lifetime at "+capAt.UTC().Format(time.RFC3339))
	}
	if !want.After(in.Now.Add(Tolerance)) {
		t.Notes = append(t.Notes, "due now: the loop suspends it, with its checks")
		return
	}
	t.Lifecycle.Deadline = want.UTC()
	t.want(backend.TimerDeadline)
}

// Drift compares one setting; kinds are "" (in step), "stricter" (the
// provider acts sooner than, or where, the policy would not), "looser"
// (later, or not at all: the loop covers it) and "unknown" (the provider
// did not say: not taken as off).
func Drift(name string, provider, want backend.Lifecycle) string {
	if provider.IsUnknown(name) {
		return "unknown"
	}
	if name == backend.TimerDeadline {
		p, w := provider.Deadline, want.Deadline
		switch {
		case p.IsZero():
			return "looser"
		case p.Before(w.Add(-Tolerance)):
			return "stricter"
		case p.After(w.Add(Tolerance)):
			return "looser"
		}
		return ""
	}
	p, w := durationOf(name, provider), durationOf(name, want)
	switch {
	case p == w:
		return ""
	case w == 0:
		return "stricter" // the provider acts; the policy would not
	case p == 0:
		return "looser"
	case p < w-Tolerance:
		return "stricter"
	case p > w+Tolerance:
		return "looser"
	}
	return ""
}

func durationOf(name string, l backend.Lifecycle) time.Duration {
	switch name {
	case backend.TimerIdleSuspend:
		return l.IdleSuspend
	case backend.TimerIdlePause:
		return l.IdlePause
	case backend.TimerArchive:
		return l.Archive
	case backend.TimerDelete:
		return l.Delete
	}
	return 0
}

// Describe prints one setting's value.
func Describe(name string, l backend.Lifecycle) string {
	if l.IsUnknown(name) {
		return "unknown (not reported)"
	}
	if name == backend.TimerDeadline {
		if l.Deadline.IsZero() {
			return "none"
		}
		return fmt.Sprintf("%s (then %s)", l.Deadline.UTC().Format(time.RFC3339), l.DeadlineStep)
	}
	d := durationOf(name, l)
	switch {
	case d == 0:
		return "off"
	case d == backend.Immediately:
		return "at once upon suspension"
	}
	return human(d)
}

func human(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
