package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/schema"
)

// DefaultMaxConns bounds a store's pool when the URL does not say
// (pool_max_conns): see the package documentation for why 10.
const DefaultMaxConns = 10

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

var migrationFiles = schema.MustSub(embeddedMigrations, "migrations")

// querier is what the pool and a transaction have in common: a Store
// works the same on either (a Fenced view runs in one transaction).
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store is the PostgreSQL ledger.Store.
type Store struct {
	db querier
	// pool is nil in the view a Fenced function gets.
	pool *pgxpool.Pool
	// lockSlots bounds how many pool connections locks hold at once, so
	// the store calls a lock holder makes always find a free one.
	lockSlots chan struct{}
	url       *pgxpool.Config
	held      sync.Map // *heldLock: locks not yet released

	closeOnce sync.Once
}

var (
	_ ledger.Store  = (*Store)(nil)
	_ ledger.Locker = (*Store)(nil)
	_ ledger.Fencer = (*Store)(nil)
)

// Open connects to the database at url (postgres://user@host/db?... or
// postgres:///db?host=/run/postgresql), with a pool of at most
// pool_max_conns connections (DefaultMaxConns when the URL does not say),
// and brings the schema up to date under an advisory lock.
func Open(ctx context.Context, url string) (*Store, error) {
	return OpenWith(ctx, url, Options{})
}

// Options tune OpenWith.
type Options struct {
	// Password, when set, is the role's password ([ledger]
	// password_file), in place of the URL's, PGPASSWORD or ~/.pgpass.
	Password string
}

// OpenWith is Open with opts.
func OpenWith(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", redact(err))
	}
	if opts.Password != "" {
		cfg.ConnConfig.Password = opts.Password
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "reclaimer"
	}
	// Times are numbers, never rendered by the server; UTC keeps what an
	// operator reads in psql next to them plain.
	if _, ok := cfg.ConnConfig.RuntimeParams["timezone"]; !ok {
		cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", redact(err))
	}
	if err := migrate(ctx, pool, migrationFiles); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open ledger: %w", redact(err))
	}
	return &Store{db: pool, pool: pool, url: cfg, lockSlots: make(chan struct{}, max(1, int(cfg.MaxConns)/2))}, nil
}

// MaxConns is the most connections the store's pool opens.
func (s *Store) MaxConns() int {
	if s.pool == nil {
		return 0
	}
	return int(s.pool.Config().MaxConns)
}

// Close releases the locks still held, then closes the pool, waiting for
// the connections in use to come back. Calling it again returns nil.
func (s *Store) Close() error {
	if s.pool == nil {
		return errors.New("close ledger: a transaction's view cannot close the store")
	}
	s.closeOnce.Do(func() {
		s.releaseHeld()
		s.pool.Close()
	})
	return nil
}

// inTx runs fn in a transaction of s (a savepoint inside a Fenced view)
// and commits it, or rolls back when fn fails.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.db, fn)
}

// collect runs a query and scans every row with scan; no rows is nil.
func collect[T any](ctx context.Context, q querier, scan func(pgx.Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.AppendRows([]T(nil), rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
}

// notFound turns "no rows" into ledger.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.ErrNotFound
	}
	return err
}

// redact keeps a password out of an error about the URL: pgx's parse
// errors quote the connection string, masking passwords only on a
// best-effort basis.
func redact(err error) error {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return err
	}
	msg := pe.Error()
	if _, after, ok := strings.Cut(msg, "`: "); ok {
		msg = after
	}
	return fmt.Errorf("invalid ledger url: %s", msg)
}

// view is the Store a Fenced function gets: the same methods, in tx.
func (s *Store) view(tx pgx.Tx) *Store {
	return &Store{db: tx, url: s.url}
}

// errInView refuses what a transaction's view cannot do.
var errInView = errors.New("not possible inside a fenced transaction")

// placeholders lists n parameters from $from: "$1, $2, $3".
func placeholders(from, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("$%d", from+i)
	}
	return strings.Join(ps, ", ")
}
