package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/reclaimer/reclaimer/internal/ledger"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// busyTimeoutMillis is how long a writer waits for another process holding
// the write lock. Ledger transactions last milliseconds; seconds of waiting
// means something is wrong and an error is better than hanging a pass.
const busyTimeoutMillis = 5000

// Store is the SQLite ledger.Store.
type Store struct {
	write *sql.DB // one connection: SQLite allows one writer at a time
	read  *sql.DB // read-only pool

	closeOnce sync.Once
	closeErr  error
}

var _ ledger.Store = (*Store)(nil)

// Open opens the ledger at path, creating the file and its folder if needed,
// and brings its schema up to date.
func Open(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	// The ledger records paths and labels of other people's work: keep the
	// folder private when we are the ones creating it.
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	// Create the file ourselves, 0600: the driver would create it 0644,
	// and SQLite gives its WAL and shared-memory files the database
	// file's mode. A file that exists keeps the mode its owner chose.
	if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("open ledger: %w", err)
	}

	write, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	// Migrate before the read pool opens: the file and its WAL exist by then.
	if err := migrate(ctx, write, migrationFiles); err != nil {
		write.Close()
		return nil, fmt.Errorf("open ledger: %w", err)
	}

	read, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	readers := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(readers)
	read.SetMaxIdleConns(readers)
	read.SetConnMaxLifetime(0)
	read.SetConnMaxIdleTime(0)
	if err := read.PingContext(ctx); err != nil {
		read.Close()
		write.Close()
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return &Store{write: write, read: read}, nil
}

// dsn builds the driver's connection string. The path goes through a file:
// URI so that any character in it ('?', '#', '%') is escaped, not parsed.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeoutMillis))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "1")
	if readOnly {
		q.Set("_query_only", "1")
	} else {
		// Take the write lock at BEGIN, not at the first write: a
		// read-then-write transaction that upgrades later can fail with
		// SQLITE_BUSY when another process wrote in between, whatever
		// the busy timeout.
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	return u.String()
}

// Close closes both pools. Calling it again returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.read.Close(), s.write.Close())
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("close ledger: %w", s.closeErr)
		}
	})
	return s.closeErr
}

// inWriteTx runs fn in a write transaction and commits it, or rolls it back
// when fn fails.
func (s *Store) inWriteTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return tx.Commit()
}

// ignoreDone drops the error Rollback returns when a canceled context has
// already rolled the transaction back.
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
