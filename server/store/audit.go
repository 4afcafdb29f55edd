package store

import (
	"context"
	"database/sql"
	"errors"
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
	// Repeats is how many attempts this row stands for (refused logins are
	// aggregated), LastAt when the latest was; 1 and nil for most rows.
	Repeats int        `json:"repeats,omitempty"`
	LastAt  *time.Time `json:"last_at,omitempty"`
}

// AuditFilter narrows an audit listing; zero fields do not filter. Limit 0
// means 100.
type AuditFilter struct {
	Actor  string
	Action string // the action, exactly
	// Contains is text that the action, its target or its detail holds,
	// in any case.
	Contains string
	Since    time.Time
	Limit    int
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
	if f.Contains != "" {
		where = append(where, "instr(lower(action || ' ' || target || ' ' || detail), lower(?)) > 0")
		args = append(args, f.Contains)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, dbTime(f.Since))
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	q := `SELECT id, at, actor, via, client_addr, action, target, revision, outcome, detail, repeats, last_at FROM audit`
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
		var at, last string
		var rev sql.NullInt64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Via, &e.ClientAddr, &e.Action, &e.Target, &rev, &e.Outcome, &e.Detail,
			&e.Repeats, &last); err != nil {
			return nil, fmt.Errorf("list audit records: %w", err)
		}
		e.At = parseTime(at)
		if last != "" {
			t := parseTime(last)
			e.LastAt = &t
		}
		if rev.Valid {
			e.Revision = &rev.Int64
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// LastLogin is when user last logged in (a successful login in the audit
// since since, the user's creation: not a former user's of that name), or
// the zero time.
func (s *Store) LastLogin(ctx context.Context, user string, since time.Time) (time.Time, error) {
	var at string
	err := s.db.QueryRowContext(ctx, `SELECT at FROM audit WHERE actor = ? AND action = 'login' AND outcome = ? AND at >= ?
		ORDER BY id DESC LIMIT 1`, user, OutcomeSuccess, dbTime(since)).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("last login of %q: %w", user, busy(err))
	}
	return parseTime(at), nil
}
