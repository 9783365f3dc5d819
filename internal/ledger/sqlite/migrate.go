package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/reclaimer/reclaimer/internal/ledger/schema"
)

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationFiles is the folder of numbered migrations: NNNN_name.sql.
var migrationFiles = schema.MustSub(embeddedMigrations, "migrations")

// migrate applies the migrations of fsys not yet recorded, all in one
// transaction. The recorded versions are read inside that transaction, so
// two processes opening one file at once apply each migration once.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS) error {
	ms, err := schema.Load(fsys)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	// applied_at uses SQLite's clock: it is bookkeeping for people reading
	// the file, never compared by the program.
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
	)`); err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	if latest := schema.Latest(ms); current > latest {
		return fmt.Errorf("migrate schema: version %d of the file is newer than this program's %d", current, latest)
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate schema to %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("migrate schema to %s: %w", m.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	return nil
}
