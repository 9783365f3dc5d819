package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/views"
)

// MarkRequest changes what the ledger decides about runtimes: exactly one
// of its changes, for every runtime named, or for none.
type MarkRequest struct {
	Runtimes []Ref
	// Pin pins with this reason (may be empty: set PinSet).
	Pin    string
	PinSet bool
	Unpin  bool
	// Lease keeps the runtimes until LeaseUntil, or LeaseFor from now;
	// never past a runtime's lifetime cap.
	LeaseUntil time.Time
	LeaseFor   time.Duration
	// Retention sets each runtime's own retention (0: never archived);
	// RetentionDefault goes back to its source's.
	Retention        *time.Duration
	RetentionDefault bool
	// Touch records activity now.
	Touch bool
}

func (r MarkRequest) changes() int {
	n := 0
	for _, set := range []bool{r.PinSet, r.Unpin, !r.LeaseUntil.IsZero() || r.LeaseFor > 0, r.Retention != nil || r.RetentionDefault, r.Touch} {
		if set {
			n++
		}
	}
	return n
}

// Mark pins, unpins, leases, sets the retention of, or touches every
// runtime named; a name that matches nothing (or more than one runtime), or
// a runtime archived, refuses them all before anything is written.
func (a *App) Mark(ctx context.Context, req MarkRequest) ([]views.Marked, error) {
	switch {
	case len(req.Runtimes) == 0:
		return nil, Input("runtimes", "which runtimes?")
	case req.changes() != 1:
		return nil, Input("", "give exactly one change: pin, unpin, lease, retention or touch")
	case req.RetentionDefault && req.Retention != nil:
		return nil, Input("retention", "give a retention or the default, not both")
	case req.Retention != nil && *req.Retention < 0:
		return nil, Input("retention", "a retention must not be negative (0: never archived)")
	}
	now := a.now()
	until := req.LeaseUntil
	if req.LeaseFor > 0 {
		until = now.Add(req.LeaseFor)
	}
	if (req.LeaseFor > 0 || !req.LeaseUntil.IsZero()) && !until.After(now) {
		return nil, Input("until", "until %s is not in the future", until.Format(time.RFC3339))
	}
	rs, err := a.resolveAll(ctx, "runtimes", req.Runtimes, true)
	if err != nil {
		return nil, err
	}
	// A lease that no runtime may have is refused for all, before any
	// is written.
	leases := make([]policyLease, len(rs))
	if !until.IsZero() {
		for i, r := range rs {
			if leases[i], err = a.capLease(ctx, r.key, until, now); err != nil {
				return nil, err
			}
			if err := checkTime("until", leases[i].until); err != nil {
				return nil, err
			}
		}
	}
	var out []views.Marked
	for i, r := range rs {
		m, err := a.markOne(ctx, r.key, req, leases[i], now)
		if err != nil {
			return out, fmt.Errorf("%s: %w (%d of %d changed before this)", r.key, err, i, len(rs))
		}
		out = append(out, m)
	}
	return out, nil
}

// journalCancel records that a notice in force was canceled by a pin,
// lease or activity: a "canceled" notice, and a journal entry (`log`
// shows it) whose reason says what canceled it.
func (a *App) journalCancel(ctx context.Context, k backend.Key, was ledger.RuntimeRecord, cause string, now time.Time) error {
	msg := fmt.Sprintf("%s due %s canceled: %s", was.ScheduledStep, was.ScheduledDue.UTC().Format(time.RFC3339), cause)
	if _, err := a.store.RecordNotice(ctx, ledger.Notice{Key: k, Kind: "canceled", Step: was.ScheduledStep, Due: was.ScheduledDue,
		At: now, Message: cause}); err != nil {
		return fmt.Errorf("journal the cancellation: %w", err)
	}
	id, err := a.store.AppendIntent(ctx, ledger.Intent{Key: k, Step: "cancel", Reason: msg, At: now})
	if err == nil {
		err = a.store.RecordOutcome(ctx, id, ledger.Outcome{Result: ledger.ResultDone, Reason: msg, At: now})
	}
	if err != nil {
		return fmt.Errorf("journal the cancellation: %w", err)
	}
	return nil
}

