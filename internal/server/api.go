package server

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	spec "github.com/reclaimer/reclaimer/api"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// api implements the generated server interface.
type api struct{ d *Daemon }

var _ openapi.ServerInterface = (*api)(nil)

func bk(k ledger.Key) backend.Key { return backend.Key{Backend: k.Backend, ID: k.ID} }

func (a *api) GetHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, openapi.Health{Ok: true, Version: a.d.opts.Version})
}

func (a *api) GetOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := spec.JSON()
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}

// statusReuse is how long a dry run answers status: polling status must
// not turn into a pass each time.
const statusReuse = 10 * time.Second

// GetStatus reports from a dry run (a fresh one when the last is older
// than statusReuse and no pass is running).
func (a *api) GetStatus(w http.ResponseWriter, r *http.Request) {
	d := a.d
	d.stateMu.Lock()
	p := d.lastDry
	fresh := p != nil && time.Since(d.lastDryAt) < statusReuse
	d.stateMu.Unlock()
	if !fresh {
		var err error
		var ae *apiError
		switch p, _, err = d.pass(r.Context(), passRequest{trigger: "status", dryRun: true, wait: 50 * time.Millisecond}); {
		case errors.As(err, &ae) && ae.status == http.StatusLocked:
			// A pass is running: report what was last seen.
		case err != nil:
			writeError(w, err)
			return
		}
	}
	d.stateMu.Lock()
	world, last, next := d.world, d.lastPass, d.nextPass
	d.stateMu.Unlock()
	st := openapi.Status{Filesystems: []openapi.Filesystem{}, RuntimesByState: map[string]int{}, RuntimesByBackend: map[string]int{},
		ReclaimableBytesByStep: map[string]int64{}, NextPassAt: next}
	if last != nil {
		st.LastPass = *last
	}
	if world != nil {
		for _, fs := range world.Filesystems {
			st.Filesystems = append(st.Filesystems, openapi.Filesystem{Path: fs.Path, UsedBytes: int64(fs.UsedBytes),
				AvailBytes: int64(fs.AvailBytes), Fraction: fs.Fraction, High: fs.High, Low: fs.Low})
		}
		for _, s := range world.Runtimes {
			st.RuntimesByState[string(s.Runtime.State)]++
			st.RuntimesByBackend[s.Runtime.Backend]++
			if s.HasRecord && s.Record.ScheduledStep != "" {
				st.Scheduled = append(st.Scheduled, openapi.Notice{Runtime: s.Runtime.ID, Backend: s.Runtime.Backend,
					Step: openapi.Step(s.Record.ScheduledStep), Due: s.Record.ScheduledDue, Reason: "scheduled"})
			}
		}
		for _, g := range world.Gone {
			st.RuntimesByState[g.State]++
			st.RuntimesByBackend[g.Key.Backend]++
		}
		for _, pr := range world.Problems {
			st.Problems = append(st.Problems, openapi.Skipped{Runtime: pr.Runtime, Backend: pr.Backend, Reason: pr.Reason})
		}
	}
	if p != nil {
		for _, act := range p.Actions {
			st.ReclaimableBytesByStep[string(act.Step)] += act.Bytes
		}
	}
	writeJSON(w, http.StatusOK, st)
}

// cursor encodes a pagination key opaquely.
func encodeCursor(k ledger.Key) string {
	return base64.RawURLEncoding.EncodeToString([]byte(k.Backend + "\x00" + k.ID))
}

func decodeCursor(s string) (ledger.Key, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	b, id, ok := strings.Cut(string(raw), "\x00")
	if err != nil || !ok || b == "" || id == "" {
		return ledger.Key{}, badRequest("cursor", "cursor %q is not one this API returned", s)
	}
	return ledger.Key{Backend: b, ID: id}, nil
}

func pageLimit(field string, v, def int) (int, error) {
	switch {
	case v == 0:
		return def, nil
	case v < 1 || v > 1000:
		return 0, badRequest(field, "%s %d: between 1 and 1000", field, v)
	}
	return v, nil
}

