package panel

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

type draftData struct {
	Has      bool
	Base     int64
	Current  int64
	Moved    bool
	Changes  []string // document changes
	Kernel   []string // what the kernel will change
	Retiring []ipvsmgr.Retiring
	DiffErr  string
	Since    []staleRevision
	CanEdit  bool
}

func (p *Panel) draftShow(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	pg := p.newPage(ctx, r, u, "Draft", "")
	pg.Flash = takeFlash(w, r)
	d := &draftData{CanEdit: u.Can("draft apply")}
	pg.Data = d
	if _, err := p.core.Draft(ctx, u.User); errors.Is(err, server.ErrNotFound) {
		p.render(w, r, http.StatusOK, "draft", pg)
		return
	} else if err != nil {
		p.fail(w, r, u, err)
		return
	}
	p.fillDraft(r, d, u)
	p.render(w, r, http.StatusOK, "draft", pg)
}

// fillDraft is the core's diff of the user's draft.
func (p *Panel) fillDraft(r *http.Request, d *draftData, u who) {
	ctx := r.Context()
	diff, err := p.core.DiffDraft(ctx, u.User)
	if err != nil {
		d.DiffErr = err.Error()
		return
	}
	d.Has, d.Base, d.Current, d.Moved, d.Changes = true, diff.Base, diff.Current, diff.Moved, diff.Changes
	if diff.Kernel != nil {
		d.Kernel, d.Retiring = diff.Kernel.Changes, diff.Kernel.Retiring
	}
	d.DiffErr = diff.KernelErr
	if d.Moved {
		d.Since = p.since(ctx, diff.Base)
	}
}

// draftStart makes a draft from the current state.
func (p *Panel) draftStart(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	d, err := p.core.StartDraft(ctx, p.actor(r, u))
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	redirect(w, r, backTo(r, "/services"), "Draft started on revision "+strconv.FormatInt(d.Base, 10)+": edits now collect in it until you apply or discard it.")
}

// draftApply stores the draft as one revision, refused when the state moved
// since the draft's base.
func (p *Panel) draftApply(w http.ResponseWriter, r *http.Request, u who) {
	p.applyDraft(w, r, u, "", "draft applied")
}

// applyDraft applies the user's draft through the core (label for the
// history, "" for the core's), then goes to the history.
func (p *Panel) applyDraft(w http.ResponseWriter, r *http.Request, u who, label, done string) {
	ctx := r.Context()
	res, err := p.core.ApplyDraft(ctx, p.actor(r, u), label, server.WriteOptions{NoWait: true})
	switch {
	case err == nil:
		redirect(w, r, "/history", writeSummary(done, res))
	case server.CodeOf(err) == server.CodeStale:
		p.draftRefused(w, r, u, err)
	case server.CodeOf(err) == server.CodeNotFound:
		p.fail(w, r, u, err)
	default:
		pg := p.newPage(ctx, r, u, "Draft", "")
		pg.Errors = []string{err.Error()}
		d := &draftData{CanEdit: true}
		p.fillDraft(r, d, u)
		pg.Data = d
		p.render(w, r, statusOf(err), "draft", pg)
	}
}

func (p *Panel) draftRefused(w http.ResponseWriter, r *http.Request, u who, err error) {
	pg := p.newPage(r.Context(), r, u, "Draft refused", "")
	pg.Errors = []string{"Your draft was not applied: " + err.Error() + ". The change below was made since your draft's base; discard the draft and make your edits again on the new state."}
	d := &draftData{CanEdit: true}
	p.fillDraft(r, d, u)
	pg.Data = d
	p.render(w, r, http.StatusConflict, "draft", pg)
}

func (p *Panel) draftDiscard(w http.ResponseWriter, r *http.Request, u who) {
	if err := p.core.DiscardDraft(r.Context(), p.actor(r, u)); err != nil {
		p.fail(w, r, u, err)
		return
	}
	redirect(w, r, "/services", "Draft discarded.")
}
