package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Draft is a user's staged desired state: a whole document and the revision
// it was made from.
type Draft struct {
	Author  string
	Base    int64
	Doc     []byte
	Updated time.Time
}

// Draft returns author's draft, or ErrNotFound.
func (s *Store) Draft(ctx context.Context, author string) (*Draft, error) {
	d := &Draft{Author: author}
	var doc, at string
	err := s.db.QueryRowContext(ctx, `SELECT base, doc, updated_at FROM panel_drafts WHERE author = ?`, author).Scan(&d.Base, &doc, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("draft of %s: %w", author, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read draft of %s: %w", author, busy(err))
	}
	d.Doc = []byte(doc)
	d.Updated, _ = time.Parse(time.RFC3339Nano, at)
	return d, nil
}

// SaveDraft stores (or replaces) a user's draft.
func (s *Store) SaveDraft(ctx context.Context, d *Draft) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO panel_drafts (author, base, doc, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (author) DO UPDATE SET base = excluded.base, doc = excluded.doc, updated_at = excluded.updated_at`,
		d.Author, d.Base, string(d.Doc), time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("save draft of %s: %w", d.Author, busy(err))
	}
	return nil
}

// DeleteDraft discards a user's draft (no error when there is none).
func (s *Store) DeleteDraft(ctx context.Context, author string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM panel_drafts WHERE author = ?`, author); err != nil {
		return fmt.Errorf("discard draft of %s: %w", author, busy(err))
	}
	return nil
}

// Drafts lists every draft (without documents), by author.
func (s *Store) Drafts(ctx context.Context) ([]Draft, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT author, base, updated_at FROM panel_drafts ORDER BY author`)
	if err != nil {
		return nil, fmt.Errorf("list drafts: %w", busy(err))
	}
	defer rows.Close()
	var out []Draft
	for rows.Next() {
		var d Draft
		var at string
		if err := rows.Scan(&d.Author, &d.Base, &at); err != nil {
			return nil, fmt.Errorf("list drafts: %w", err)
		}
		d.Updated, _ = time.Parse(time.RFC3339Nano, at)
		out = append(out, d)
	}
	return out, rows.Err()
}
