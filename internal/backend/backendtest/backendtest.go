// Package backendtest is the conformance suite every backend runs against
// its real provider (a git repository, a folder, a Docker Engine) or a
// contract fake of it (internal/remote/fakes). It is the executable form
// of the contract in package backend: a backend that passes it behaves the
// way the engine relies on.
//
// A backend's own test calls Run with a Harness whose Setup makes an empty
// provider and the backend watching it. Each subtest gets its own Setup.
// What the suite checks:
//
//   - capabilities: the roles are exactly those declared;
//   - a listing is stable (the same runtimes, IDs and fingerprints twice
//     over when nothing changed), its IDs are unique, its keys carry the
//     backend's name and no source (the engine sets it), a light listing
//     has the same runtimes, and listing by IDs returns those only (an
//     unknown ID: nothing, no error);
//   - scope: what the backend does not manage (another repository, a
//     container without the selector's labels, a sandbox outside the
//     metadata selector) is never listed, not even by its ID, and a delete
//     of what is in scope leaves it be;
//   - a runtime that vanished behind the backend's back is not listed; a
//     suspend of it is backend.ErrNotFound, a delete is nil or ErrNotFound,
//     a lock ErrNotFound;
//   - suspend and delete are idempotent: twice is fine, the second time a
//     no-op (nil, or ErrNotFound for a delete);
//   - a step it cannot take is errors.ErrUnsupported (a FileReclaimer asked
//     for a step other than caches or dependencies, and whatever the
//     backend's own Unsupported calls do).
package backendtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/local"
	"github.com/reclaimer/reclaimer/internal/trash"
)

// Harness is what a backend's test gives the suite.
type Harness struct {
	// Setup makes an empty provider and the backend watching it.
	Setup func(t *testing.T) *Provider
	// Capabilities are the roles the backend declares, as
	// backend.Capabilities names them.
	Capabilities []string
}

// Provider is one subtest's provider and the backend under test.
type Provider struct {
	Backend backend.Backend
	// Make adds a runtime the backend manages and returns the ID it lists
	// it by. Where the backend can suspend, the runtime is running (a
	// running container, a started sandbox); otherwise it is idle. name is
	// unique within the subtest.
	Make func(t *testing.T, name string) string
	// MakeOutside adds something alike that the backend must not manage
	// and returns the ID it would have.
	MakeOutside func(t *testing.T, name string) string
	// Exists tells whether what Make or MakeOutside made is still there,
	// asked of the provider directly.
	Exists func(t *testing.T, id string) bool
	// Vanish removes what Make made behind the backend's back.
	Vanish func(t *testing.T, id string)
	// Unsupported are calls of steps this backend cannot take for rt (a
	// runtime Make made, as listed); each must fail with
	// errors.ErrUnsupported and change nothing.
	Unsupported []func(ctx context.Context, rt backend.Runtime) error
}

// Run runs every conformance subtest.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, p *Provider, h Harness)
	}{
		{"Capabilities", testCapabilities},
		{"List/Stable", testListStable},
		{"List/ByIDs", testListByIDs},
		{"List/Light", testListLight},
		{"Scope", testScope},
		{"Vanished", testVanished},
		{"Suspend/Idempotent", testSuspendIdempotent},
		{"Delete/Idempotent", testDeleteIdempotent},
		{"Unsupported", testUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := h.Setup(t)
			tc.fn(t, p, h)
		})
	}
}

func testCapabilities(t *testing.T, p *Provider, h Harness) {
	if got := backend.Capabilities(p.Backend); !slices.Equal(got, h.Capabilities) {
		t.Errorf("%s has roles %v, declared %v", p.Backend.Name(), got, h.Capabilities)
	}
	if _, ok := backend.As[backend.Lister](p.Backend); !ok {
		t.Fatalf("%s cannot list: every backend is a Lister", p.Backend.Name())
	}
}

func list(t *testing.T, p *Provider, opts backend.ListOptions) []backend.Runtime {
	t.Helper()
	l, _ := backend.As[backend.Lister](p.Backend)
	rts, err := l.List(context.Background(), opts)
	var warn backend.Warnings
	if err != nil && !errors.As(err, &warn) {
		t.Fatalf("list %+v: %v", opts, err)
	}
	return rts
}

