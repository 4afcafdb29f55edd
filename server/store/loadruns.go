package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// LoadRun is one run of a load generator through a virtual service, as
// marked at its start and end (the result is the core's JSON, kept as is).
type LoadRun struct {
	ID        int64
	Test      string
	Phase     string
	WebPhase  string
	Service   string
	Tool      string
	StartedAt time.Time
	EndedAt   *time.Time
	Result    string
}

// StartLoadRun stores a run that starts now (r.StartedAt) and returns its id.
func (s *Store) StartLoadRun(ctx context.Context, r LoadRun) (int64, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO load_runs (test, phase, web_phase, service, tool, started_at) VALUES (?, ?, ?, ?, ?, ?)`,
		r.Test, r.Phase, r.WebPhase, r.Service, r.Tool, dbTime(r.StartedAt))
	if err != nil {
		return 0, fmt.Errorf("store load run %s/%s: %w", r.Test, r.Phase, busy(err))
	}
	return res.LastInsertId()
}

// EndLoadRun sets a run's end and result; a run that is not there, or has
// ended already, is ErrNotFound (an end is never overwritten).
func (s *Store) EndLoadRun(ctx context.Context, id int64, at time.Time, result string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE load_runs SET ended_at = ?, result = ? WHERE id = ? AND ended_at IS NULL`, dbTime(at), result, id)
	if err != nil {
		return fmt.Errorf("end load run %d: %w", id, busy(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("load run %d (not started, or ended already): %w", id, ErrNotFound)
	}
	return nil
}

// LoadRun reads one run.
func (s *Store) LoadRun(ctx context.Context, id int64) (LoadRun, error) {
	rs, err := s.loadRuns(ctx, `WHERE id = ?`, id)
	if err != nil {
		return LoadRun{}, err
	}
	if len(rs) == 0 {
		return LoadRun{}, fmt.Errorf("load run %d: %w", id, ErrNotFound)
	}
	return rs[0], nil
}

// LoadRuns reads the runs of test ("" for the latest test to start a run),
// oldest first.
func (s *Store) LoadRuns(ctx context.Context, test string) ([]LoadRun, error) {
	if test == "" {
		err := s.db.QueryRowContext(ctx, `SELECT test FROM load_runs ORDER BY started_at DESC, id DESC LIMIT 1`).Scan(&test)
		if errors.Is(err, sql.ErrNoRows) {
			return []LoadRun{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the latest load test: %w", busy(err))
		}
	}
	return s.loadRuns(ctx, `WHERE test = ? ORDER BY started_at, id`, test)
}

func (s *Store) loadRuns(ctx context.Context, where string, args ...any) ([]LoadRun, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, test, phase, web_phase, service, tool, started_at, ended_at, result FROM load_runs `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read load runs: %w", busy(err))
	}
	defer rows.Close()
	out := []LoadRun{}
	for rows.Next() {
		var r LoadRun
		var started string
		var ended sql.NullString
		if err := rows.Scan(&r.ID, &r.Test, &r.Phase, &r.WebPhase, &r.Service, &r.Tool, &started, &ended, &r.Result); err != nil {
			return nil, fmt.Errorf("read load runs: %w", err)
		}
		r.StartedAt, r.EndedAt = parseTime(started), parseNullTime(ended)
		out = append(out, r)
	}
	return out, rows.Err()
}
