package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ipvsctl/ipvsctl/server/events"
)

// EventsKept bounds the events table: each save drops what is older than
// the newest EventsKept (and Prune what is older than the retention).
const EventsKept = 100000

// SaveEvents keeps evs, numbered by the daemon's events.Log, in one
// transaction.
func (s *Store) SaveEvents(ctx context.Context, evs []events.Event) error {
	if len(evs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("keep events: %w", busy(err))
	}
	defer tx.Rollback()
	xctx := context.WithoutCancel(ctx) // as SaveHealthTransitions: a burst, no goroutine per statement
	for _, e := range evs {
		var fields []byte
		if len(e.Fields) > 0 {
			if fields, err = json.Marshal(e.Fields); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(xctx, `INSERT OR REPLACE INTO events (id, at, type, subject, message, fields) VALUES (?, ?, ?, ?, ?, ?)`,
			e.ID, dbTime(e.Time), e.Type, e.Subject, e.Message, string(fields)); err != nil {
			return fmt.Errorf("keep event %d: %w", e.ID, busy(err))
		}
	}
	if _, err := tx.ExecContext(xctx, `DELETE FROM events WHERE id <= ?`, evs[len(evs)-1].ID-EventsKept); err != nil {
		return fmt.Errorf("keep events: %w", busy(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("keep events: %w", busy(err))
	}
	return nil
}

// EventsAfter returns up to limit events with an ID above after, oldest first.
func (s *Store) EventsAfter(ctx context.Context, after int64, limit int) ([]events.Event, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, at, type, subject, message, fields FROM events WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", busy(err))
	}
	defer rows.Close()
	var out []events.Event
	for rows.Next() {
		var e events.Event
		var at, fields string
		if err := rows.Scan(&e.ID, &at, &e.Type, &e.Subject, &e.Message, &fields); err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		e.Time = parseTime(at)
		if fields != "" {
			if err := json.Unmarshal([]byte(fields), &e.Fields); err != nil {
				return nil, fmt.Errorf("read event %d: fields: %w", e.ID, err)
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// LastEventID is the ID of the newest event kept (0: none).
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	var id int64
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM events`).Scan(&id); err != nil {
		return 0, fmt.Errorf("read events: %w", busy(err))
	}
	return id, nil
}