func ids(rts []backend.Runtime) []string {
	out := make([]string, 0, len(rts))
	for _, rt := range rts {
		out = append(out, rt.ID)
	}
	slices.Sort(out)
	return out
}

// find lists rt by its ID; ok false when it is not listed.
func find(t *testing.T, p *Provider, id string) (backend.Runtime, bool) {
	t.Helper()
	for _, rt := range list(t, p, backend.ListOptions{IDs: []string{id}}) {
		if rt.ID == id {
			return rt, true
		}
	}
	return backend.Runtime{}, false
}

func mustFind(t *testing.T, p *Provider, id string) backend.Runtime {
	t.Helper()
	rt, ok := find(t, p, id)
	if !ok {
		t.Fatalf("%s/%s: made, but not listed by its ID", p.Backend.Name(), id)
	}
	return rt
}

var knownStates = []backend.State{backend.StateRunning, backend.StateStarting, backend.StateStopped,
	backend.StateSuspended, backend.StateUnowned, backend.StateUnknown}

func checkListed(t *testing.T, p *Provider, rts []backend.Runtime) {
	t.Helper()
	seen := map[string]bool{}
	for _, rt := range rts {
		switch {
		case rt.Backend != p.Backend.Name():
			t.Errorf("%s: listed with backend %q, want %q", rt.ID, rt.Backend, p.Backend.Name())
		case rt.Source != "":
			t.Errorf("%s: listed with source %q; the engine sets it", rt.ID, rt.Source)
		case rt.Key.Validate() != nil:
			t.Errorf("%s: %v", rt.ID, rt.Key.Validate())
		case seen[rt.ID]:
			t.Errorf("%s: listed twice", rt.ID)
		case !slices.Contains(knownStates, rt.State):
			t.Errorf("%s: listed as %q: a backend lists what is there (no archived, deleted or missing)", rt.ID, rt.State)
		case rt.Path != "" && rt.Root != "" && !local.Inside(rt.Root, rt.Path):
			t.Errorf("%s: its path %s is outside its root %s", rt.ID, rt.Path, rt.Root)
		}
		seen[rt.ID] = true
	}
}

func testListStable(t *testing.T, p *Provider, _ Harness) {
	made := []string{p.Make(t, "a"), p.Make(t, "b"), p.Make(t, "c")}
	slices.Sort(made)
	first := list(t, p, backend.ListOptions{})
	checkListed(t, p, first)
	for _, id := range made {
		if !slices.Contains(ids(first), id) {
			t.Errorf("%s: made, not listed (listed %v)", id, ids(first))
		}
	}
	second := list(t, p, backend.ListOptions{})
	if !slices.Equal(ids(first), ids(second)) {
		t.Fatalf("two listings with nothing changed differ: %v, then %v", ids(first), ids(second))
	}
	prints := map[string]string{}
	for _, rt := range first {
		prints[rt.ID] = rt.Fingerprint
	}
	for _, rt := range second {
		if prints[rt.ID] != rt.Fingerprint {
			t.Errorf("%s: fingerprint %q, then %q with nothing changed: every apply would see a change", rt.ID, prints[rt.ID], rt.Fingerprint)
		}
	}
}

func testListByIDs(t *testing.T, p *Provider, _ Harness) {
	a, b := p.Make(t, "a"), p.Make(t, "b")
	got := list(t, p, backend.ListOptions{IDs: []string{a}})
	if !slices.Equal(ids(got), []string{a}) {
		t.Errorf("listing by %q gave %v", a, ids(got))
	}
	checkListed(t, p, got)
	got = list(t, p, backend.ListOptions{IDs: []string{b, "no-such-runtime"}})
	if !slices.Equal(ids(got), []string{b}) {
		t.Errorf("listing by %q and an unknown ID gave %v", b, ids(got))
	}
	if got := list(t, p, backend.ListOptions{IDs: []string{"no-such-runtime"}}); len(got) != 0 {
		t.Errorf("an unknown ID listed %v", ids(got))
	}
}

