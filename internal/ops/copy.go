package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/sources"
	"github.com/reclaimer/reclaimer/internal/views"
)

// CopyRequest asks for a host's SQLite ledger to be copied into an empty
// PostgreSQL ledger (moving a host into a fleet).
type CopyRequest struct {
	// From is the SQLite file; default the configuration's [ledger] path.
	From string
	// To is the PostgreSQL URL (required); Password its role's, when not
	// in the URL, PGPASSWORD or ~/.pgpass.
	To       string
	Password string
	// Replica is the name this host will have in the fleet ([server]
	// name); its local sources' runtimes take it.
	Replica string
}

// CopyLedger copies every record of the SQLite ledger into the empty
// PostgreSQL one at req.To, renaming the configuration's local sources as
// the fleet names them (replica/source), then reads the target back and
// checks the counts and the digest of every record against the source.
// A target that holds records is refused (ErrConflict) and left alone.
func CopyLedger(ctx context.Context, cfg *config.Config, req CopyRequest) (*views.LedgerCopy, error) {
	if req.To == "" {
		return nil, Input("to", "--to: the PostgreSQL ledger's URL is required")
	}
	if req.From == "" {
		req.From = cfg.Ledger.Path
	}
	if req.Replica == "" {
		req.Replica = cfg.ReplicaName()
	}
	probe := *cfg
	probe.Server.Name, probe.Ledger.URL = req.Replica, req.To
	if err := probe.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(req.From); err != nil {
		return nil, Input("from", "the SQLite ledger %s: %v", req.From, err)
	}
	src, err := sqlite.Open(ctx, req.From)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", req.From, err)
	}
	defer src.Close()
	snap, err := ledger.ReadSnapshot(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", req.From, err)
	}

	renamed := map[string]string{}
	configured := map[string]bool{}
	for _, s := range cfg.Sources {
		configured[s.Name()] = true
		if k, ok := sources.KindOf(s.Kind); ok && k.Local {
			renamed[s.Name()] = sources.LocalName(req.Replica, s.Name())
		}
	}
	foreign := map[string]bool{}
	snap.Rekey(func(k ledger.Key) ledger.Key {
		if to, ok := renamed[k.Source]; ok {
			k.Source = to
		} else if !configured[k.Source] {
			foreign[k.Source] = true
		}
		return k
	})

	dst, err := postgres.OpenWith(ctx, req.To, postgres.Options{Password: req.Password})
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, config.RedactURL(req.To))
	}
	defer dst.Close()
	if err := dst.Load(ctx, snap); err != nil {
		if errors.Is(err, postgres.ErrNotEmpty) {
			return nil, fmt.Errorf("%w: a copy goes into an empty database only, so that no fleet's records are mixed with it: %w", err, backend.ErrConflict)
		}
		return nil, err
	}
	back, err := ledger.ReadSnapshot(ctx, dst)
	if err != nil {
		return nil, fmt.Errorf("read the copy back: %w", err)
	}
	want, got := snap.Counts(), back.Counts()
	if !maps.Equal(want, got) {
		return nil, fmt.Errorf("the copy does not check: %v copied, %v read back", want, got)
	}
	digest := snap.Digest()
	if d := back.Digest(); d != digest {
		return nil, fmt.Errorf("the copy does not check: digest %s of the SQLite ledger, %s read back", digest, d)
	}
	out := &views.LedgerCopy{From: req.From, To: config.RedactURL(req.To), Replica: req.Replica, Renamed: renamed,
		Counts: want, Digest: digest}
	delete(foreign, "")
	out.Foreign = slices.Sorted(maps.Keys(foreign))
	return out, nil
}
