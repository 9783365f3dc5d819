package kubernetes

import (
	"context"
	"fmt"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/kubeclient"
)

// Export implements backend.Exporter: a VolumeSnapshot of each of the
// runtime's volumes, waited for until ready, recorded in the archive's
// manifest (kubeclient.ExportSnapshots). When the cluster serves no
// snapshot API, or a snapshot is not ready within snapshot_timeout, the
// export fails and the runtime stays as it is.
func (b *Backend) Export(ctx context.Context, rt backend.Runtime, opts backend.ExportOptions) (backend.Export, error) {
	_, g, err := b.current(ctx, rt, false)
	if err != nil {
		return backend.Export{}, fmt.Errorf("archive %s: %w", rt.Key, err)
	}
	return b.client.ExportSnapshots(ctx, kubeclient.Snapshots{Namespace: b.opts.Namespace, Key: rt.Key, Claims: g.pvcs(),
		Class: b.opts.SnapshotClass, Timeout: b.opts.SnapshotTimeout,
		NotKept: []string{"the runtime's Deployment, Service, route, budget and account (its owner recreates them)"},
		NoAPI:   `set archive = "none" to delete without`}, opts)
}

// Restore implements backend.Restorer: a new claim from each snapshot of
// the archive, named in the output (kubeclient.RestoreClaims).
func (b *Backend) Restore(ctx context.Context, k backend.Key, opts backend.RestoreOptions) (string, error) {
	return b.client.RestoreClaims(ctx, k, b.opts.Namespace, opts)
}

var (
	_ backend.Backend   = (*Backend)(nil)
	_ backend.Lister    = (*Backend)(nil)
	_ backend.Suspender = (*Backend)(nil)
	_ backend.Deleter   = (*Backend)(nil)
	_ backend.Exporter  = (*Backend)(nil)
	_ backend.Restorer  = (*Backend)(nil)

	_ backend.Backend   = (*NoArchive)(nil)
	_ backend.Lister    = (*NoArchive)(nil)
	_ backend.Suspender = (*NoArchive)(nil)
	_ backend.Deleter   = (*NoArchive)(nil)
)