func (a *api) ListRuntimes(w http.ResponseWriter, r *http.Request, params openapi.ListRuntimesParams) {
	ctx := r.Context()
	limit, err := pageLimit("limit", params.Limit, 100)
	if err != nil {
		writeError(w, err)
		return
	}
	f := ledger.RuntimeFilter{Backend: params.Backend, State: params.State, Limit: limit + 1}
	if params.Cursor != "" {
		if f.After, err = decodeCursor(params.Cursor); err != nil {
			writeError(w, err)
			return
		}
	}
	recs, err := a.d.raw.ListRuntimes(ctx, f)
	if err != nil {
		writeError(w, err)
		return
	}
	out := openapi.RuntimeList{Runtimes: []openapi.Runtime{}}
	if len(recs) > limit {
		recs = recs[:limit]
		out.NextCursor = encodeCursor(recs[limit-1].Key)
	}
	holds, err := a.d.holdsByKey(ctx, ledger.Key{})
	if err != nil {
		writeError(w, err)
		return
	}
	for _, rec := range recs {
		out.Runtimes = append(out.Runtimes, a.d.view(ctx, rec, holds))
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) holdsByKey(ctx context.Context, k ledger.Key) (map[ledger.Key]string, error) {
	hs, err := d.raw.ListHolds(ctx, ledger.HoldFilter{Key: k, Now: time.Now()})
	if err != nil {
		return nil, err
	}
	out := map[ledger.Key]string{}
	for _, h := range hs {
		out[h.Key] = h.Holder
	}
	return out, nil
}

// view is the API's picture of one runtime: the ledger's record, with
// what the last pass saw of it and the activity not yet written.
func (d *Daemon) view(ctx context.Context, rec ledger.RuntimeRecord, holds map[ledger.Key]string) openapi.Runtime {
	v := openapi.Runtime{Id: rec.Key.ID, Backend: rec.Key.Backend, State: rec.State, Home: rec.Home,
		Workspaces: rec.Workspaces, Labels: rec.Labels, SizeBytes: rec.SizeBytes, LeaseUntil: rec.LeaseUntil,
		ScheduledStep: openapi.Step(rec.ScheduledStep), ScheduledDue: rec.ScheduledDue, ArchiveId: rec.ArchiveID,
		Conversations: rec.Conversations, HeldBy: holds[rec.Key],
		CanResume: backend.State(rec.State).Present()}
	if rec.Pinned {
		v.Pinned = "yes"
		if rec.PinReason != "" {
			v.Pinned = rec.PinReason
		}
	}
	d.stateMu.Lock()
	world := d.world
	d.stateMu.Unlock()
	settings, _ := d.settingsOf(rec.Key.Backend, "")
	if world != nil {
		if s := world.Find(bk(rec.Key)); s != nil {
			v.Path, v.Busy, v.Unsaved = s.Runtime.Path, s.Runtime.Busy, s.Runtime.Unsaved
			v.LastActive = s.Runtime.LastActivity
			if s.Runtime.Pinned != "" {
				v.Pinned = s.Runtime.Pinned
			}
			settings, _ = d.settingsOf(rec.Key.Backend, s.Source.Name)
		}
	}
	if at, err := d.store.LastActivity(ctx, rec.Key); err == nil && at.After(v.LastActive) {
		v.LastActive = at
	}
	ret := settings.Retention
	if rec.RetentionOverride != nil {
		ret = *rec.RetentionOverride
	}
	v.Retention = retentionText(ret, rec.RetentionOverride != nil)
	if rec.ArchiveID != "" {
		if ar, err := d.raw.Archive(ctx, rec.ArchiveID); err == nil {
			v.ArchiveLocation = ar.Location
		}
	}
	return v
}

func retentionText(d time.Duration, set bool) string {
	s := "off"
	switch {
	case d <= 0:
	case d%(24*time.Hour) == 0:
		s = strings.TrimSuffix(time.Duration(d/(24*time.Hour)).String(), "ns") + "d"
	default:
		s = d.String()
	}
	if set {
		s += " (set)"
	}
	return s
}

// settingsOf returns the policy in force of the named source (the one
// that found the runtime), else of the first source of its backend.
func (d *Daemon) settingsOf(backendName, source string) (policy.Settings, bool) {
	srcs := d.setupNow().sources
	for _, s := range srcs {
		if s.Name == source && s.Backend.Name() == backendName {
			return s.Settings, true
		}
	}
	for _, s := range srcs {
		if s.Backend.Name() == backendName {
			return s.Settings, true
		}
	}
	return policy.Settings{}, false
}

func (a *api) GetRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, params openapi.GetRuntimeParams) {
	ctx := r.Context()
	k, _, err := a.d.resolve(ctx, id, params.Backend)
	if err != nil {
		writeError(w, err)
		return
	}
	a.writeRuntime(ctx, w, http.StatusOK, k)
}

