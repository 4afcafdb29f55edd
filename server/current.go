package server

import (
	"context"
	"errors"
	"slices"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// edit is what a change did to the desired state, so that the daemon
// re-encodes, recompiles and compares only what changed.
type edit struct {
	summary string
	touched int  // index (in the new state) of the one service changed or added; -1 for none
	removed int  // index (in the old state) of the one service removed; -1 for none
	whole   bool // anything may have changed
}

func touch(i int, summary string) edit { return edit{summary: summary, touched: i, removed: -1} }

// current is the daemon's copy of the stored desired state: the state, each
// service's encoding and what compiling them made. A write starts from it
// instead of decoding, validating and encoding a director's whole document.
type current struct {
	rev   int64
	st    *ipvsmgr.State
	enc   [][]byte // enc[i] is st.Services[i] as stored
	cache ipvsmgr.CompileCache
}

// loadCurrent returns the daemon's copy of the current state, reading it
// again when another process stored a revision since (c.writeMu held).
func (c *Core) loadCurrent(ctx context.Context) (*current, error) {
	rev, err := c.store.CurrentRevision(ctx)
	if err != nil {
		return nil, err
	}
	if c.cur != nil && c.cur.rev == rev {
		return c.cur, nil
	}
	st, rev, err := c.store.Current(ctx)
	if err != nil {
		return nil, err
	}
	_, enc, err := store.EncodeServices(st)
	if err != nil {
		return nil, err
	}
	c.cur = &current{rev: rev, st: st, enc: enc}
	return c.cur, nil
}

// updateCurrent is update for the daemon: the change is made on a copy of
// its current state, and only the service it touched is encoded and
// compiled again.
func (c *Core) updateCurrent(ctx context.Context, a Actor, o WriteOptions, change func(cur *ipvsmgr.State) (edit, error)) (*WriteResult, *ipvsmgr.Desired, string, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	for attempt := 0; ; attempt++ {
		cur, err := c.loadCurrent(ctx)
		if err != nil {
			return nil, nil, "", err
		}
		if o.Base != 0 && o.Base != cur.rev {
			return nil, nil, "", &store.StaleError{Base: o.Base, Current: cur.rev}
		}
		next := *cur.st
		next.Services = slices.Clone(cur.st.Services)
		ed, err := change(&next)
		if err != nil {
			return nil, nil, ed.summary, err
		}
		enc, err := reencode(cur, &next, ed)
		if err != nil {
			return nil, nil, ed.summary, err
		}
		desired, err := ipvsmgr.CompileWith(&next, enc, &cur.cache)
		if err != nil {
			return nil, nil, ed.summary, err
		}
		doc, err := store.JoinServices(&next, enc)
		if err != nil {
			return nil, nil, ed.summary, err
		}
		rev, changed, err := c.store.CommitDocument(ctx, cur.rev, doc, nil, a.Name, a.Via, ed.summary)
		var stale *store.StaleError
		if errors.As(err, &stale) && attempt < 50 {
			c.cur = nil // another process wrote: read it again
			continue
		}
		if err != nil {
			return nil, nil, ed.summary, err
		}
		c.cur = &current{rev: rev, st: &next, enc: enc, cache: cur.cache}
		return &WriteResult{Revision: rev, Changed: changed}, desired, ed.summary, nil
	}
}

// reencode gives each service of next its encoding, taking cur's for the
// services the edit did not touch.
func reencode(cur *current, next *ipvsmgr.State, ed edit) ([][]byte, error) {
	if ed.whole {
		_, enc, err := store.EncodeServices(next)
		return enc, err
	}
	enc := slices.Clone(cur.enc)
	if ed.removed >= 0 {
		enc = slices.Delete(enc, ed.removed, ed.removed+1)
	}
	if ed.touched >= 0 {
		b := ipvsmgr.AppendService(nil, &next.Services[ed.touched])
		if ed.touched == len(enc) {
			enc = append(enc, b)
		} else {
			enc[ed.touched] = b
		}
	}
	if len(enc) != len(next.Services) {
		_, all, err := store.EncodeServices(next) // an edit that did not say what it did
		return all, err
	}
	return enc, nil
}
