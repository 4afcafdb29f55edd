package panel

import (
	"bytes"
	"context"
	"net/http"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// A change from a form is one of the core's edits (server.Edit, the same a
// CLI verb or an API call makes): the core makes it (one revision, refused
// if the state moved since the form was drawn) or, when the user has a
// draft or the form asked to start one, stages it there, applied later as
// one revision. The core decides, on its own drafts: a draft started
// through the API or the CLI takes the panel's edits at once.

// staging reports whether the user's edits go to a draft (what a form says
// of itself): they have one, or the form asked to start one.
func (p *Panel) staging(ctx context.Context, r *http.Request, u who) bool {
	if !u.Can("draft stage") {
		return false
	}
	if r.FormValue("stage") == "1" {
		return true
	}
	_, err := p.core.Draft(ctx, u.User)
	return err == nil
}

// commit makes e, staged or direct; msg says what happened (label first).
func (p *Panel) commit(ctx context.Context, r *http.Request, u who, label string, e server.Edit, base int64) (msg string, err error) {
	o := server.WriteOptions{Base: base, NoWait: true, IntoOpenDraft: u.Can("draft stage"), Draft: u.Can("draft stage") && r.FormValue("stage") == "1"}
	res, err := p.core.Write(ctx, p.actor(r, u), o, e)
	if err != nil {
		return "", err
	}
	if res.Draft != nil {
		return label + ": staged in your draft (not applied yet)", nil
	}
	return writeSummary(label, res), nil
}

// desired is the state the configuration screens show the user: their
// draft's when they have one, else the stored one.
func (p *Panel) desired(ctx context.Context, u who) (st *ipvsmgr.State, rev int64, drafted bool, err error) {
	if u.Can("draft stage") {
		if d, err := p.core.Draft(ctx, u.User); err == nil {
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
