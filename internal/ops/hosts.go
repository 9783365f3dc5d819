package ops

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/views"
)

// What hosts (agent servers) do through the API: register the runtimes
// they create, let go of them, hold them still.

// Registration is a host registering a runtime it created.
type Registration struct {
	Backend, Source, ID string
	Home                string
	Workspaces          []string
	Labels              map[string]string
	Conversations       []string
	// AgentServerURL is the runtime's OpenHands agent-server (http or
	// https, no credentials): its idle clock gives the runtime's last
	// activity while it runs. Empty keeps what an earlier registration
	// said.
	AgentServerURL string
}

// Register records a runtime a host created, with its owning
// conversations (the union of every registration). A registration takes a
// runtime back from orphanhood: an orphan's notice is canceled.
func (a *App) Register(ctx context.Context, reg Registration) (*views.Runtime, error) {
	k, err := a.keyOf(reg.Backend, reg.Source, reg.ID, "")
	if err != nil {
		return nil, err
	}
	for i, c := range reg.Conversations {
		if err := checkName(fmt.Sprintf("conversations[%d]", i), c); err != nil {
			return nil, err
		}
	}
	if reg.AgentServerURL != "" {
		if err := checkAgentServerURL(reg.AgentServerURL); err != nil {
			return nil, err
		}
	}
	// What its source would never list is refused: a reserved id, folders
	// outside every managed root of a local backend.
	if src, ok := a.setupNow().sourceOf(k.Source); ok {
		if err := backend.CheckReported(src.Backend, reg.ID, append([]string{reg.Home}, reg.Workspaces...)); err != nil {
			return nil, Input("", "%v", err)
		}
	}
	now := a.now()
	rec, err := a.store.Runtime(ctx, k)
	switch {
	case err == nil:
		if err := liveState(resolved{k, rec.State}); errors.Is(err, ErrArchived) {
			return nil, err
		}
		if reg.Home != "" && rec.Home != "" && rec.Home != reg.Home {
			return nil, fmt.Errorf("runtime %s is known with home %q, not %q: %w", k, rec.Home, reg.Home, backend.ErrConflict)
		}
	case !errors.Is(err, ledger.ErrNotFound):
		return nil, err
	}
	if err != nil || reg.Home != "" || len(reg.Workspaces) > 0 || len(reg.Labels) > 0 {
		obs := ledger.Observation{Key: k, Home: reg.Home, Workspaces: reg.Workspaces, Labels: reg.Labels, SizeBytes: -1, At: now}
		if err == nil {
			obs.Home, obs.Workspaces, obs.Labels = or(reg.Home, rec.Home), orList(reg.Workspaces, rec.Workspaces), orMap(reg.Labels, rec.Labels)
			obs.SizeBytes, obs.Path = rec.SizeBytes, rec.Path
		}
		if err := a.store.Observe(ctx, []ledger.Observation{obs}); err != nil {
			return nil, err
		}
	}
	written, err := a.store.Update(ctx, k, func(r *ledger.RuntimeRecord) error {
		for _, c := range reg.Conversations {
			if !slices.Contains(r.Conversations, c) {
				r.Conversations = append(r.Conversations, c)
			}
		}
		if r.RegisteredAt.IsZero() {
			r.RegisteredAt = now
		}
		if reg.AgentServerURL != "" {
			r.AgentServerURL = reg.AgentServerURL
		}
		// A host registering it takes it back, owners or not: released
		// only by a release.
		r.ReleasedAt = time.Time{}
		if r.ScheduledStep == string(backend.StepDelete) {
			r.ScheduledStep, r.ScheduledAt, r.ScheduledDue = "", time.Time{}, time.Time{} // an orphan's notice
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	a.keys.set(k, written.State)
	return a.runtimeOf(ctx, k)
}

func or(a, b string) string {
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

// Release is a conversation letting go of a runtime (force: every owner
// at once). When the last owner lets go the runtime is removed now,
// archived first when it holds unsaved work; a forced removal that does
// not happen (the runtime is pinned, leased, held or busy) is ErrProtected.
func (a *App) Release(ctx context.Context, ref Ref, conversation string, force bool) (*views.Release, error) {
	if conversation == "" && !force {
		return nil, Input("conversation", "give conversation=C (that conversation lets go) or force=true (remove it now)")
	}
	ks, err := a.resolveKeysLive(ctx, "id", []Ref{ref}, true)
	if err != nil {
		return nil, err
	}
	k := ks[0]
	var owners []string
	missing := false
	_, err = a.store.Update(ctx, k, func(rec *ledger.RuntimeRecord) error {
		if conversation != "" {
			if !slices.Contains(rec.Conversations, conversation) && !force {
				missing = true
				return nil
			}
			rec.Conversations = slices.DeleteFunc(rec.Conversations, func(c string) bool { return c == conversation })
		}
		if force {
			rec.Conversations = nil
		}
		if len(rec.Conversations) == 0 && rec.ReleasedAt.IsZero() {
			rec.ReleasedAt = a.now()
		}
		owners = slices.Clone(rec.Conversations)
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case missing:
		return nil, fmt.Errorf("conversation %q does not own runtime %s: %w", conversation, k, backend.ErrNotFound)
	}
	out := &views.Release{ID: k.ID, Backend: k.Backend, Source: k.Source, Conversations: owners}
	if out.Conversations == nil {
		out.Conversations = []string{}
	}
	if len(owners) > 0 {
		return out, nil
	}
	why := fmt.Sprintf("released: conversation %s, the last that owned it, let go", conversation)
	if force {
		why = "released with force: every conversation let go"
	}
	pass, err := a.Apply(ctx, ApplyRequest{Runtimes: []Ref{{Name: k.ID, Backend: k.Backend, Source: k.Source}}, Delete: true,
		Rule: policy.RuleReleased, Why: why, Trigger: "release"})
	if err != nil {
		return nil, err
	}
	r := pass.Applied.Results[0]
	out.Result, out.Removed = &r, r.Outcome == plan.Done
	if force && !out.Removed {
		return nil, fmt.Errorf("runtime %s was not removed: %s: %w", k, r.Reason, backend.ErrProtected)
	}
	return out, nil
}

// TakeHold keeps a runtime still for ttl. It is written under the lock a
// pass takes to re-check and remove the runtime, waiting for a pass acting
// on it (up to [server] hold_wait; then ErrBusy): either the pass sees the
// hold, or the hold sees what the pass did (an archived runtime is
// ErrArchived).
func (a *App) TakeHold(ctx context.Context, ref Ref, holder string, ttl time.Duration) (*views.Hold, error) {
	if err := checkName("holder", holder); err != nil {
		return nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	ks, err := a.resolveKeysLive(ctx, "id", []Ref{ref}, true)
	if err != nil {
		return nil, err
	}
	k := ks[0]
	lockCtx, cancel := context.WithTimeout(ctx, a.holdWait())
	defer cancel()
	unlock, err := a.setupNow().engine.LockRuntime(lockCtx, k)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := a.store.Runtime(ctx, k)
	if err != nil {
		return nil, err
	}
	a.keys.set(k, rec.State)
	if err := liveState(resolved{k, rec.State}); err != nil {
		return nil, err
	}
	h, err := a.store.TakeHold(ctx, ledger.HoldRequest{Key: k, Holder: holder, TTL: ttl, Now: a.now()})
	if err != nil {
		return nil, err
	}
	if a.opts.OnProtect != nil {
		a.opts.OnProtect(k)
	}
	return &views.Hold{HoldID: h.ID, Holder: h.Holder, ExpiresAt: h.ExpiresAt}, nil
}

// RenewHold moves a hold's expiry to now + ttl; a hold expired or gone is
// not found.
func (a *App) RenewHold(ctx context.Context, ref Ref, id string, ttl time.Duration) (*views.Hold, error) {
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	ks, err := a.resolveKeysLive(ctx, "id", []Ref{ref}, true)
	if err != nil {
		return nil, err
	}
	h, err := a.store.RenewHold(ctx, ledger.HoldRenewal{Key: ks[0], ID: id, TTL: ttl, Now: a.now()})
	if err != nil {
		return nil, err
	}
	if a.opts.OnProtect != nil {
		a.opts.OnProtect(ks[0])
	}
	return &views.Hold{HoldID: h.ID, Holder: h.Holder, ExpiresAt: h.ExpiresAt}, nil
}

// ReleaseHold ends a hold; one already gone is not an error.
func (a *App) ReleaseHold(ctx context.Context, ref Ref, id string) error {
	ks, err := a.resolveKeys(ctx, "id", []Ref{ref})
	if err != nil {
		return err
	}
	return a.store.ReleaseHold(ctx, ks[0], id)
}

// MaxHold is the longest hold: a holder renews rather than hold for ever.
const MaxHold = 7 * 24 * time.Hour

func checkTTL(ttl time.Duration) error {
	switch {
	case ttl <= 0:
		return Input("ttl", "ttl %s: must be positive", ttl)
	case ttl > MaxHold:
		return Input("ttl", "ttl %s: at most 7d; renew the hold instead", ttl)
	}
	return nil
}

// PruneHolds deletes holds expired for a day (they protect nothing).
func (a *App) PruneHolds(ctx context.Context) (int, error) {
	return a.store.PruneHolds(ctx, a.now().Add(-24*time.Hour))
}

// checkAgentServerURL refuses an agent-server URL the idle clock would not
// read: not http(s), no host, credentials in it (they would be logged), a
// query or fragment.
func checkAgentServerURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return Input("agent_server_url", "%q is not an http(s) URL", raw)
	case u.User != nil:
		return Input("agent_server_url", "must not hold credentials")
	case u.RawQuery != "" || u.Fragment != "":
		return Input("agent_server_url", "%q: no query or fragment", raw)
	}
	return nil
}
