package postgres

import (
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// This file is the one place where a ledger.Key becomes columns,
// parameters, an order and a lock id, and back. Every table names a key's
// columns the same way (backend, source, runtime_id); a field added to Key
// is added here and in a migration, and nowhere else.

// keyColumns are a key's columns, in Key.Compare order.
const keyColumns = "backend, source, runtime_id"

// keyArity is how many parameters a key takes.
const keyArity = 3

// keyArgs are a key's parameters, in keyColumns order.
func keyArgs(k ledger.Key) []any { return []any{k.Backend, k.Source, k.ID} }

// keyDest are scan destinations for keyColumns.
func keyDest(k *ledger.Key) []any { return []any{&k.Backend, &k.Source, &k.ID} }

// keyEquals is the condition "this row's key is the one at parameters $n..".
func keyEquals(n int) string {
	return fmt.Sprintf("backend = $%d AND source = $%d AND runtime_id = $%d", n, n+1, n+2)
}

// keyAfter is the pagination condition "this row's key sorts after $n..".
func keyAfter(n int) string {
	return fmt.Sprintf("(backend, source, runtime_id) > ($%d, $%d, $%d)", n, n+1, n+2)
}

// keyOrder orders rows by key (Key.Compare: bytewise, from the "C"
// collation of the key columns).
const keyOrder = "backend, source, runtime_id"

// keyArrays holds the keys of a batch as one array per column, for
// unnest: a batch of any size is one statement.
type keyArrays struct{ backends, sources, ids []string }

func newKeyArrays(n int) keyArrays {
	return keyArrays{backends: make([]string, 0, n), sources: make([]string, 0, n), ids: make([]string, 0, n)}
}

func (a *keyArrays) add(k ledger.Key) {
	a.backends = append(a.backends, k.Backend)
	a.sources = append(a.sources, k.Source)
	a.ids = append(a.ids, k.ID)
}

func (a keyArrays) args() []any { return []any{a.backends, a.sources, a.ids} }

// keyUnnest are the unnest arguments of keyArrays at parameters $n..,
// and keyUnnestColumns the names of what it yields.
func keyUnnest(n int) string {
	return fmt.Sprintf("$%d::text[], $%d::text[], $%d::text[]", n, n+1, n+2)
}

const keyUnnestColumns = "backend, source, runtime_id"

// sortKeys orders a batch by key, so that every writer locks rows in one
// order and two concurrent batches (two replicas) never deadlock.
func sortKeys[T any](batch []T, key func(T) ledger.Key) {
	slices.SortFunc(batch, func(a, b T) int { return key(a).Compare(key(b)) })
}

// lockID is the advisory lock id of a key's runtime: an FNV-64a hash of a
// text no other kind of lock of this program starts with (as Coder does
// for its lifecycle executor). Two keys sharing an id only make each
// other wait or look busy, which is safe.
func lockID(k ledger.Key) int64 {
	h := fnv.New64a()
	h.Write([]byte("reclaimer-runtime\x00" + k.Backend + "\x00" + k.ID + "\x00" + k.Source))
	return int64(h.Sum64())
}

// keyFromRaw decodes a key from the first keyArity raw values of a row
// (a text column's binary form is its bytes); intern shares the copies of
// strings that repeat on every row (backends).
func keyFromRaw(v [][]byte, intern func([]byte) string) ledger.Key {
	return ledger.Key{Backend: intern(v[0]), Source: intern(v[1]), ID: string(v[2])}
}