func (a *api) writeRuntime(ctx context.Context, w http.ResponseWriter, status int, k ledger.Key) {
	rec, err := a.d.raw.Runtime(ctx, k)
	if err != nil {
		writeError(w, err)
		return
	}
	holds, err := a.d.holdsByKey(ctx, k)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, a.d.view(ctx, rec, holds))
}

func (a *api) RegisterRuntime(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	reg, err := decodeRegistration(data)
	if err != nil {
		writeError(w, err)
		return
	}
	if !a.d.knowsBackend(reg.Backend) {
		writeError(w, badRequest("backend", "no configured source has backend %q", reg.Backend))
		return
	}
	if err := a.d.checkReported(reg.Backend, reg.Id, append([]string{reg.Home}, reg.Workspaces...)); err != nil {
		writeError(w, badRequest("", "%v", err))
		return
	}
	k := ledger.Key{Backend: reg.Backend, ID: reg.Id}
	now := time.Now().UTC()
	rec, err := a.d.raw.Runtime(ctx, k)
	switch {
	case err == nil:
		if err := liveState(k, rec.State); errors.Is(err, errArchived) {
			writeError(w, err)
			return
		}
		if reg.Home != "" && rec.Home != "" && rec.Home != reg.Home {
			writeError(w, conflict("runtime %s is known with home %q, not %q", k, rec.Home, reg.Home))
			return
		}
	case !errors.Is(err, ledger.ErrNotFound):
		writeError(w, err)
		return
	}
	if err != nil || reg.Home != "" || len(reg.Workspaces) > 0 || len(reg.Labels) > 0 {
		obs := ledger.Observation{Key: k, Home: reg.Home, Workspaces: reg.Workspaces, Labels: reg.Labels, SizeBytes: -1, At: now}
		if err == nil {
			obs.Home, obs.Workspaces, obs.Labels = orStr(reg.Home, rec.Home), orList(reg.Workspaces, rec.Workspaces), orMap(reg.Labels, rec.Labels)
			obs.SizeBytes = rec.SizeBytes
		}
		if err := a.d.raw.Observe(ctx, []ledger.Observation{obs}); err != nil {
			writeError(w, err)
			return
		}
	}
	written, err := a.d.raw.Update(ctx, k, func(r *ledger.RuntimeRecord) error {
		for _, c := range reg.Conversations {
			if !slices.Contains(r.Conversations, c) {
				r.Conversations = append(r.Conversations, c)
			}
		}
		if r.RegisteredAt.IsZero() {
			r.RegisteredAt = now
		}
		// A host registering it takes it back, owners or not: released
		// only by DELETE.
		r.ReleasedAt = time.Time{}
		if r.ScheduledStep == string(backend.StepDelete) {
			// An orphan's notice: a host owns it now.
			r.ScheduledStep, r.ScheduledAt, r.ScheduledDue = "", time.Time{}, time.Time{}
		}
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	a.d.keys.set(k, written.State)
	a.writeRuntime(ctx, w, http.StatusOK, k)
}

func orStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func orList(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

func orMap(a, b map[string]string) map[string]string {
	if len(a) > 0 {
		return a
	}
	return b
}

func (a *api) ReleaseRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, params openapi.ReleaseRuntimeParams) {
	ctx := r.Context()
	if params.Conversation == "" && !params.Force {
		writeError(w, badRequest("conversation", "give conversation=C (that conversation lets go) or force=true (remove it now)"))
		return
	}
	k, err := a.d.resolveLive(ctx, id, params.Backend)
	if err != nil {
		writeError(w, err)
		return
	}
	var owners []string
	var missing bool
	_, err = a.d.raw.Update(ctx, k, func(rec *ledger.RuntimeRecord) error {
		if params.Conversation != "" {
			if !slices.Contains(rec.Conversations, params.Conversation) && !params.Force {
				missing = true
				return nil
			}
			rec.Conversations = slices.DeleteFunc(rec.Conversations, func(c string) bool { return c == params.Conversation })
		}
		if params.Force {
			rec.Conversations = nil
		}
		if len(rec.Conversations) == 0 && rec.ReleasedAt.IsZero() {
			rec.ReleasedAt = time.Now().UTC()
		}
		owners = slices.Clone(rec.Conversations)
		return nil
	})
	switch {
	case err != nil:
		writeError(w, err)
		return
	case missing:
		writeError(w, notFound("conversation %q does not own runtime %s", params.Conversation, k))
		return
	}
	out := openapi.Release{Id: k.ID, Backend: k.Backend, Conversations: owners}
	if out.Conversations == nil {
		out.Conversations = []string{}
	}
	if len(owners) > 0 {
		writeJSON(w, http.StatusOK, out)
		return
	}
	// The last owner let go (or force): remove it now, archived first
	// when it holds unsaved work.
	p, res, err := a.d.pass(ctx, passRequest{trigger: "api", wait: a.d.setupNow().server.HoldWait,
		opts: engine.PlanOptions{Only: []backend.Key{bk(k)}, Steps: []backend.Step{backend.StepDelete},
			Requests: []policy.Request{{Key: bk(k), Step: backend.StepDelete}}}})
	if err != nil {
		writeError(w, err)
		return
	}
	result := openapi.Result{Runtime: k.ID, Backend: k.Backend, Step: openapi.Step(backend.StepDelete), Outcome: openapi.ResultOutcome(plan.Skip)}
	if res != nil && len(res.Results) > 0 {
		rr := res.Results[0]
		result.Outcome, result.Reason, result.FreedBytes, result.ArchiveId = openapi.ResultOutcome(rr.Outcome), rr.Reason, rr.FreedBytes, rr.ArchiveID
	} else {
		result.Reason = "nothing to do"
		for _, s := range p.Skipped {
			if s.Runtime == k.ID && s.Backend == k.Backend {
				result.Reason = s.Reason
			}
		}
	}
	out.Removed = result.Outcome == openapi.ResultOutcome(plan.Done)
	out.Result = result
	if params.Force && !out.Removed {
		writeError(w, locked("runtime %s was not removed: %s", k, result.Reason))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) ReportActivity(w http.ResponseWriter, r *http.Request, id openapi.ID, params openapi.ReportActivityParams) {
	d := a.d
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	body, err := decodeActivity(data)
	if err != nil {
		writeError(w, err)
		return
	}
	k, err := d.activityKey(r.Context(), id, params.Backend)
	if err != nil {
		writeError(w, err)
		return
	}
	at, err := activityTime("at", body.At)
	if err != nil {
		writeError(w, err)
		return
	}
	d.acts.add(k, at)
	d.metrics.activity.Inc()
	w.WriteHeader(http.StatusNoContent)
}

// activityKey finds the runtime of a report. With its backend given, a
// runtime no pass has seen yet is accepted (a host may report before the
// first pass); an archived one answers 410.
func (d *Daemon) activityKey(ctx context.Context, id, backendName string) (ledger.Key, error) {
	if backendName == "" {
		return d.resolveLive(ctx, id, "")
	}
	k := ledger.Key{Backend: backendName, ID: id}
	if state, ok := d.keys.get(k); ok {
		return k, liveState(k, state)
	}
	found, state, err := d.resolve(ctx, id, backendName)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound {
		d.keys.set(k, "") // not seen yet: accepted, and cached so the next report skips the read
		return k, nil
	}
	if err != nil {
		return k, err
	}
	return found, liveState(found, state)
}

// activityTime defaults to now and refuses the future (a clock a minute
// ahead is forgiven and clamped).
func activityTime(field string, at time.Time) (time.Time, error) {
	now := time.Now().UTC()
	switch {
	case at.IsZero():
		return now, nil
	case at.After(now.Add(time.Minute)):
		return time.Time{}, badRequest(field, "%s %s is in the future", field, at.Format(time.RFC3339))
	case at.After(now):
		return now, nil
	case at.Before(ledger.MinTime):
		return time.Time{}, badRequest(field, "%s %s is too far in the past", field, at.Format(time.RFC3339))
	}
	return at.UTC(), nil
}

func (a *api) ReportActivityBatch(w http.ResponseWriter, r *http.Request) {
	d := a.d
	data, err := readBody(w, r, maxBatchBody)
	if err != nil {
		writeError(w, err)
		return
	}
	batch, err := decodeActivityBatch(data)
	if err != nil {
		writeError(w, err)
		return
	}
	type item struct {
		k  ledger.Key
		at time.Time
	}
	items := make([]item, 0, len(batch.Reports))
	for i, rep := range batch.Reports {
		field := "reports[" + itoa(i) + "]"
		if !d.knowsBackend(rep.Backend) {
			writeError(w, badRequest(field+".backend", "no configured source has backend %q", rep.Backend))
			return
		}
		at, err := activityTime(field+".at", rep.At)
		if err != nil {
			writeError(w, err)
			return
		}
		items = append(items, item{ledger.Key{Backend: rep.Backend, ID: rep.Id}, at})
	}
	accepted := 0
	for _, it := range items {
		if state, ok := d.keys.get(it.k); ok && liveState(it.k, state) != nil {
			continue // archived or deleted: nothing to keep alive
		}
		d.acts.add(it.k, it.at)
		accepted++
	}
	d.metrics.activity.Add(float64(accepted))
	writeJSON(w, http.StatusOK, openapi.ActivityAccepted{Accepted: accepted})
}

func itoa(i int) string { return strconv.Itoa(i) }

func (a *api) TakeHold(w http.ResponseWriter, r *http.Request, id openapi.ID, params openapi.TakeHoldParams) {
	d := a.d
	ctx := r.Context()
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	req, ttl, err := decodeHoldRequest(data)
	if err != nil {
		writeError(w, err)
		return
	}
	k, err := d.resolveLive(ctx, id, params.Backend)
	if err != nil {
		writeError(w, err)
		return
	}
	s := d.setupNow()
	// The pass's lock: a pass acting on the runtime finishes first, and
	// then this sees what it did.
	lockCtx, cancel := context.WithTimeout(ctx, s.server.HoldWait)
	defer cancel()
	unlock, err := s.engine.LockRuntime(lockCtx, bk(k))
	if err != nil {
		writeError(w, err)
		return
	}
	defer unlock()
	rec, err := d.raw.Runtime(ctx, k)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := liveState(k, rec.State); err != nil {
		d.keys.set(k, rec.State)
		writeError(w, err)
		return
	}
	h, err := d.raw.TakeHold(ctx, ledger.HoldRequest{Key: k, Holder: req.Holder, TTL: ttl, Now: time.Now().UTC()})
	if err != nil {
		writeError(w, err)
		return
	}
	d.metrics.holdsTaken.Inc()
	d.syncNativeOf(k)
	writeJSON(w, http.StatusCreated, openapi.Hold{HoldId: h.ID, Holder: h.Holder, ExpiresAt: h.ExpiresAt})
}

func (a *api) RenewHold(w http.ResponseWriter, r *http.Request, id openapi.ID, holdID string, params openapi.RenewHoldParams) {
	ctx := r.Context()
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	ttl, err := decodeHoldRenewal(data)
	if err != nil {
		writeError(w, err)
		return
	}
	k, err := a.d.resolveLive(ctx, id, params.Backend)
	if err != nil {
		writeError(w, err)
		return
	}
	h, err := a.d.raw.RenewHold(ctx, ledger.HoldRenewal{Key: k, ID: holdID, TTL: ttl, Now: time.Now().UTC()})
	if err != nil {
		writeError(w, err)
		return
	}
	a.d.syncNativeOf(k)
	writeJSON(w, http.StatusOK, openapi.Hold{HoldId: h.ID, Holder: h.Holder, ExpiresAt: h.ExpiresAt})
}

func (a *api) ReleaseHold(w http.ResponseWriter, r *http.Request, id openapi.ID, holdID string, params openapi.ReleaseHoldParams) {
	ctx := r.Context()
	k, _, err := a.d.resolve(ctx, id, params.Backend)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := a.d.raw.ReleaseHold(ctx, k, holdID); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// update changes a live runtime's record and answers with the runtime.
func (a *api) update(w http.ResponseWriter, r *http.Request, id, backendName string, fn func(*ledger.RuntimeRecord) error) {
	ctx := r.Context()
	k, err := a.d.resolveLive(ctx, id, backendName)
	if err != nil {
		writeError(w, err)
		return
	}
	if _, err := a.d.raw.Update(ctx, k, fn); err != nil {
		writeError(w, err)
		return
	}
	a.writeRuntime(ctx, w, http.StatusOK, k)
}

func (a *api) SetRetention(w http.ResponseWriter, r *http.Request, id openapi.ID, params openapi.SetRetentionParams) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	ret, err := decodeRetention(data)
	if err != nil {
		writeError(w, err)
		return
	}
	a.update(w, r, id, params.Backend, func(rec *ledger.RuntimeRecord) error {
		rec.RetentionOverride = ret
		return nil
	})
}

func (a *api) PinRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, params openapi.PinRuntimeParams) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	pin, err := decodePin(data)
	if err != nil {
		writeError(w, err)
		return
	}
	a.update(w, r, id, params.Backend, func(rec *ledger.RuntimeRecord) error {
		rec.Pinned, rec.PinReason = true, pin.Reason
		rec.ScheduledStep, rec.ScheduledAt, rec.ScheduledDue = "", time.Time{}, time.Time{}
		return nil
	})
}

func (a *api) UnpinRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, params openapi.UnpinRuntimeParams) {
	a.update(w, r, id, params.Backend, func(rec *ledger.RuntimeRecord) error {
		rec.Pinned, rec.PinReason = false, ""
		return nil
	})
}

