package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mattn/go-sqlite3"
)

var (
	// ErrExists means a user (or an active token) of that name exists already.
	ErrExists = errors.New("already exists")
	// ErrLastAdmin refuses to remove or demote the only admin: nobody could
	// manage users from the panel or the API any more.
	ErrLastAdmin = errors.New("is the last admin (add another admin first)")
)

// User is someone who may log in to the panel or hold API tokens. Role is
// admin, operator or viewer (the database refuses anything else).
type User struct {
	ID           int64     `json:"id"`
	Name         string    `json:"name"`
	Role         string    `json:"role"`
	PasswordHash string    `json:"-"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

const userColumns = `id, name, role, password_hash, created_at, updated_at`

func scanUser(row interface{ Scan(...any) error }) (*User, error) {
	var u User
	var created, updated string
	if err := row.Scan(&u.ID, &u.Name, &u.Role, &u.PasswordHash, &created, &updated); err != nil {
		return nil, err
	}
	u.CreatedAt, u.UpdatedAt = parseTime(created), parseTime(updated)
	return &u, nil
}

// CreateUser adds a user; a name taken already is ErrExists.
func (s *Store) CreateUser(ctx context.Context, name, role, passwordHash string, at time.Time) (*User, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO users (name, role, password_hash, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		name, role, passwordHash, dbTime(at), dbTime(at))
	if isUnique(err) {
		return nil, fmt.Errorf("user %q %w", name, ErrExists)
	}
	if err != nil {
		return nil, fmt.Errorf("add user %q: %w", name, busy(err))
	}
	id, err := res.LastInsertId()
	if err != nil {
		return nil, fmt.Errorf("add user %q: %w", name, err)
	}
	return &User{ID: id, Name: name, Role: role, PasswordHash: passwordHash, CreatedAt: at.UTC(), UpdatedAt: at.UTC()}, nil
}

// UserByName returns the user called name, or ErrNotFound.
func (s *Store) UserByName(ctx context.Context, name string) (*User, error) {
	u, err := scanUser(s.db.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read user %q: %w", name, busy(err))
	}
	return u, nil
}

// Users lists every user by name.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+userColumns+` FROM users ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", busy(err))
	}
	defer rows.Close()
	out := []User{}
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		out = append(out, *u)
	}
	return out, rows.Err()
}

// CountUsers is how many users exist: none means the first admin is still
// to be made with `ipvsctl user add`.
func (s *Store) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", busy(err))
	}
	return n, nil
}

// SetUserPassword replaces a user's password hash and ends the user's
// sessions, in one transaction: whoever knew the old password is logged out.
// API tokens stay valid.
func (s *Store) SetUserPassword(ctx context.Context, name, passwordHash string, at time.Time) error {
	return s.userTx(ctx, "set the password of", name, func(tx *sql.Tx, u *User) error {
		if _, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ?`, passwordHash, dbTime(at), u.ID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, u.ID)
		return err
	})
}

// UpgradePasswordHash replaces a user's hash with one of newer parameters,
// if it is still old (a password change in between wins). Sessions stay.
func (s *Store) UpgradePasswordHash(ctx context.Context, id int64, old, upgraded string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?`, upgraded, id, old)
	if err != nil {
		return fmt.Errorf("upgrade password hash: %w", busy(err))
	}
	return nil
}

// SetUserRole changes a user's role; the last admin cannot be demoted.
func (s *Store) SetUserRole(ctx context.Context, name, role string, at time.Time) error {
	return s.userTx(ctx, "set the role of", name, func(tx *sql.Tx, u *User) error {
		if u.Role == "admin" && role != "admin" {
			if err := lastAdmin(ctx, tx, u); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE users SET role = ?, updated_at = ? WHERE id = ?`, role, dbTime(at), u.ID)
		return err
	})
}

// DeleteUser removes a user with its sessions and tokens; the last admin
// cannot be removed.
func (s *Store) DeleteUser(ctx context.Context, name string) error {
	return s.userTx(ctx, "remove", name, func(tx *sql.Tx, u *User) error {
		if u.Role == "admin" {
			if err := lastAdmin(ctx, tx, u); err != nil {
				return err
			}
		}
		// The foreign keys cascade; said here too so that a database opened
		// without foreign keys on leaves nothing behind.
		for _, q := range []string{`DELETE FROM sessions WHERE user_id = ?`, `DELETE FROM tokens WHERE user_id = ?`, `DELETE FROM users WHERE id = ?`} {
			if _, err := tx.ExecContext(ctx, q, u.ID); err != nil {
				return err
			}
		}
		return nil
	})
}

func lastAdmin(ctx context.Context, tx *sql.Tx, u *User) error {
	var others int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM users WHERE role = 'admin' AND id != ?`, u.ID).Scan(&others); err != nil {
		return err
	}
	if others == 0 {
		return fmt.Errorf("user %q %w", u.Name, ErrLastAdmin)
	}
	return nil
}

// userTx runs change on the user called name inside one transaction.
func (s *Store) userTx(ctx context.Context, what, name string, change func(tx *sql.Tx, u *User) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s user %q: %w", what, name, busy(err))
	}
	defer tx.Rollback()
	u, err := scanUser(tx.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s user %q: %w", what, name, busy(err))
	}
	if err := change(tx, u); err != nil {
		if errors.Is(err, ErrLastAdmin) {
			return err
		}
		return fmt.Errorf("%s user %q: %w", what, name, busy(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s user %q: %w", what, name, busy(err))
	}
	return nil
}

// isUnique reports a UNIQUE constraint failure.
func isUnique(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintUnique
}
