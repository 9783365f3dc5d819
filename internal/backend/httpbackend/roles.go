package httpbackend

import (
	"context"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// The roles a server may advertise, each a small wrapper, and one type per
// combination, so that a backend has exactly the roles its server
// supports: the policy then never plans a step the server cannot do (it
// says "its backend cannot suspend it"), and `native plan` shows timers it
// cannot read as absent.

type suspendRole struct{ b *Backend }

// Suspend asks the server to suspend the runtime.
func (r suspendRole) Suspend(ctx context.Context, rt backend.Runtime, o backend.SuspendOptions) error {
	return r.b.suspend(ctx, rt, o)
}

type deleteRole struct{ b *Backend }

// Delete removes the runtime (archives it, for StepArchive, where the server
// keeps a restorable copy).
func (r deleteRole) Delete(ctx context.Context, rt backend.Runtime, o backend.DeleteOptions) error {
	return r.b.remove(ctx, rt, o)
}

type lifecycleRole struct{ b *Backend }

// Lifecycle reads, writes and touches the runtime's timers.
func (r lifecycleRole) Lifecycle(ctx context.Context, rt backend.Runtime, o backend.LifecycleOptions) (backend.Lifecycle, error) {
	return r.b.lifecycle(ctx, rt, o)
}

type (
	withS struct {
		*Backend
		suspendRole
	}
	withD struct {
		*Backend
		deleteRole
	}
	withL struct {
		*Backend
		lifecycleRole
	}
	withSD struct {
		*Backend
		suspendRole
		deleteRole
	}
	withSL struct {
		*Backend
		suspendRole
		lifecycleRole
	}
	withDL struct {
		*Backend
		deleteRole
		lifecycleRole
	}
	withSDL struct {
		*Backend
		suspendRole
		deleteRole
		lifecycleRole
	}
)

// Unwrap returns the Backend, so that As and callers can reach it.
func (v withS) Unwrap() backend.Backend   { return v.Backend }
func (v withD) Unwrap() backend.Backend   { return v.Backend }
func (v withL) Unwrap() backend.Backend   { return v.Backend }
func (v withSD) Unwrap() backend.Backend  { return v.Backend }
func (v withSL) Unwrap() backend.Backend  { return v.Backend }
func (v withDL) Unwrap() backend.Backend  { return v.Backend }
func (v withSDL) Unwrap() backend.Backend { return v.Backend }

// With returns b with the roles named (OpSuspend, OpDelete, OpLifecycle);
// the others are absent.
func With(b *Backend, ops map[string]bool) backend.Backend {
	s, d, l := ops[OpSuspend], ops[OpDelete], ops[OpLifecycle]
	sr, dr, lr := suspendRole{b}, deleteRole{b}, lifecycleRole{b}
	switch {
	case s && d && l:
		return withSDL{b, sr, dr, lr}
	case s && d:
		return withSD{b, sr, dr}
	case s && l:
		return withSL{b, sr, lr}
	case d && l:
		return withDL{b, dr, lr}
	case s:
		return withS{b, sr}
	case d:
		return withD{b, dr}
	case l:
		return withL{b, lr}
	}
	return b
}

// Open reads the server's capabilities document and returns b with exactly
// the roles it advertises. When the server cannot be reached, it returns b
// with every role, each of which checks the capabilities again when used
// (and fails with errors.ErrUnsupported for what the server lacks), so an
// outage at start-up does not take roles away for good; err says why.
func Open(ctx context.Context, b *Backend) (backend.Backend, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ops, err := b.Capabilities(ctx)
	if err != nil {
		return With(b, map[string]bool{OpSuspend: true, OpDelete: true, OpLifecycle: true}), err
	}
	return With(b, ops), nil
}

var (
	_ backend.Suspender       = withSDL{}
	_ backend.Deleter         = withSDL{}
	_ backend.NativeLifecycle = withSDL{}
	_ backend.Wrapper         = withSDL{}
	_ backend.Suspender       = withS{}
	_ backend.Deleter         = withD{}
	_ backend.NativeLifecycle = withL{}
)
