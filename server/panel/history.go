package panel

import (
	"net/http"
	"strconv"

	"github.com/ipvsctl/ipvsctl/server"
)

type historyData struct {
	Revs    []historyRow
	Limit   int
	More    bool
	CanRoll bool
	Current int64
}

type historyRow struct {
	ID      int64
	At      string
	Ago     string
	Author  string
	Via     string
	Summary string
}

func (p *Panel) historyList(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	revs, err := p.core.History(ctx, limit+1)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	d := &historyData{Limit: limit, CanRoll: u.Can("rollback")}
	if len(revs) > limit {
		revs, d.More = revs[:limit], true
	}
	if len(revs) > 0 {
		d.Current = revs[0].ID
	}
	for _, rv := range revs {
		d.Revs = append(d.Revs, historyRow{ID: rv.ID, At: when(rv.At), Ago: ago(rv.At), Author: rv.Author, Via: rv.Via, Summary: rv.Summary})
	}
	pg := p.newPage(ctx, r, u, "History", "history")
	pg.Flash = takeFlash(w, r)
	pg.Data = d
	p.render(w, r, http.StatusOK, "history", pg)
}

type revisionData struct {
	Rev     *server.RevisionDetail
	CanRoll bool
	Current int64
}

func (p *Panel) historyShow(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	n, err := strconv.ParseInt(r.PathValue("rev"), 10, 64)
	if err != nil || n < 1 {
		p.renderError(w, r, u, http.StatusNotFound, "No such revision.")
		return
	}
	rd, err := p.core.Revision(ctx, n)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	cur, _ := p.core.CurrentRevision(ctx)
	pg := p.newPage(ctx, r, u, "Revision "+strconv.FormatInt(n, 10), "history")
	pg.Data = &revisionData{Rev: rd, CanRoll: u.Can("rollback"), Current: cur}
	p.render(w, r, http.StatusOK, "revision", pg)
}

func (p *Panel) historyRollback(w http.ResponseWriter, r *http.Request, u who) {
	n, err := strconv.ParseInt(r.PathValue("rev"), 10, 64)
	if err != nil || n < 1 {
		p.renderError(w, r, u, http.StatusNotFound, "No such revision.")
		return
	}
	res, err := p.core.Rollback(r.Context(), p.actor(r, u), n, server.WriteOptions{Base: baseOf(r), NoWait: true})
	if err != nil {
		p.writeFailed(w, r, u, err)
		return
	}
	redirect(w, r, "/history", writeSummary("rolled back to revision "+strconv.FormatInt(n, 10), res))
}
