package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// WriteAuditRepeat records e as one more of the same within window: the
// latest row of the same actor, client address, action, target, outcome
// and detail newer than window counts it (repeats + 1, last_at), else e is
// a new row (e.Repeats, if more than 1, counts as that many). It returns
// the row's id.
func (s *Store) WriteAuditRepeat(ctx context.Context, e AuditEntry, window time.Duration) (int64, error) {
	return s.writeAuditFolded(ctx, e, window, true)
}

// WriteAuditFold is WriteAuditRepeat whatever the detail: the same action
// by the same actor on the same subject with the same outcome within
// window is one row, its detail the latest's ("test this check now" run
// over and over: one row with a count and the last result).
func (s *Store) WriteAuditFold(ctx context.Context, e AuditEntry, window time.Duration) (int64, error) {
	return s.writeAuditFolded(ctx, e, window, false)
}

// WriteAuditRepeats is WriteAuditRepeat for each of es, in one transaction:
// a flood's refusals of many kinds cost the database one commit.
func (s *Store) WriteAuditRepeats(ctx context.Context, es []AuditEntry, window time.Duration) error {
	if len(es) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write %d audit records: %w", len(es), busy(err))
	}
	defer tx.Rollback()
	for _, e := range es {
		if _, err := foldAudit(ctx, tx, e, window, true); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write %d audit records: %w", len(es), busy(err))
	}
	return nil
}

func (s *Store) writeAuditFolded(ctx context.Context, e AuditEntry, window time.Duration, sameDetail bool) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("write audit record %s: %w", e.Action, busy(err))
	}
	defer tx.Rollback()
	id, err := foldAudit(ctx, tx, e, window, sameDetail)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("write audit record %s: %w", e.Action, busy(err))
	}
	return id, nil
}

// foldAudit counts e into the latest row like it within window, or adds it.
func foldAudit(ctx context.Context, tx *sql.Tx, e AuditEntry, window time.Duration, sameDetail bool) (int64, error) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	n := max(e.Repeats, 1) // e may stand for several attempts counted by the caller
	var id int64
	err := tx.QueryRowContext(ctx, `SELECT id FROM audit WHERE actor = ? AND client_addr = ? AND action = ? AND target = ? AND outcome = ?
		AND revision IS NULL AND (detail = ? OR NOT ?) AND at >= ? ORDER BY id DESC LIMIT 1`, e.Actor, e.ClientAddr, e.Action, e.Target, e.Outcome,
		e.Detail, sameDetail, dbTime(e.At.Add(-window))).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		res, err := tx.ExecContext(ctx, `INSERT INTO audit (at, actor, via, client_addr, action, target, revision, outcome, detail, repeats)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, dbTime(e.At), e.Actor, e.Via, e.ClientAddr, e.Action, e.Target, e.Revision, e.Outcome, e.Detail, n)
		if err != nil {
			return 0, fmt.Errorf("write audit record %s: %w", e.Action, busy(err))
		}
		return res.LastInsertId()
	case err != nil:
		return 0, fmt.Errorf("write audit record %s: %w", e.Action, busy(err))
	}
	if _, err := tx.ExecContext(ctx, `UPDATE audit SET repeats = repeats + ?, last_at = ?, detail = ? WHERE id = ?`,
		n, dbTime(e.At), e.Detail, id); err != nil {
		return 0, fmt.Errorf("write audit record %s: %w", e.Action, busy(err))
	}
	return id, nil
}

// LoggedInFrom says whether user ever logged in from addr (the audit).
func (s *Store) LoggedInFrom(ctx context.Context, user, addr string) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM audit WHERE actor = ? AND action = 'login' AND outcome = ? AND client_addr = ?
		LIMIT 1`, user, OutcomeSuccess, addr).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("logins of %q: %w", user, busy(err))
	}
	return true, nil
}

// Retention bounds the records that grow without a change being made: the
// audit and the health transitions are kept MaxAge, and while the database
// holds more than MaxBytes the oldest go first, but never an admin's
// action (notAdminAction): those go only past MaxAge.
type Retention struct {
	MaxAge   time.Duration
	MaxBytes int64
}

// DefaultRetention is 90 days or 1 GB, whichever comes first.
func DefaultRetention() Retention { return Retention{MaxAge: 90 * 24 * time.Hour, MaxBytes: 1 << 30} }

// Pruned says what a Prune removed.
type Pruned struct {
	Audit, Transitions, Sessions, Events int64
}

// Prune applies r at now: rows older than MaxAge, then the oldest tenth
// of each table at a time while the database uses more than MaxBytes, and
// the sessions that have ended.
func (s *Store) Prune(ctx context.Context, r Retention, now time.Time) (Pruned, error) {
	var p Pruned
	var err error
	if p.Sessions, err = s.DeleteExpiredSessions(ctx, now); err != nil {
		return p, err
	}
	if r.MaxAge > 0 {
		cut := dbTime(now.Add(-r.MaxAge))
		if p.Audit, err = s.exec(ctx, `DELETE FROM audit WHERE at < ?`, cut); err != nil {
			return p, err
		}
		if p.Transitions, err = s.exec(ctx, `DELETE FROM health_transitions WHERE at < ?`, cut); err != nil {
			return p, err
		}
		if p.Events, err = s.exec(ctx, `DELETE FROM events WHERE at < ?`, cut); err != nil {
			return p, err
		}
	}
	for r.MaxBytes > 0 {
		used, err := s.usedBytes(ctx)
		if err != nil || used <= r.MaxBytes {
			return p, err
		}
		// The oldest tenth of the rows that are not an admin's: an
		// operator's or a viewer's noise never pushes out what admins did
		// (within MaxAge, which alone removes those).
		a, err := s.exec(ctx, `DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE `+notAdminAction+`
			ORDER BY id LIMIT max(1, (SELECT count(*) FROM audit WHERE `+notAdminAction+`) / 10))`)
		if err != nil {
			return p, err
		}
		t, err := s.exec(ctx, `DELETE FROM health_transitions WHERE id IN (SELECT id FROM health_transitions ORDER BY id
			LIMIT max(1, (SELECT count(*) FROM health_transitions) / 10))`)
		if err != nil {
			return p, err
		}
		e, err := s.exec(ctx, `DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id
			LIMIT max(1, (SELECT count(*) FROM events) / 10))`)
		if err != nil {
			return p, err
		}
		p.Audit, p.Transitions, p.Events = p.Audit+a, p.Transitions+t, p.Events+e
		if a+t+e == 0 {
			return p, nil // what is left is not ours to drop
		}
	}
	return p, nil
}

// notAdminAction selects the audit rows that are not an admin's action:
// neither the local CLI's (the director's administrator) nor made by a
// user who is an admin now; a refused login that names an admin is not
// one (anyone can send it).
const notAdminAction = `(via <> 'cli' AND (actor NOT IN (SELECT name FROM users WHERE role = 'admin')
	OR action IN ('login', 'password change') AND outcome <> 'success'))`

func (s *Store) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("prune records: %w", busy(err))
	}
	return res.RowsAffected()
}

// usedBytes is the database's pages in use (freed pages are reused, so a
// prune makes room without a VACUUM).
func (s *Store) usedBytes(ctx context.Context) (int64, error) {
	var pages, free, size int64
	if err := s.db.QueryRowContext(ctx, `SELECT page_count, freelist_count, page_size FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size()`).
		Scan(&pages, &free, &size); err != nil {
		return 0, fmt.Errorf("database size: %w", busy(err))
	}
	return (pages - free) * size, nil
}
