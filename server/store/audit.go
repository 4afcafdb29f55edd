package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Outcomes of an audited action.
const (
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
)

// AuditEntry is one audited action: a write (Revision set when it made one)
// or a login attempt. Via is cli, api or panel; ClientAddr is empty for the
// local CLI.
type AuditEntry struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Actor      string    `json:"actor"`
	Via        string    `json:"via"`
	ClientAddr string    `json:"client_addr"`
	Action     string    `json:"action"`
	Target     string    `json:"target"`
	Revision   *int64    `json:"revision"`
	Outcome    string    `json:"outcome"`
	Detail     string    `json:"detail"`
}

// AuditFilter narrows an audit listing; zero fields do not filter. Limit 0
// means 100.
type AuditFilter struct {
	Actor  string
	Action string
	Since  time.Time
	Limit  int
}

// WriteAudit appends an entry and returns its id. A zero At is now.
func (s *Store) WriteAudit(ctx context.Context, e AuditEntry) (int64, error) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO audit (at, actor, via, client_addr, action, target, revision, outcome, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, dbTime(e.At), e.Actor, e.Via, e.ClientAddr, e.Action, e.Target, e.Revision, e.Outcome, e.Detail)
	if err != nil {
		return 0, fmt.Errorf("write audit record %s %s: %w", e.Action, e.Target, busy(err))
	}
	return res.LastInsertId()
}

// Audit lists entries, newest first.
func (s *Store) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	var where []string
	var args []any
	if f.Actor != "" {
		where, args = append(where, "actor = ?"), append(args, f.Actor)
	}
	if f.Action != "" {
		where, args = append(where, "action = ?"), append(args, f.Action)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, dbTime(f.Since))
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	q := `SELECT id, at, actor, via, client_addr, action, target, revision, outcome, detail FROM audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, f.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("list audit records: %w", busy(err))
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var e AuditEntry
		var at string
		var rev sql.NullInt64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Via, &e.ClientAddr, &e.Action, &e.Target, &rev, &e.Outcome, &e.Detail); err != nil {
			return nil, fmt.Errorf("list audit records: %w", err)
		}
		e.At = parseTime(at)
		if rev.Valid {
			e.Revision = &rev.Int64
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