// forgetDryRun drops the dry run Status reuses: it showed a notice that
// is no longer in force.
func (a *App) forgetDryRun() {
	a.stateMu.Lock()
	a.lastDry = nil
	a.stateMu.Unlock()
}

type policyLease struct {
	until  time.Time
	capped bool
}

// capLease applies the lease rule (policy.CapLease): never past the
// runtime's lifetime cap, counted from its creation (a container's current
// start), or its first sighting when its backend does not tell.
func (a *App) capLease(ctx context.Context, k backend.Key, until, now time.Time) (policyLease, error) {
	rec, err := a.store.Runtime(ctx, k)
	if err != nil {
		return policyLease{}, err
	}
	s := a.setupNow()
	src, ok := s.sourceOf(k.Source)
	if !ok {
		return policyLease{until: until}, nil
	}
	born := rec.FirstSeen
	if w, err := s.engine.Observe(ctx, engine.ObserveOptions{Only: []backend.Key{k}}); err == nil {
		if seen := w.Find(k); seen != nil && !seen.Runtime.CreatedAt.IsZero() {
			born = seen.Runtime.CreatedAt
		}
	}
	lease, capped, ok := policy.CapLease(src.Settings, born, until, now)
	if !ok {
		return policyLease{}, fmt.Errorf("runtime %s is past its lifetime cap (max_lifetime %s since %s): no lease can keep it: %w",
			k, DurationText(src.Settings.MaxLifetime), born.Format(time.RFC3339), backend.ErrConflict)
	}
	return policyLease{until: lease.UTC(), capped: capped}, nil
}

func (a *App) markOne(ctx context.Context, k backend.Key, req MarkRequest, lease policyLease, now time.Time) (views.Marked, error) {
	m := views.Marked{}
	var change func(r *ledger.RuntimeRecord)
	// cause is set by a change that protects the runtime from every step
	// (pin, lease): a notice in force is canceled with it, at once.
	var cause string
	switch {
	case req.Touch:
		if err := a.record(ctx, []ledger.Activity{{Key: k, At: now}}); err != nil {
			return m, err
		}
		// Activity does not cancel a notice here: an orphan's stays in
		// force whatever its activity; the next pass decides.
		m.Message = "activity recorded at " + now.Format(time.RFC3339)
	case req.PinSet:
		m.Message = "pinned: never touched until unpinned"
		change = func(r *ledger.RuntimeRecord) {
			// Pinning again without a reason keeps the reason given before.
			if req.Pin != "" || !r.Pinned {
				r.PinReason = req.Pin
			}
			r.Pinned = true
			cause = "pinned"
			if r.PinReason != "" {
				cause += ": " + r.PinReason
			}
		}
	case req.Unpin:
		m.Message = "unpinned"
		change = func(r *ledger.RuntimeRecord) { r.Pinned, r.PinReason = false, "" }
	case !lease.until.IsZero():
		m.Message, m.Capped = "leased until "+lease.until.Format(time.RFC3339), lease.capped
		if lease.capped {
			m.Message += " (capped by max_lifetime)"
		}
		change = func(r *ledger.RuntimeRecord) { r.LeaseUntil = lease.until }
		cause = "leased until " + lease.until.Format(time.RFC3339)
	case req.RetentionDefault:
		m.Message = "retention back to its source's"
		change = func(r *ledger.RuntimeRecord) { r.RetentionOverride = nil }
	case req.Retention != nil:
		d := *req.Retention
		m.Message = "retention set to " + DurationText(d)
		if d == 0 {
			m.Message = "retention: never archived"
		}
		change = func(r *ledger.RuntimeRecord) { r.RetentionOverride = &d }
	}
	var canceled ledger.RuntimeRecord // the notice canceled, if any
	if change != nil {
		_, err := a.store.Update(ctx, k, func(r *ledger.RuntimeRecord) error {
			if change != nil {
				change(r)
			}
			canceled = ledger.RuntimeRecord{}
			if cause != "" && r.ScheduledStep != "" {
				canceled.ScheduledStep, canceled.ScheduledDue, canceled.ScheduledAt = r.ScheduledStep, r.ScheduledDue, r.ScheduledAt
				r.ScheduledStep, r.ScheduledAt, r.ScheduledDue = "", time.Time{}, time.Time{}
			}
			return nil
		})
		if err != nil {
			return m, err
		}
	}
	if canceled.ScheduledStep != "" {
		if err := a.journalCancel(ctx, k, canceled, cause, now); err != nil {
			return m, err
		}
		m.Message += fmt.Sprintf("; the %s due %s is canceled", canceled.ScheduledStep, canceled.ScheduledDue.UTC().Format(time.RFC3339))
		a.forgetDryRun()
	}
	if !lease.until.IsZero() && a.opts.OnProtect != nil {
		a.opts.OnProtect(k)
	}
	v, err := a.runtimeOf(ctx, k)
	if err != nil {
		return m, err
	}
	m.Runtime = *v
	return m, nil
}

