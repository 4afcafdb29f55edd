package panel

import (
	"bytes"
	"context"
	"net/http"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// A change from a form is one of the core's edits (server.Edit, the same a
// CLI verb or an API call makes): it goes either straight to the core (one
// revision, refused if the state moved since the form was drawn) or into
// the user's draft (Core.StageEdits), applied later as one revision.

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

// commit makes e, staged or direct; msg says what happened (label first).
func (p *Panel) commit(ctx context.Context, r *http.Request, u who, label string, e server.Edit, base int64) (msg string, err error) {
	a := p.actor(r, u)
	if p.staging(ctx, r, u) {
		if err := p.drafts.write(u.User, func() (*store.Draft, error) { return p.core.StageEdits(ctx, a, e) }); err != nil {
			return "", err
		}
		return label + ": staged in your draft (not applied yet)", nil
	}
	res, err := p.core.Write(ctx, a, server.WriteOptions{Base: base, NoWait: true}, e)
	if err != nil {
		return "", err
	}
	return writeSummary(label, res), nil
}

// desired is the state the configuration screens show the user: their
// draft's when they have one, else the stored one.
func (p *Panel) desired(ctx context.Context, u who) (st *ipvsmgr.State, rev int64, drafted bool, err error) {
	if u.CanAdmin() {
		if d, err := p.drafts.get(ctx, u.User); err == nil {
			st, err := ipvsmgr.DecodeState(bytes.NewReader(d.Doc))
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