func testListLight(t *testing.T, p *Provider, _ Harness) {
	p.Make(t, "a")
	p.Make(t, "b")
	full := list(t, p, backend.ListOptions{})
	light := list(t, p, backend.ListOptions{Light: true})
	checkListed(t, p, light)
	if !slices.Equal(ids(full), ids(light)) {
		t.Errorf("a light listing has %v, a full one %v", ids(light), ids(full))
	}
	states := map[string]backend.State{}
	for _, rt := range full {
		states[rt.ID] = rt.State
	}
	for _, rt := range light {
		if states[rt.ID] != rt.State {
			t.Errorf("%s: %s in a light listing, %s in a full one", rt.ID, rt.State, states[rt.ID])
		}
	}
}

func testScope(t *testing.T, p *Provider, _ Harness) {
	in := p.Make(t, "in")
	out := p.MakeOutside(t, "out")
	if got := ids(list(t, p, backend.ListOptions{})); slices.Contains(got, out) {
		t.Errorf("%s is outside the backend's scope, but listed: %v", out, got)
	}
	if got := list(t, p, backend.ListOptions{IDs: []string{out}}); len(got) != 0 {
		t.Errorf("%s is outside the backend's scope, but listed by its ID", out)
	}
	if got := list(t, p, backend.ListOptions{Light: true}); slices.Contains(ids(got), out) {
		t.Errorf("%s is outside the backend's scope, but listed lightly", out)
	}
	if _, ok := backend.As[backend.Deleter](p.Backend); ok {
		remove(t, p, mustFind(t, p, in))
	}
	if !p.Exists(t, out) {
		t.Errorf("%s is outside the backend's scope, and gone after the backend removed %s", out, in)
	}
}

func testVanished(t *testing.T, p *Provider, _ Harness) {
	id := p.Make(t, "gone")
	keep := p.Make(t, "kept")
	rt := mustFind(t, p, id)
	p.Vanish(t, id)
	if got := ids(list(t, p, backend.ListOptions{})); slices.Contains(got, id) || !slices.Contains(got, keep) {
		t.Errorf("after %s vanished the listing is %v", id, got)
	}
	if _, ok := find(t, p, id); ok {
		t.Errorf("%s vanished, but listed by its ID", id)
	}
	ctx := context.Background()
	if s, ok := backend.As[backend.Suspender](p.Backend); ok {
		if err := s.Suspend(ctx, rt, backend.SuspendOptions{Reason: "test"}); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("suspend of a vanished runtime: %v, want ErrNotFound", err)
		}
	}
	if l, ok := backend.As[backend.Locker](p.Backend); ok {
		if lk, err := l.Lock(ctx, rt, backend.LockOptions{Step: backend.StepDelete}); !errors.Is(err, backend.ErrNotFound) {
			if err == nil && lk.Unlock != nil {
				lk.Unlock()
			}
			t.Errorf("lock of a vanished runtime: %v, want ErrNotFound", err)
		}
	}
	if n, ok := backend.As[backend.NativeLifecycle](p.Backend); ok {
		if _, err := n.Lifecycle(ctx, rt, backend.LifecycleOptions{}); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("reading the timers of a vanished runtime: %v, want ErrNotFound", err)
		}
	}
	if _, ok := backend.As[backend.Deleter](p.Backend); ok {
		if err := deleteOnce(t, p, rt); err != nil && !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("delete of a vanished runtime: %v, want nil or ErrNotFound", err)
		}
	}
	if !p.Exists(t, keep) {
		t.Errorf("%s is gone too", keep)
	}
}