// record writes activity through Options.Activity (the daemon's buffer),
// else to the ledger.
func (a *App) record(ctx context.Context, batch []ledger.Activity) error {
	if a.opts.Activity != nil {
		return a.opts.Activity(ctx, batch)
	}
	return a.store.RecordActivity(ctx, batch)
}

func checkTime(field string, t time.Time) error {
	if !t.IsZero() && (t.Before(ledger.MinTime) || t.After(ledger.MaxTime)) {
		return Input(field, "%s %s is outside the times a ledger keeps (%s to %s)", field, t.Format(time.RFC3339),
			ledger.MinTime.Format(time.RFC3339), ledger.MaxTime.Format(time.RFC3339))
	}
	return nil
}

// ReportActivity records that a runtime was in use at at (zero: now). A
// host may report a runtime no pass has seen yet when it names its
// backend (and source, where the backend has several); an archived one is
// ErrArchived.
func (a *App) ReportActivity(ctx context.Context, ref Ref, at time.Time) error {
	at, err := a.activityTime("at", at)
	if err != nil {
		return err
	}
	k, err := a.activityKey(ctx, ref)
	if err != nil {
		return err
	}
	return a.record(ctx, []ledger.Activity{{Key: k, At: at}})
}

// LoadKeys reads the key and state of every runtime in the ledger once, so
// that activity reports (the hot path) and names resolve without a ledger
// read each. A daemon calls it when it starts; until it returns, a report
// of a runtime not known yet reads its record.
func (a *App) LoadKeys(ctx context.Context) error { return a.keys.load(ctx, a.store) }

// ActivityReport is one report of a batch.
type ActivityReport struct {
	Backend, Source, ID string
	At                  time.Time
}

// ReportActivityBatch records many reports at once. Reports of archived or
// deleted runtimes are dropped (nothing to keep alive) and named in
// Ignored; reports of runtimes no pass has seen are recorded (a host may
// report before the first pass) and named in Unknown. A report that
// cannot be taken (an unknown backend, a time in the future) refuses the
// batch, naming it.
func (a *App) ReportActivityBatch(ctx context.Context, reports []ActivityReport) (views.ActivityAccepted, error) {
	var ans views.ActivityAccepted
	if err := a.keys.load(ctx, a.store); err != nil {
		return ans, err
	}
	batch := make([]ledger.Activity, 0, len(reports))
	for i, r := range reports {
		field := fmt.Sprintf("reports[%d]", i)
		k, err := a.keyOf(r.Backend, r.Source, r.ID, field)
		if err != nil {
			return views.ActivityAccepted{}, err
		}
		at, err := a.activityTime(field+".at", r.At)
		if err != nil {
			return views.ActivityAccepted{}, err
		}
		ref := views.ActivityRef{Backend: k.Backend, Source: k.Source, ID: k.ID}
		state, ok := a.keys.get(k)
		switch {
		case !ok || state == "":
			ans.Unknown = append(ans.Unknown, ref)
		case liveState(resolved{k, state}) != nil:
			ref.State = state
			ans.Ignored = append(ans.Ignored, ref)
			continue
		}
		batch = append(batch, ledger.Activity{Key: k, At: at})
	}
	if err := a.record(ctx, batch); err != nil {
		return views.ActivityAccepted{}, err
	}
	ans.Accepted = len(batch)
	return ans, nil
}

