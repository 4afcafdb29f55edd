package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Token is an API token. Hash is the SHA-256 of the whole token (hex); the
// token itself is shown once, when made, and never stored.
type Token struct {
	ID         int64      `json:"id"`
	UserID     int64      `json:"-"`
	UserName   string     `json:"user"`
	Role       string     `json:"role"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	Hash       string     `json:"-"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	// DirectorAt is when the token became a director's (token create
	// --director, or its first call between directors): over TLS it is
	// then taken only with a believed director certificate.
	DirectorAt *time.Time `json:"director_at"`
}

const tokenColumns = `t.id, t.user_id, u.name, u.role, t.name, t.prefix, t.hash, t.created_at, t.expires_at, t.last_used_at, t.revoked_at, t.director_at`

func scanToken(row interface{ Scan(...any) error }) (*Token, error) {
	var t Token
	var created string
	var expires, used, revoked, director sql.NullString
	if err := row.Scan(&t.ID, &t.UserID, &t.UserName, &t.Role, &t.Name, &t.Prefix, &t.Hash, &created, &expires, &used, &revoked, &director); err != nil {
		return nil, err
	}
	t.CreatedAt = parseTime(created)
	t.ExpiresAt, t.LastUsedAt, t.RevokedAt = parseNullTime(expires), parseNullTime(used), parseNullTime(revoked)
	t.DirectorAt = parseNullTime(director)
	return &t, nil
}

// CreateToken stores a token for user t.UserName and returns its id; a name
// held by another active token is ErrExists.
func (s *Store) CreateToken(ctx context.Context, t *Token) (int64, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO tokens (user_id, name, prefix, hash, created_at, expires_at, director_at)
		SELECT id, ?, ?, ?, ?, ?, ? FROM users WHERE name = ?`,
		t.Name, t.Prefix, t.Hash, dbTime(t.CreatedAt), dbTimePtr(t.ExpiresAt), dbTimePtr(t.DirectorAt), t.UserName)
	if isUnique(err) {
		return 0, fmt.Errorf("token %q %w", t.Name, ErrExists)
	}
	if err != nil {
		return 0, fmt.Errorf("store token %q: %w", t.Name, busy(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, fmt.Errorf("user %q: %w", t.UserName, ErrNotFound)
	}
	return res.LastInsertId()
}

// TokenByPrefix returns the token with that public prefix (revoked and
// expired ones too: the caller says why it refuses), or ErrNotFound.
func (s *Store) TokenByPrefix(ctx context.Context, prefix string) (*Token, error) {
	t, err := scanToken(s.db.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.prefix = ?`, prefix))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read token: %w", busy(err))
	}
	return t, nil
}

// Tokens lists every token, revoked ones too, oldest first.
func (s *Store) Tokens(ctx context.Context) ([]Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tokenColumns+` FROM tokens t JOIN users u ON u.id = t.user_id ORDER BY t.id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", busy(err))
	}
	defer rows.Close()
	out := []Token{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, *t)
	}
	return out, rows.Err()
}

// ActiveToken finds a token that is not revoked by its id, prefix or name,
// or returns ErrNotFound.
func (s *Store) ActiveToken(ctx context.Context, ref string) (*Token, error) {
	id, err := strconv.ParseInt(ref, 10, 64)
	if err != nil {
		id = -1
	}
	// An id matches before a prefix, a prefix before a name.
	t, err := scanToken(s.db.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM tokens t JOIN users u ON u.id = t.user_id
		WHERE t.revoked_at IS NULL AND (t.id = ? OR t.prefix = ? OR t.name = ?)
		ORDER BY t.id != ?, t.prefix != ? LIMIT 1`, id, ref, ref, id, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token %q: %w", ref, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read token %q: %w", ref, busy(err))
	}
	return t, nil
}

// RevokeToken marks a token revoked at at; ErrNotFound if there is no such
// token not revoked already.
func (s *Store) RevokeToken(ctx context.Context, id int64, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, dbTime(at), id)
	if err != nil {
		return fmt.Errorf("revoke token %d: %w", id, busy(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("token %d: %w", id, ErrNotFound)
	}
	return nil
}

// MarkTokenDirector records that token id is a director's, at at, unless
// it was already; it reports whether this call marked it.
func (s *Store) MarkTokenDirector(ctx context.Context, id int64, at time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE tokens SET director_at = ? WHERE id = ? AND director_at IS NULL`, dbTime(at), id)
	if err != nil {
		return false, fmt.Errorf("mark token %d a director's: %w", id, busy(err))
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// TouchToken records a token's use.
func (s *Store) TouchToken(ctx context.Context, id int64, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE tokens SET last_used_at = ? WHERE id = ?`, dbTime(at), id); err != nil {
		return fmt.Errorf("record token use: %w", busy(err))
	}
	return nil
}
