package panel

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

type draftData struct {
	Has     bool
	Base    int64
	Current int64
	Moved   bool
	Changes []string // document changes
	Kernel  []string // what the kernel will change
	Drains  []ipvsmgr.Drain
	DiffErr string
	Since   []staleRevision
	CanEdit bool
}

func (p *Panel) draftShow(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	pg := p.newPage(ctx, r, u, "Draft", "")
	pg.Flash = takeFlash(w, r)
	d := &draftData{CanEdit: u.CanAdmin()}
	pg.Data = d
	dr, err := p.drafts.get(ctx, u.User)
	if errors.Is(err, store.ErrNotFound) {
		p.render(w, r, http.StatusOK, "draft", pg)
		return
	}
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	p.fillDraft(r, d, dr)
	p.render(w, r, http.StatusOK, "draft", pg)
}

func (p *Panel) fillDraft(r *http.Request, d *draftData, dr *store.Draft) {
	ctx := r.Context()
	d.Has, d.Base = true, dr.Base
	cur, rev, err := p.core.State(ctx)
	if err != nil {
		d.DiffErr = err.Error()
		return
	}
	d.Current, d.Moved = rev, rev != dr.Base
	st, err := ipvsmgr.DecodeState(bytes.NewReader(dr.Doc))
	if err != nil {
		d.DiffErr = err.Error()
		return
	}
	d.Changes = ipvsmgr.Changes(cur, st)
	diff, err := p.core.Diff(ctx, bytes.NewReader(dr.Doc))
	if err != nil {
		d.DiffErr = err.Error()
	} else {
		d.Kernel, d.Drains = diff.Changes, diff.Draining
	}
	if d.Moved {
		d.Since = p.since(ctx, dr.Base)
	}
}

// draftStart makes a draft from the current state.
func (p *Panel) draftStart(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	d, _, err := p.loadDraft(ctx, u, true)
	if err == nil {
		err = p.drafts.save(ctx, d)
	}
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	redirect(w, r, backTo(r, "/services"), "Draft started on revision "+strconv.FormatInt(d.Base, 10)+": edits now collect in it until you apply or discard it.")
}

// draftApply stores the draft as one revision, refused when the state moved
// since the draft's base.
func (p *Panel) draftApply(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	dr, err := p.drafts.get(ctx, u.User)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	st, err := ipvsmgr.DecodeState(bytes.NewReader(dr.Doc))
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	base := dr.Base
	if base == 0 {
		// A draft made before the first revision: refuse if one appeared since.
		if rev, err := p.core.CurrentRevision(ctx); err == nil && rev != 0 {
			err := &store.StaleError{Base: 0, Current: rev}
			p.draftRefused(w, r, u, dr, err)
			return
		}
	}
	res, err := p.core.ApplyState(ctx, p.actor(r, u), st, "panel draft", server.WriteOptions{Base: base, NoWait: true})
	if err != nil {
		if server.CodeOf(err) == server.CodeStale {
			p.draftRefused(w, r, u, dr, err)
			return
		}
		pg := p.newPage(ctx, r, u, "Draft", "")
		pg.Errors = []string{err.Error()}
		d := &draftData{CanEdit: true}
		p.fillDraft(r, d, dr)
		pg.Data = d
		p.render(w, r, statusOf(err), "draft", pg)
		return
	}
	if err := p.drafts.remove(ctx, u.User); err != nil {
		p.log.Error("panel: delete applied draft", "user", u.User, "err", err)
	}
	redirect(w, r, "/history", writeSummary("draft applied", res))
}

func (p *Panel) draftRefused(w http.ResponseWriter, r *http.Request, u who, dr *store.Draft, err error) {
	pg := p.newPage(r.Context(), r, u, "Draft refused", "")
	pg.Errors = []string{"Your draft was not applied: " + err.Error() + ". The change below was made since your draft's base; discard the draft and make your edits again on the new state."}
	d := &draftData{CanEdit: true}
	p.fillDraft(r, d, dr)
	pg.Data = d
	p.render(w, r, http.StatusConflict, "draft", pg)
}

func (p *Panel) draftDiscard(w http.ResponseWriter, r *http.Request, u who) {
	if err := p.drafts.remove(r.Context(), u.User); err != nil {
		p.fail(w, r, u, err)
		return
	}
	redirect(w, r, "/services", "Draft discarded.")
}