// activityKey finds the runtime of an activity report: with its backend
// given, a runtime no pass has seen yet is accepted (a host may report
// before the first pass).
func (a *App) activityKey(ctx context.Context, ref Ref) (backend.Key, error) {
	if ref.Backend == "" {
		rs, err := a.resolveAll(ctx, "id", []Ref{ref}, true)
		if err != nil {
			return backend.Key{}, err
		}
		return rs[0].key, nil
	}
	k, err := a.keyOf(ref.Backend, ref.Source, ref.Name, "")
	if err != nil {
		return backend.Key{}, err
	}
	if state, ok := a.keys.get(k); ok {
		return k, liveState(resolved{k, state})
	}
	if a.keys.isLoaded() {
		// The whole ledger was read (a daemon reads it at start, see
		// LoadKeys): what it lacked, and no pass has seen since, is a
		// runtime not seen yet. No read per new runtime on the hot path.
		a.keys.set(k, "")
		return k, nil
	}
	rec, err := a.store.Runtime(ctx, k)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		a.keys.set(k, "") // not seen yet: accepted, and cached so the next report skips the read
		return k, nil
	case err != nil:
		return k, err
	}
	a.keys.set(k, rec.State)
	return k, liveState(resolved{k, rec.State})
}

// keyOf is the key a host names by backend (and source where the backend
// has several) and ID.
func (a *App) keyOf(backendName, source, id, field string) (backend.Key, error) {
	if err := checkName(join(field, "id"), id); err != nil {
		return backend.Key{}, err
	}
	s := a.setupNow()
	var match []string
	for _, src := range s.sources {
		if src.Backend.Name() == backendName && (source == "" || src.Name == source) {
			match = append(match, src.Name)
		}
	}
	switch {
	case len(match) == 1:
		return backend.Key{Source: match[0], Backend: backendName, ID: id}, nil
	case len(match) > 1:
		return backend.Key{}, Input(join(field, "source"), "backend %q has %d sources (%v): give source", backendName, len(match), match)
	case source != "" && s.cfg.Fleet() && isReplicaSource(source):
		// Another replica's local source: every replica takes its hosts'
		// reports, and the owner reads them from the shared ledger.
		return backend.Key{Source: source, Backend: backendName, ID: id}, nil
	case source != "":
		return backend.Key{}, Input(join(field, "source"), "no configured source %q of backend %q", source, backendName)
	}
	return backend.Key{}, Input(join(field, "backend"), "no configured source has backend %q", backendName)
}

func join(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}

// activityTime defaults to now and refuses the future (a clock a minute
// ahead is forgiven and clamped).
func (a *App) activityTime(field string, at time.Time) (time.Time, error) {
	now := a.now()
	switch {
	case at.IsZero():
		return now, nil
	case at.After(now.Add(time.Minute)):
		return time.Time{}, Input(field, "%s %s is in the future", field, at.Format(time.RFC3339))
	case at.After(now):
		return now, nil
	case at.Before(ledger.MinTime):
		return time.Time{}, Input(field, "%s %s is too far in the past", field, at.Format(time.RFC3339))
	}
	return at.UTC(), nil
}

// checkName refuses an empty or oversized name, or one with NUL.
func checkName(field, s string) error {
	switch {
	case s == "":
		return Input(field, "%s is required", field)
	case len(s) > 512:
		return Input(field, "%s is longer than 512 bytes", field)
	case containsNUL(s):
		return Input(field, "%s %q: must not contain NUL", field, s)
	}
	return nil
}

func containsNUL(s string) bool {
	for i := range len(s) {
		if s[i] == 0 {
			return true
		}
	}
	return false
}