// LeaseRuntime keeps a runtime until a time, but not past its lifetime
// cap (max_lifetime from its creation, or first sight when the backend
// does not tell).
func (a *api) LeaseRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, params openapi.LeaseRuntimeParams) {
	d := a.d
	ctx := r.Context()
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := decodeLease(data)
	if err != nil {
		writeError(w, err)
		return
	}
	now := time.Now().UTC()
	if !req.Until.After(now) {
		writeError(w, badRequest("until", "until %s is not in the future", req.Until.Format(time.RFC3339)))
		return
	}
	k, err := d.resolveLive(ctx, id, params.Backend)
	if err != nil {
		writeError(w, err)
		return
	}
	rec, err := d.raw.Runtime(ctx, k)
	if err != nil {
		writeError(w, err)
		return
	}
	settings, _ := d.settingsOf(k.Backend, "")
	born := rec.FirstSeen
	d.stateMu.Lock()
	if d.world != nil {
		if s := d.world.Find(bk(k)); s != nil {
			settings, _ = d.settingsOf(k.Backend, s.Source.Name)
			if !s.Runtime.CreatedAt.IsZero() {
				born = s.Runtime.CreatedAt
			}
		}
	}
	d.stateMu.Unlock()
	until, capped := req.Until.UTC(), false
	if settings.MaxLifetime > 0 {
		if limit := born.Add(settings.MaxLifetime); until.After(limit) {
			if !limit.After(now) {
				writeError(w, conflict("runtime %s is past its lifetime cap (max_lifetime %s since %s): no lease can keep it",
					k, settings.MaxLifetime, born.Format(time.RFC3339)))
				return
			}
			until, capped = limit, true
		}
	}
	if _, err := d.raw.Update(ctx, k, func(rec *ledger.RuntimeRecord) error {
		rec.LeaseUntil = until
		return nil
	}); err != nil {
		writeError(w, err)
		return
	}
	d.syncNativeOf(k)
	writeJSON(w, http.StatusOK, openapi.Lease{LeaseUntil: until, Capped: capped})
}

