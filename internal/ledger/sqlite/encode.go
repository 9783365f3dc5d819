package sqlite

import (
	"database/sql"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// Column encodings shared by every table (see migrations/).

// A key is stored in the same three columns of every table: keyColumns
// names them, keyMatch compares them, keyArgs gives a key's values in that
// order and keyDest its scan destinations. This is the one place that knows
// how a ledger.Key is encoded.
const (
	keyColumns = "backend, source, runtime_id"
	keyMatch   = "backend = ? AND source = ? AND runtime_id = ?"
	keyOrder   = "backend, source, runtime_id"
)

func keyArgs(k ledger.Key) []any { return []any{k.Backend, k.Source, k.ID} }

func keyDest(k *ledger.Key) []any { return []any{&k.Backend, &k.Source, &k.ID} }

// withKey returns the key's values followed by more, for a statement whose
// key columns come first.
func withKey(k ledger.Key, more ...any) []any { return append(keyArgs(k), more...) }

// nanos encodes a time as Unix nanoseconds; the zero time is NULL.
func nanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// fromNanos decodes what nanos encoded, in UTC.
func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// jsonList encodes a slice as JSON text; an empty one is NULL, so nil and
// empty read back the same (as nil).
func jsonList[T any](v []T) (sql.NullString, error) {
	if len(v) == 0 {
		return sql.NullString{}, nil
	}
	return marshalText(v)
}

// jsonMap encodes a map as JSON text; an empty one is NULL, like jsonList.
func jsonMap(m map[string]string) (sql.NullString, error) {
	if len(m) == 0 {
		return sql.NullString{}, nil
	}
	return marshalText(m)
}

func marshalText(v any) (sql.NullString, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// fromJSONText decodes what jsonList encoded into dst.
func fromJSONText(s sql.NullString, dst any) error {
	if !s.Valid {
		return nil
	}
	return json.Unmarshal([]byte(s.String), dst)
}

// fromJSONStrings decodes what jsonList encoded for a []string.
func fromJSONStrings(s sql.NullString) ([]string, error) {
	if !s.Valid {
		return nil, nil
	}
	if strs, ok := plainStrings(s.String, '[', ']'); ok {
		return strs, nil
	}
	var out []string
	err := json.Unmarshal([]byte(s.String), &out)
	return out, err
}

// fromJSONMap decodes what jsonMap encoded.
func fromJSONMap(s sql.NullString) (map[string]string, error) {
	if !s.Valid {
		return nil, nil
	}
	if strs, ok := plainStrings(s.String, '{', '}'); ok {
		m := make(map[string]string, len(strs)/2)
		for i := 0; i < len(strs); i += 2 {
			m[strs[i]] = strs[i+1]
		}
		return m, nil
	}
	var out map[string]string
	err := json.Unmarshal([]byte(s.String), &out)
	return out, err
}

// plainStrings splits the compact JSON that json.Marshal writes for a list of
// strings (between '[' and ']') or a map of strings (between '{' and '}',
// keys and values alternating), provided that no string in it needs an
// escape. It reports false for anything else, and the caller falls back to
// encoding/json. Why: json.Unmarshal was a third of the time of listing
// 100,000 runtimes, and workspace paths and labels rarely need escapes.
func plainStrings(s string, open, close byte) ([]string, bool) {
	if len(s) < 2 || s[0] != open || s[len(s)-1] != close ||
		strings.IndexByte(s, '\\') >= 0 || !utf8.ValidString(s) {
		return nil, false
	}
	var out []string
	body := s[1 : len(s)-1]
	for i := 0; body != ""; i++ {
		if i > 0 {
			sep := byte(',')
			if open == '{' && i%2 == 1 {
				sep = ':'
			}
			if body[0] != sep {
				return nil, false
			}
			body = body[1:]
		}
		if len(body) < 2 || body[0] != '"' {
			return nil, false
		}
		end := strings.IndexByte(body[1:], '"')
		if end < 0 {
			return nil, false
		}
		str := body[1 : 1+end]
		for j := range len(str) {
			if str[j] < 0x20 { // JSON requires control characters escaped
				return nil, false
			}
		}
		out = append(out, str)
		body = body[end+2:]
	}
	if open == '{' && len(out)%2 != 0 {
		return nil, false
	}
	return out, true
}
