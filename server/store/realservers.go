package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ipvsctl/ipvsctl/arpguard"
)

// RealServerRecord is a real server's last preparation result with the
// target it was last pushed or verified with as given (its interface,
// gateway, SSH address): a verify from the desired state, which knows only
// the VIPs and the forwarding method, takes them from here.
type RealServerRecord struct {
	arpguard.Result
	Spec *arpguard.Target `json:"spec,omitempty"`
}

// SaveResults replaces the stored preparation result of each real server in rs
// (arpguard.ResultStore), keeping the target each was last prepared with.
func (s *Store) SaveResults(ctx context.Context, rs []arpguard.Result) error {
	recs := make([]RealServerRecord, len(rs))
	for i, r := range rs {
		recs[i].Result = r
	}
	return s.SaveRealServerRecords(ctx, recs)
}

// SaveRealServerRecords replaces the stored record of each real server in
// recs; a record without a Spec keeps the one stored.
func (s *Store) SaveRealServerRecords(ctx context.Context, recs []RealServerRecord) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save real-server results: %w", busy(err))
	}
	defer tx.Rollback()
	for _, r := range recs {
		if r.Spec == nil {
			var data string
			err := tx.QueryRowContext(ctx, `SELECT data FROM realserver_results WHERE target = ?`, r.Target).Scan(&data)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("read real-server result %s: %w", r.Target, busy(err))
			}
			var was RealServerRecord
			if data != "" && json.Unmarshal([]byte(data), &was) == nil {
				r.Spec = was.Spec
			}
		}
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
	recs, err := s.RealServerRecords(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]arpguard.Result, len(recs))
	for i := range recs {
		out[i] = recs[i].Result
	}
	return out, nil
}

// RealServerRecords returns every stored record, ordered by target.
func (s *Store) RealServerRecords(ctx context.Context) ([]RealServerRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT data FROM realserver_results ORDER BY target`)
	if err != nil {
		return nil, fmt.Errorf("read real-server results: %w", busy(err))
	}
	defer rows.Close()
	out := []RealServerRecord{}
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("read real-server results: %w", err)
		}
		var r RealServerRecord
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			return nil, fmt.Errorf("parse real-server result: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// importResultsFile moves the results an older ipvsctl kept in
// realserver-results.json beside the database into the database, once.
// legacyResultsPath is where an older ipvsctl kept the real-server results:
// a file beside the database, moved into it at the next open for writing.
func legacyResultsPath(db string) string {
	return filepath.Join(filepath.Dir(db), "realserver-results.json")
}

func (s *Store) importResultsFile(ctx context.Context) error {
	path := legacyResultsPath(s.path)
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
