package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

const archiveColumns = `id, ` + keyColumns + `, created_at, location, formats, bytes, objects, manifest`

// archiveArgs are an archive's parameters in archiveColumns order; the
// two JSON columns travel as text and are cast by the statement.
func archiveArgs(a ledger.Archive) ([]any, error) {
	objects, err := jsonText(a.Objects, len(a.Objects))
	if err != nil {
		return nil, err
	}
	var manifest *string
	if len(a.Manifest) > 0 {
		m := string(a.Manifest)
		manifest = &m
	}
	args := append([]any{a.ID}, keyArgs(a.Key)...)
	return append(args, a.CreatedAt.UnixNano(), a.Location, nilIfEmpty(a.Formats), a.Bytes, objects, manifest), nil
}

// RecordArchive implements ledger.Store.
func (s *Store) RecordArchive(ctx context.Context, a ledger.Archive) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("record archive: %w", err)
	}
	args, err := archiveArgs(a)
	if err != nil {
		return fmt.Errorf("record archive %s: %w", a.ID, err)
	}
	n := len(args)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO archives (`+archiveColumns+`) VALUES (`+placeholders(1, n-2)+
			fmt.Sprintf(`, $%d::jsonb, $%d::jsonb) ON CONFLICT (id) DO NOTHING`, n-1, n), args...)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		// The id is taken: the same archive again (a retried step) is
		// harmless, compared by value (jsonb: formatting and key order of
		// the manifest do not count); another one under it is a conflict.
		var same bool
		err = tx.QueryRow(ctx, `SELECT (`+archiveColumns+`) IS NOT DISTINCT FROM
			(`+placeholders(1, n-2)+fmt.Sprintf(`, $%d::jsonb, $%d::jsonb) FROM archives WHERE id = $1`, n-1, n), args...).Scan(&same)
		if err != nil {
			return notFound(err)
		}
		if !same {
			return fmt.Errorf("a different archive has this id: %w", ledger.ErrConflict)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record archive %s: %w", a.ID, err)
	}
	return nil
}

func scanArchive(row pgx.Row) (ledger.Archive, error) {
	var (
		a                 ledger.Archive
		createdAt         int64
		objects, manifest []byte
	)
	dest := append(append([]any{&a.ID}, keyDest(&a.Key)...), &createdAt, &a.Location, &a.Formats, &a.Bytes, &objects, &manifest)
	if err := row.Scan(dest...); err != nil {
		return a, err
	}
	a.CreatedAt = utc(createdAt)
	if len(objects) > 0 {
		if err := json.Unmarshal(objects, &a.Objects); err != nil {
			return a, fmt.Errorf("decode objects of archive %s: %w", a.ID, err)
		}
	}
	if len(manifest) > 0 {
		a.Manifest = json.RawMessage(manifest)
	}
	return a, nil
}

// Archive implements ledger.Store.
func (s *Store) Archive(ctx context.Context, id string) (ledger.Archive, error) {
	a, err := scanArchive(s.db.QueryRow(ctx, `SELECT `+archiveColumns+` FROM archives WHERE id = $1`, id))
	if err != nil {
		return ledger.Archive{}, fmt.Errorf("get archive %s: %w", id, notFound(err))
	}
	return a, nil
}

// ListArchives implements ledger.Store.
func (s *Store) ListArchives(ctx context.Context, key ledger.Key) ([]ledger.Archive, error) {
	query := `SELECT ` + archiveColumns + ` FROM archives`
	var args []any
	if !key.IsZero() {
		query += ` WHERE ` + keyEquals(1)
		args = keyArgs(key)
	}
	query += ` ORDER BY created_at DESC, id DESC`
	out, err := collect(ctx, s.db, scanArchive, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list archives: %w", err)
	}
	return out, nil
}

// DeleteArchive implements ledger.Store.
func (s *Store) DeleteArchive(ctx context.Context, id string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM archives WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete archive %s: %w", id, err)
	}
	return nil
}
