package panel

import (
	"bytes"
	"context"
	"errors"
	"net/http"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// A change from a form goes either straight to the core (one revision,
// refused if the state moved since the form was drawn) or into the user's
// draft: a whole document in SQLite (per user, so that it survives a
// restart and the session's end, and the auth package's sessions stay its
// own), applied later as one revision with the draft's base.
type change struct {
	label  string
	edit   func(st *ipvsmgr.State) error // on a draft
	direct func(ctx context.Context, a server.Actor, o server.WriteOptions) (*server.WriteResult, error)
}

// staging reports whether the user's edits go to a draft: they have one,
// or the form asked to start one.
func (p *Panel) staging(ctx context.Context, r *http.Request, u who) bool {
	if !u.CanAdmin() {
		return false
	}
	if r.FormValue("stage") == "1" {
		return true
	}
	_, err := p.drafts.get(ctx, u.User)
	return err == nil
}

// commit makes c, staged or direct; msg says what happened.
func (p *Panel) commit(ctx context.Context, r *http.Request, u who, c change, base int64) (msg string, err error) {
	if p.staging(ctx, r, u) && c.edit != nil {
		d, st, err := p.loadDraft(ctx, u, true)
		if err != nil {
			return "", err
		}
		if err := c.edit(st); err != nil {
			return "", err
		}
		if _, err := ipvsmgr.Compile(st); err != nil {
			return "", err
		}
		if d.Doc, err = store.Encode(st); err != nil {
			return "", err
		}
		if err := p.drafts.save(ctx, d); err != nil {
			return "", err
		}
		return c.label + ": staged in your draft (not applied yet)", nil
	}
	res, err := c.direct(ctx, p.actor(r, u), server.WriteOptions{Base: base, NoWait: true})
	if err != nil {
		return "", err
	}
	return writeSummary(c.label, res), nil
}

// loadDraft returns the user's draft and its state; create makes one from
// the current state when there is none.
func (p *Panel) loadDraft(ctx context.Context, u who, create bool) (*store.Draft, *ipvsmgr.State, error) {
	d, err := p.drafts.get(ctx, u.User)
	if errors.Is(err, store.ErrNotFound) && create {
		st, rev, err := p.core.State(ctx)
		if err != nil {
			return nil, nil, err
		}
		doc, err := store.Encode(st)
		if err != nil {
			return nil, nil, err
		}
		d = &store.Draft{Author: u.User, Base: rev, Doc: doc}
		return d, st, nil
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := ipvsmgr.DecodeState(bytes.NewReader(d.Doc))
	if err != nil {
		return nil, nil, err
	}
	return d, st, nil
}

// desired is the state the configuration screens show the user: their
// draft's when they have one, else the stored one.
func (p *Panel) desired(ctx context.Context, u who) (st *ipvsmgr.State, rev int64, drafted bool, err error) {
	if u.CanAdmin() {
		if _, err := p.drafts.get(ctx, u.User); err == nil {
			_, st, err := p.loadDraft(ctx, u, false)
			if err != nil {
				return nil, 0, false, err
			}
			return st, 0, true, nil
		}
	}
	st, rev, err = p.core.State(ctx)
	return st, rev, false, err
}

// draftSummary counts a draft's changes against the current state.
func (p *Panel) draftSummary(ctx context.Context, d *store.Draft) *draftInfo {
	di := &draftInfo{Base: d.Base}
	cur, rev, err := p.core.State(ctx)
	if err != nil {
		return di
	}
	di.Current, di.Moved = rev, rev != d.Base
	st, err := ipvsmgr.DecodeState(bytes.NewReader(d.Doc))
	if err != nil {
		return di
	}
	di.Changes = len(ipvsmgr.Changes(cur, st))
	return di
}
