package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ipvsctl/ipvsctl/arpguard"
)

// SaveResults replaces the stored preparation result of each real server in rs
// (arpguard.ResultStore).
func (s *Store) SaveResults(ctx context.Context, rs []arpguard.Result) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save real-server results: %w", busy(err))
	}
	defer tx.Rollback()
	for _, r := range rs {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode real-server result: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO realserver_results (target, data) VALUES (?, ?)
			ON CONFLICT (target) DO UPDATE SET data = excluded.data`, r.Target, string(b)); err != nil {
			return fmt.Errorf("save real-server result %s: %w", r.Target, busy(err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("save real-server results: %w", busy(err))
	}
	return nil
}

// Results returns every stored preparation result, ordered by target.
func (s *Store) Results(ctx context.Context) ([]arpguard.Result, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT data FROM realserver_results ORDER BY target`)
	if err != nil {
		return nil, fmt.Errorf("read real-server results: %w", busy(err))
	}
	defer rows.Close()
	out := []arpguard.Result{}
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("read real-server results: %w", err)
		}
		var r arpguard.Result
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			return nil, fmt.Errorf("parse real-server result: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// importResultsFile moves the results an older ipvsctl kept in
// realserver-results.json beside the database into the database, once.
func (s *Store) importResultsFile(ctx context.Context) error {
	path := filepath.Join(filepath.Dir(s.path), "realserver-results.json")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	rs, err := (&arpguard.JSONFileStore{Path: path}).Results(ctx)
	if err != nil {
		return err
	}
	if err := s.SaveResults(ctx, rs); err != nil {
		return err
	}
	return os.Rename(path, path+".imported")
}
