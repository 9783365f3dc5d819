package ops

import (
	"context"
	"fmt"

	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
)

// OpenLedger opens the ledger of cfg: PostgreSQL at [ledger] url (with
// password_file's password), else the SQLite file at path. A password
// file that cannot be read is a configuration error; no error carries
// the password.
func OpenLedger(ctx context.Context, cfg *config.Config) (ledger.Store, error) {
	if !cfg.Fleet() {
		st, err := sqlite.Open(ctx, cfg.Ledger.Path)
		if err != nil {
			return nil, fmt.Errorf("open ledger: %w", err)
		}
		return st, nil
	}
	pw, err := cfg.LedgerPassword()
	if err != nil && pw == "" {
		return nil, &InputError{Msg: err.Error()}
	}
	st, err := postgres.OpenWith(ctx, cfg.Ledger.URL, postgres.Options{Password: pw})
	if err != nil {
		return nil, fmt.Errorf("%w (ledger.url %s)", err, cfg.RedactedLedgerURL())
	}
	return st, nil
}

// neverLeads is the leadership of a process that takes no part in the
// election (the CLI on a fleet's host): the remote sources are the
// leader's, so it leaves them alone.
func neverLeads() (*leader.Term, bool) { return nil, false }
