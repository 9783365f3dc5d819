package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// archiveRow is an archive as its columns hold it; comparing two rows tells
// whether a repeated RecordArchive is the same archive.
type archiveRow struct {
	id               string
	key              ledger.Key
	createdAt        int64
	location         string
	formats, objects sql.NullString
	bytes            int64
	manifest         sql.NullString
}

func encodeArchive(a ledger.Archive) (archiveRow, error) {
	formats, err := jsonList(a.Formats)
	if err != nil {
		return archiveRow{}, err
	}
	objects, err := jsonList(a.Objects)
	if err != nil {
		return archiveRow{}, err
	}
	row := archiveRow{
		id: a.ID, key: a.Key,
		createdAt: a.CreatedAt.UnixNano(), location: a.Location, bytes: a.Bytes,
		formats: formats, objects: objects,
	}
	if len(a.Manifest) > 0 {
		// Compact, so the same manifest formatted differently is still the
		// same archive.
		var buf bytes.Buffer
		if err := json.Compact(&buf, a.Manifest); err != nil {
			return archiveRow{}, err
		}
		row.manifest = sql.NullString{String: buf.String(), Valid: true}
	}
	return row, nil
}

func (r archiveRow) decode() (ledger.Archive, error) {
	a := ledger.Archive{
		ID: r.id, Key: r.key,
		CreatedAt: time.Unix(0, r.createdAt).UTC(), Location: r.location, Bytes: r.bytes,
	}
	var err error
	if a.Formats, err = fromJSONStrings(r.formats); err != nil {
		return a, fmt.Errorf("decode formats of archive %s: %w", r.id, err)
	}
	if err := fromJSONText(r.objects, &a.Objects); err != nil {
		return a, fmt.Errorf("decode objects of archive %s: %w", r.id, err)
	}
	if r.manifest.Valid {
		a.Manifest = json.RawMessage(r.manifest.String)
	}
	return a, nil
}

const archiveColumns = `id, ` + keyColumns + `, created_at, location, formats, bytes, objects, manifest`

func scanArchiveRow(row rowScanner) (archiveRow, error) {
	var r archiveRow
	err := row.Scan(append(append([]any{&r.id}, keyDest(&r.key)...), &r.createdAt, &r.location, &r.formats, &r.bytes, &r.objects, &r.manifest)...)
	return r, err
}

// RecordArchive implements ledger.Store.
func (s *Store) RecordArchive(ctx context.Context, a ledger.Archive) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("record archive: %w", err)
	}
	row, err := encodeArchive(a)
	if err != nil {
		return fmt.Errorf("record archive %s: %w", a.ID, err)
	}
	err = s.inWriteTx(ctx, func(tx *sql.Tx) error {
		stored, err := scanArchiveRow(tx.QueryRowContext(ctx, `SELECT `+archiveColumns+` FROM archives WHERE id = ?`, a.ID))
		switch {
		case err == nil && stored == row:
			return nil
		case err == nil:
			return fmt.Errorf("a different archive has this id: %w", ledger.ErrConflict)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO archives (`+archiveColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			append(append([]any{row.id}, keyArgs(row.key)...), row.createdAt, row.location, row.formats, row.bytes, row.objects, row.manifest)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("record archive %s: %w", a.ID, err)
	}
	return nil
}

// Archive implements ledger.Store.
func (s *Store) Archive(ctx context.Context, id string) (ledger.Archive, error) {
	row, err := scanArchiveRow(s.read.QueryRowContext(ctx, `SELECT `+archiveColumns+` FROM archives WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = ledger.ErrNotFound
	}
	if err != nil {
		return ledger.Archive{}, fmt.Errorf("get archive %s: %w", id, err)
	}
	return row.decode()
}

// ListArchives implements ledger.Store.
func (s *Store) ListArchives(ctx context.Context, key ledger.Key) ([]ledger.Archive, error) {
	query := `SELECT ` + archiveColumns + ` FROM archives`
	var args []any
	if !key.IsZero() {
		query += ` WHERE ` + keyMatch
		args = append(args, keyArgs(key)...)
	}
	query += ` ORDER BY created_at DESC, id DESC`
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list archives: %w", err)
	}
	defer rows.Close()
	var out []ledger.Archive
	for rows.Next() {
		row, err := scanArchiveRow(rows)
		if err != nil {
			return nil, fmt.Errorf("list archives: %w", err)
		}
		a, err := row.decode()
		if err != nil {
			return nil, fmt.Errorf("list archives: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list archives: %w", err)
	}
	return out, nil
}

// DeleteArchive implements ledger.Store.
func (s *Store) DeleteArchive(ctx context.Context, id string) error {
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM archives WHERE id = ?`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete archive %s: %w", id, err)
	}
	return nil
}