// keysOf resolves runtime names ("ID" or "backend/ID") for a pass.
func (d *Daemon) keysOf(ctx context.Context, field string, names []string) ([]backend.Key, error) {
	var out []backend.Key
	for i, n := range names {
		b, id, ok := strings.Cut(n, "/")
		if !ok {
			b, id = "", n
		}
		k, _, err := d.resolve(ctx, id, b)
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusBadRequest {
			ae.field = field + "[" + itoa(i) + "]"
		}
		if err != nil {
			return nil, err
		}
		out = append(out, bk(k))
	}
	return out, nil
}

func (a *api) GetPlan(w http.ResponseWriter, r *http.Request, params openapi.GetPlanParams) {
	ctx := r.Context()
	steps, err := checkSteps("step", params.Step)
	if err != nil {
		writeError(w, err)
		return
	}
	only, err := a.d.keysOf(ctx, "runtime", params.Runtime)
	if err != nil {
		writeError(w, err)
		return
	}
	p, _, err := a.d.pass(ctx, passRequest{trigger: "api", dryRun: true, wait: a.d.setupNow().server.HoldWait,
		opts: engine.PlanOptions{Steps: steps, Only: only}})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// passBody is openapi.Pass with the engine's own types, which share its
// JSON shape (a test holds them to it).
type passBody struct {
	Plan    *plan.Plan    `json:"plan"`
	Applied *plan.Applied `json:"applied,omitempty"`
}

func (a *api) RunPass(w http.ResponseWriter, r *http.Request) {
	d := a.d
	ctx := r.Context()
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	req, steps, err := decodePass(data)
	if err != nil {
		writeError(w, err)
		return
	}
	pr := passRequest{trigger: "api", dryRun: req.DryRun, wait: d.setupNow().server.HoldWait}
	if req.PlanId != "" {
		if pr.exact, err = d.planByID(req.PlanId); err != nil {
			writeError(w, err)
			return
		}
	} else {
		only, err := d.keysOf(ctx, "runtimes", req.Runtimes)
		if err != nil {
			writeError(w, err)
			return
		}
		pr.opts = engine.PlanOptions{Steps: steps, Only: only}
	}
	if pr.exact != nil && pr.dryRun {
		writeJSON(w, http.StatusOK, passBody{Plan: pr.exact})
		return
	}
	p, res, err := d.pass(ctx, pr)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, passBody{Plan: p, Applied: res})
}

