package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// ChartChunk is how many series one chart_points row holds.
const ChartChunk = 64

// ChartSeries returns the id of each key, giving new keys the next ids; seen
// (unix seconds) is recorded as their last sighting.
func (s *Store) ChartSeries(ctx context.Context, keys []string, seen int64) (map[string]int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("add chart series: %w", busy(err))
	}
	defer tx.Rollback()
	// Two statements for any number of keys (a statement each cost the
	// first sample of a thousand real servers a second of CPU).
	list := jsonStrings(keys)
	if _, err := tx.ExecContext(ctx, `INSERT INTO chart_series (key, last_seen) SELECT value, ? FROM json_each(?) WHERE true
		ON CONFLICT (key) DO UPDATE SET last_seen = excluded.last_seen`, seen, list); err != nil {
		return nil, fmt.Errorf("add chart series: %w", busy(err))
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, key FROM chart_series WHERE key IN (SELECT value FROM json_each(?))`, list)
	if err != nil {
		return nil, fmt.Errorf("read chart series: %w", busy(err))
	}
	out := make(map[string]int64, len(keys))
	for rows.Next() {
		var id int64
		var k string
		if err := rows.Scan(&id, &k); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read chart series: %w", err)
		}
		out[k] = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, busy(err)
	}
	return out, busy(tx.Commit())
}

func jsonStrings(ss []string) string {
	b, _ := json.Marshal(ss) // strings always encode
	return string(b)
}

// ChartSeriesID returns the id of a key, or ErrNotFound.
func (s *Store) ChartSeriesID(ctx context.Context, key string) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT id FROM chart_series WHERE key = ?`, key).Scan(&id)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("chart series %s: %w", key, ErrNotFound)
		}
		return 0, fmt.Errorf("read chart series %s: %w", key, busy(err))
	}
	return id, nil
}

// SaveChartPoints stores one time's rows (chunk -> data) at resolution res
// and deletes that resolution's rows older than keepFrom, and series not
// seen since forgetBefore (their ids are never reused).
func (s *Store) SaveChartPoints(ctx context.Context, res int, t int64, chunks map[int64][]byte, keepFrom, forgetBefore int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save chart points: %w", busy(err))
	}
	defer tx.Rollback()
	for chunk, data := range chunks {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO chart_points (res, chunk, t, data) VALUES (?, ?, ?, ?)`,
			res, chunk, t, data); err != nil {
			return fmt.Errorf("save chart points: %w", busy(err))
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM chart_points WHERE res = ? AND t < ?`, res, keepFrom); err != nil {
		return fmt.Errorf("expire chart points: %w", busy(err))
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM chart_series WHERE last_seen < ?`, forgetBefore); err != nil {
		return fmt.Errorf("expire chart series: %w", busy(err))
	}
	return busy(tx.Commit())
}

// ChartRow is one stored time of a chunk.
type ChartRow struct {
	T    int64
	Data []byte
}

// ChartPoints returns a chunk's rows at resolution res from time since on, oldest first.
func (s *Store) ChartPoints(ctx context.Context, res int, chunk, since int64) ([]ChartRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT t, data FROM chart_points WHERE res = ? AND chunk = ? AND t >= ? ORDER BY t`, res, chunk, since)
	if err != nil {
		return nil, fmt.Errorf("read chart points: %w", busy(err))
	}
	defer rows.Close()
	var out []ChartRow
	for rows.Next() {
		var r ChartRow
		if err := rows.Scan(&r.T, &r.Data); err != nil {
			return nil, fmt.Errorf("read chart points: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ChartSize is the number of stored chart rows and their bytes.
func (s *Store) ChartSize(ctx context.Context) (rows, bytes int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM chart_points`).Scan(&rows, &bytes)
	return rows, bytes, busy(err)
}