func testSuspendIdempotent(t *testing.T, p *Provider, _ Harness) {
	s, ok := backend.As[backend.Suspender](p.Backend)
	if !ok {
		t.Skip("not a Suspender")
	}
	id := p.Make(t, "a")
	other := p.Make(t, "b")
	rt := mustFind(t, p, id)
	ctx := context.Background()
	for i := range 2 {
		if err := s.Suspend(ctx, rt, backend.SuspendOptions{Reason: "test"}); err != nil {
			t.Fatalf("suspend #%d: %v", i+1, err)
		}
	}
	if now := mustFind(t, p, id); now.State.Active() {
		t.Errorf("suspended, but listed as %s", now.State)
	}
	if now := mustFind(t, p, other); !now.State.Active() && rt.State.Active() {
		t.Errorf("%s is %s, suspending %s stopped it too", other, now.State, id)
	}
}

func testDeleteIdempotent(t *testing.T, p *Provider, _ Harness) {
	if _, ok := backend.As[backend.Deleter](p.Backend); !ok {
		t.Skip("not a Deleter")
	}
	id := p.Make(t, "a")
	keep := p.Make(t, "b")
	rt := remove(t, p, mustFind(t, p, id))
	if err := deleteOnce(t, p, rt); err != nil && !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("delete #2: %v, want nil or ErrNotFound", err)
	}
	if p.Exists(t, id) {
		t.Errorf("%s deleted, but still there", id)
	}
	if _, ok := find(t, p, id); ok {
		t.Errorf("%s deleted, but listed", id)
	}
	if !p.Exists(t, keep) {
		t.Errorf("%s is gone too", keep)
	}
}

func testUnsupported(t *testing.T, p *Provider, _ Harness) {
	id := p.Make(t, "a")
	rt := mustFind(t, p, id)
	ctx := context.Background()
	calls := p.Unsupported
	if f, ok := backend.As[backend.FileReclaimer](p.Backend); ok {
		calls = append(calls, func(ctx context.Context, rt backend.Runtime) error {
			if s, ok := backend.As[backend.Suspender](p.Backend); ok && rt.State.Active() {
				if err := s.Suspend(ctx, rt, backend.SuspendOptions{}); err != nil {
					return err
				}
				rt = mustFind(t, p, rt.ID)
			}
			_, err := f.ReclaimFiles(ctx, rt, backend.FileOptions{Step: backend.StepSuspend})
			return err
		})
	}
	if len(calls) == 0 {
		t.Skip("no step this backend is known not to take")
	}
	for i, call := range calls {
		if err := call(ctx, rt); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("unsupported call #%d: %v, want errors.ErrUnsupported", i+1, err)
		}
	}
	if !p.Exists(t, id) {
		t.Errorf("%s is gone after steps it cannot take", id)
	}
}

// remove deletes rt the way the engine does (suspended first when it is
// running) and returns it as it was last listed.
func remove(t *testing.T, p *Provider, rt backend.Runtime) backend.Runtime {
	t.Helper()
	if s, ok := backend.As[backend.Suspender](p.Backend); ok && rt.State.Active() {
		if err := s.Suspend(context.Background(), rt, backend.SuspendOptions{Reason: "test"}); err != nil {
			t.Fatalf("suspend before delete: %v", err)
		}
		rt = mustFind(t, p, rt.ID)
	}
	if err := deleteOnce(t, p, rt); err != nil {
		t.Fatalf("delete %s: %v", rt.ID, err)
	}
	return rt
}

// deleteOnce deletes rt, discarding local folders into a trash of its root
// as the engine does.
func deleteOnce(t *testing.T, p *Provider, rt backend.Runtime) error {
	t.Helper()
	d, _ := backend.As[backend.Deleter](p.Backend)
	discard := func(path string) error {
		t.Fatalf("%s: the backend discarded %s, but the runtime has no root", rt.ID, path)
		return nil
	}
	if rt.Root != "" {
		tr, err := trash.Open(rt.Root, trash.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := tr.Drain(context.Background()); err != nil {
				t.Errorf("drain the trash: %v", err)
			}
			tr.Close()
		}()
		discard = func(path string) error {
			_, err := tr.Discard(path)
			if errors.Is(err, fs.ErrNotExist) {
				err = fmt.Errorf("%w: %w", err, backend.ErrNotFound) // as the engine's
			}
			return err
		}
	}
	return d.Delete(context.Background(), rt, backend.DeleteOptions{Discard: discard, Step: backend.StepDelete})
}
