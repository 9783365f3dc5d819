package ops

import (
	"context"

	"github.com/reclaimer/reclaimer/internal/views"
)

// Service is every operation the command line offers: *App (local: it
// opens the ledger and the sources) and the --server client (the HTTP API
// of a running daemon, whose handlers call an *App) implement it, so a
// command is parse, call, print, written once, and both give the same
// answers (the views).
type Service interface {
	Plan(ctx context.Context, req PlanRequest) (*views.Plan, error)
	Apply(ctx context.Context, req ApplyRequest) (*views.Pass, error)
	Status(ctx context.Context) (*views.Status, error)
	Runtimes(ctx context.Context, q RuntimeQuery) (*views.RuntimeList, error)
	// Explain is why one runtime is where it is (a dry run now).
	Explain(ctx context.Context, ref Ref) (*views.Explain, error)
	Mark(ctx context.Context, req MarkRequest) ([]views.Marked, error)
	Journal(ctx context.Context, q JournalQuery) (*views.Journal, error)
	Archives(ctx context.Context, name string) ([]views.Archive, error)
	Prune(ctx context.Context, req PruneRequest) (*views.Prune, error)
	Restore(ctx context.Context, req RestoreRequest) (*views.Restored, error)
	NativeReport(ctx context.Context, sync bool) (*views.NativeReport, error)
	// Drain waits for what the command freed to be really gone (local:
	// the trash's purge; a daemon purges on its own).
	Drain(ctx context.Context) error
	Close() error
}

var _ Service = (*App)(nil)

// NativeReport is Native for every runtime.
func (a *App) NativeReport(ctx context.Context, sync bool) (*views.NativeReport, error) {
	return a.Native(ctx, sync, nil)
}
