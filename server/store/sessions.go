package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Session is a logged-in panel user, kept server-side. IDHash is the SHA-256
// of the cookie value (hex); the cookie itself is never stored.
type Session struct {
	IDHash        string
	UserID        int64
	UserName      string // from users, when read
	Role          string // from users, when read: a role change applies at once
	CreatedAt     time.Time
	LastSeenAt    time.Time
	IdleExpiresAt time.Time
	ExpiresAt     time.Time
	ClientAddr    string
}

// CreateSession stores a new session.
func (s *Store) CreateSession(ctx context.Context, se *Session) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO sessions (id_hash, user_id, created_at, last_seen_at, idle_expires_at, expires_at, client_addr)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, se.IDHash, se.UserID, dbTime(se.CreatedAt), dbTime(se.LastSeenAt),
		dbTime(se.IdleExpiresAt), dbTime(se.ExpiresAt), se.ClientAddr)
	if err != nil {
		return fmt.Errorf("store session: %w", busy(err))
	}
	return nil
}

// SessionByHash returns the session with that id hash and its user's name
// and role, expired or not (the caller decides), or ErrNotFound.
func (s *Store) SessionByHash(ctx context.Context, idHash string) (*Session, error) {
	var se Session
	var created, seen, idle, expires string
	err := s.db.QueryRowContext(ctx, `SELECT s.id_hash, s.user_id, u.name, u.role, s.created_at, s.last_seen_at,
		s.idle_expires_at, s.expires_at, s.client_addr FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id_hash = ?`, idHash).
		Scan(&se.IDHash, &se.UserID, &se.UserName, &se.Role, &created, &seen, &idle, &expires, &se.ClientAddr)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read session: %w", busy(err))
	}
	se.CreatedAt, se.LastSeenAt, se.IdleExpiresAt, se.ExpiresAt = parseTime(created), parseTime(seen), parseTime(idle), parseTime(expires)
	return &se, nil
}

// TouchSession records a session's use and moves its idle expiry on.
func (s *Store) TouchSession(ctx context.Context, idHash string, seen, idleExpires time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE sessions SET last_seen_at = ?, idle_expires_at = ? WHERE id_hash = ?`,
		dbTime(seen), dbTime(idleExpires), idHash)
	if err != nil {
		return fmt.Errorf("touch session: %w", busy(err))
	}
	return nil
}

// DeleteSession ends a session (logout); one already gone is not an error.
func (s *Store) DeleteSession(ctx context.Context, idHash string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE id_hash = ?`, idHash); err != nil {
		return fmt.Errorf("end session: %w", busy(err))
	}
	return nil
}

// DeleteExpiredSessions removes the sessions that ended by now, and says how
// many; the daemon calls it now and then.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	t := dbTime(now)
	res, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE idle_expires_at <= ? OR expires_at <= ?`, t, t)
	if err != nil {
		return 0, fmt.Errorf("remove expired sessions: %w", busy(err))
	}
	return res.RowsAffected()
}