func (a *api) GetJournal(w http.ResponseWriter, r *http.Request, params openapi.GetJournalParams) {
	ctx := r.Context()
	limit, err := pageLimit("limit", params.Limit, 50)
	if err != nil {
		writeError(w, err)
		return
	}
	if params.Before < 0 {
		writeError(w, badRequest("before", "before %d: must be positive", params.Before))
		return
	}
	f := ledger.JournalFilter{PlanID: params.PlanId, Before: params.Before, Limit: limit}
	if params.Runtime != "" {
		k, _, err := a.d.resolve(ctx, params.Runtime, params.Backend)
		if err != nil {
			writeError(w, err)
			return
		}
		f.Key = k
	}
	entries, err := a.d.raw.ListJournal(ctx, f)
	if err != nil {
		writeError(w, err)
		return
	}
	out := openapi.Journal{Entries: []openapi.JournalEntry{}}
	for _, e := range entries {
		je := openapi.JournalEntry{Id: e.ID, PlanId: e.Intent.PlanID, Backend: e.Intent.Key.Backend, Runtime: e.Intent.Key.ID,
			Step: e.Intent.Step, Paths: e.Intent.Paths, Reason: e.Intent.Reason, At: e.Intent.At}
		if o := e.Outcome; o != nil {
			je.Outcome = openapi.JournalOutcome{Result: o.Result, Reason: o.Reason, FreedBytes: o.FreedBytes, At: o.At}
		}
		out.Entries = append(out.Entries, je)
	}
	if len(entries) == limit && limit > 0 {
		out.NextBefore = entries[len(entries)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}
