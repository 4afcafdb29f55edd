package store

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
)

// Watcher tells whether anything was committed to the database since it
// last looked, by this process's other connections or by another process
// (SQLite's data_version, on a connection of its own that never writes).
// It is how a daemon learns cheaply that the CLI wrote behind its back.
type Watcher struct {
	db   *sql.DB
	conn *sql.Conn
	last int64
	seen bool
}

// Watch returns a watcher; Close it when done.
func (s *Store) Watch() *Watcher { return &Watcher{db: s.db} }

// Changed reports whether a commit happened since the last call (true the
// first time, and when it cannot tell).
func (w *Watcher) Changed(ctx context.Context) bool {
	if w.conn == nil {
		c, err := w.db.Conn(ctx)
		if err != nil {
			return true
		}
		w.conn, w.seen = c, false
	}
	var v int64
	if err := w.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		w.conn.Close()
		w.conn = nil
		return true
	}
	changed := !w.seen || v != w.last
	w.last, w.seen = v, true
	return changed
}

// Close gives the watcher's connection back.
func (w *Watcher) Close() {
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}

// ResultsDigest is a hash of every stored real-server result: it changes
// when any result does, whoever stored it.
func (s *Store) ResultsDigest(ctx context.Context) (uint64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT target, data FROM realserver_results ORDER BY target`)
	if err != nil {
		return 0, fmt.Errorf("read real-server results: %w", busy(err))
	}
	defer rows.Close()
	h := fnv.New64a()
	var target, data []byte
	for rows.Next() {
		if err := rows.Scan(&target, &data); err != nil {
			return 0, fmt.Errorf("read real-server results: %w", err)
		}
		h.Write(target)
		h.Write([]byte{0})
		h.Write(data)
		h.Write([]byte{0})
	}
	return h.Sum64(), rows.Err()
}
