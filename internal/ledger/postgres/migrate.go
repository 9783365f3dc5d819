package postgres

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reclaimer/reclaimer/internal/ledger/schema"
)

// migrateLockID is the advisory lock schema changes are made under: a
// constant of its own, apart from the hashed runtime locks (key.go).
const migrateLockID int64 = 0x7265636c61696d00 // "reclaim\0"

// migrate applies the migrations of fsys not yet recorded, all in one
// transaction (DDL is transactional in PostgreSQL: a failed migration
// leaves the schema as it was) under a transaction-scoped advisory lock:
// replicas starting at once queue here, and the ones after the first find
// nothing left to do. A database whose schema is newer than this program
// is refused rather than misread.
func migrate(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) error {
	ms, err := schema.Load(fsys)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLockID); err != nil {
			return err
		}
		// applied_at uses the server's clock: bookkeeping for people
		// reading the table, never compared by the program.
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return err
		}
		if latest := schema.Latest(ms); current > latest {
			return fmt.Errorf("version %d of the database is newer than this program's %d", current, latest)
		}
		for _, m := range ms {
			if m.Version <= current {
				continue
			}
			// No arguments: the simple protocol, which runs a file of
			// several statements.
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("to %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return fmt.Errorf("to %s: %w", m.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	return nil
}
