package store

import (
	"database/sql"
	"time"
)

// timeLayout is how the auth tables keep times: UTC and of fixed width, so
// that SQLite compares them as text in time order.
const timeLayout = "2006-01-02T15:04:05.000000Z"

func dbTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func dbTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return dbTime(*t)
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func parseNullTime(s sql.NullString) *time.Time {
	if !s.Valid {
		return nil
	}
	t := parseTime(s.String)
	return &t
}
