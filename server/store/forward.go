package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Revision kinds, the revisions.delta column.
const (
	kindWhole   = 0 // the whole document
	kindReverse = 1 // a reverse delta against the next revision
	kindForward = 2 // a forward delta against the previous revision
)

// maxForward bounds a chain of forward deltas: reading the current state
// applies at most this many to the whole document before them.
const maxForward = 32

// ErrWholeNeeded refuses a forward delta: the chain is long enough, and the
// writer stores the whole document (CommitDocument) instead.
var ErrWholeNeeded = errors.New("the revision must be stored whole")

// ForwardDelta describes st (its services encoded as enc) by reference to
// the revision before it: from[j] is the index there of a service equal to
// st's j-th, or -1.
func ForwardDelta(st *ipvsmgr.State, enc [][]byte, from []int) ([]byte, error) {
	services := make([][]byte, len(enc))
	for j, b := range enc {
		if from[j] >= 0 {
			services[j] = strconv.AppendInt(nil, int64(from[j]), 10)
		} else {
			services[j] = b
		}
	}
	return JoinServices(st, services)
}

// CommitForward stores a revision as a forward delta against base, which
// must be the current revision; ErrWholeNeeded when the chain is long.
func (s *Store) CommitForward(ctx context.Context, base int64, delta []byte, author, via, summary string) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store desired state: %w", busy(err))
	}
	defer tx.Rollback()
	var cur, chain int64
	err = tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0), COUNT(*) FILTER (WHERE delta = 2 AND id > COALESCE((SELECT MAX(id) FROM revisions WHERE delta != 2), 0)) FROM revisions`).Scan(&cur, &chain)
	if err != nil {
		return 0, fmt.Errorf("store desired state: %w", busy(err))
	}
	if cur != base {
		return 0, &StaleError{Base: base, Current: cur}
	}
	if cur == 0 || chain >= maxForward {
		return 0, ErrWholeNeeded
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO revisions (created_at, author, via, summary, state, delta) VALUES (?, ?, ?, ?, ?, ?)`,
		time.Now().UTC().Format(time.RFC3339Nano), author, via, summary, string(delta), kindForward)
	if err != nil {
		return 0, fmt.Errorf("store desired state: %w", busy(err))
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store desired state: %w", busy(err))
	}
	return res.LastInsertId()
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// forwardChain rebuilds revision id, a forward delta, from the whole
// revision before it and the forward deltas between.
func forwardChain(ctx context.Context, q querier, id int64) ([]byte, error) {
	rows, err := q.QueryContext(ctx, `SELECT state, delta FROM revisions
		WHERE id >= (SELECT COALESCE(MAX(id), 0) FROM revisions WHERE id < ? AND delta != 2) AND id <= ? ORDER BY id`, id, id)
	if err != nil {
		return nil, busy(err)
	}
	defer rows.Close()
	var p ipvsmgr.StoredParts
	first := true
	for rows.Next() {
		var state []byte
		var kind int
		if err := rows.Scan(&state, &kind); err != nil {
			return nil, err
		}
		if first {
			if kind != kindWhole {
				return nil, fmt.Errorf("revision %d: its forward deltas do not start from a whole document", id)
			}
			var ok bool
			if p, ok = ipvsmgr.SplitStored(state); !ok {
				return nil, errNotStored
			}
			first = false
			continue
		}
		if p, err = applyForward(p, state); err != nil {
			return nil, fmt.Errorf("revision %d: %w", id, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, busy(err)
	}
	if first {
		return nil, fmt.Errorf("revision %d: no whole document before its forward delta", id)
	}
	return p.Join(), nil
}

// applyForward gives the parts of the document a forward delta describes
// against base, sharing base's services' bytes.
func applyForward(base ipvsmgr.StoredParts, delta []byte) (ipvsmgr.StoredParts, error) {
	p, ok := ipvsmgr.SplitStored(delta)
	if !ok {
		return p, errNotStored
	}
	p.Services = slices.Clone(p.Services)
	for j, s := range p.Services {
		if len(s) == 0 || s[0] < '0' || s[0] > '9' {
			continue // a service stored whole
		}
		i, err := strconv.Atoi(string(s))
		if err != nil || i < 0 || i >= len(base.Services) {
			return p, errors.New("a forward delta refers to no service of the revision before it")
		}
		p.Services[j] = base.Services[i]
	}
	return p, nil
}
