package postgres

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Times are bigint nanoseconds since 1970 in every column (see
// migrations/0001_init.sql for why); NULL is the zero time.

// nanos encodes a time; the zero time is NULL.
func nanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// fromNanos decodes what nanos encoded, in UTC.
func fromNanos(n pgtype.Int8) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// utc decodes a NOT NULL time column.
func utc(n int64) time.Time { return time.Unix(0, n).UTC() }
