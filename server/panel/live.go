package panel

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"
)

// liveData is one request's view of the live table: the filter, sort and
// page, and the rows' HTML taken from the shared liveView.
type liveData struct {
	Q        string
	Problems bool
	Sort     string
	Query    url.Values
	Body     template.HTML // the rows, rendered by html/template once per snapshot (liveView)
	Pager    pager
	Stale    bool
	Known    bool
	Age      string
	Rev      int64
	Shown    int
	Matched  int
	Total    int
	CanOp    bool
	Back     string
}

var liveSorts = map[string]string{"name": "name", "state": "state", "active": "active", "cps": "cps", "bps": "bps", "pps": "pps"}

// liveHit is a service the filter kept, with the servers it kept (nil: all).
type liveHit struct {
	row     *svcRow
	servers []int
}

func (p *Panel) liveData(r *http.Request, u who) (*liveData, error) {
	m, err := p.model(r.Context())
	if err != nil {
		return nil, err
	}
	return p.liveDataOf(r, u, m, kernelOf(m.Snap)), nil
}

func (p *Panel) liveDataOf(r *http.Request, u who, m *model, kb *kernelBanner) *liveData {
	q := r.URL.Query()
	d := &liveData{Q: strings.TrimSpace(q.Get("q")), Problems: q.Get("problems") != "", Sort: liveSorts[q.Get("sort")], Rev: m.Rev,
		Total: len(m.Rows), CanOp: u.Can("rs drain")}
	if d.Sort == "" {
		d.Sort = "name"
	}
	d.Query = url.Values{}
	for _, k := range []string{"q", "problems", "sort", "page"} {
		if v := q.Get(k); v != "" {
			d.Query.Set(k, v)
		}
	}
	d.Back = queryWith("/live", d.Query)
	d.Stale, d.Known, d.Age = kb.Bad, kb.Known, kb.Age
	lv := p.liveView(m)
	pg := lv.page(d.Sort, d.Q, d.Problems, q.Get("page"), d.CanOp, func() livePage {
		hits := filterLive(lv.order(d.Sort), strings.ToLower(d.Q), d.Problems)
		var out livePage
		out.matched = len(hits)
		out.pager = newPager(r, len(hits), p.d.PageSize)
		out.body, out.shown = lv.body(hits[out.pager.From:out.pager.To], d.CanOp)
		return out
	})
	d.Body, d.Shown, d.Matched, d.Pager = pg.body, pg.shown, pg.matched, pg.pager
	return d
}

// filterLive keeps, in the order given, the services that match q (lower
// case) or have a real server that does, and with problems set only those
// with a problem, showing the servers that are it.
func filterLive(rows []*svcRow, q string, problems bool) []liveHit {
	hits := make([]liveHit, 0, len(rows))
	if q == "" && !problems {
		for _, row := range rows {
			hits = append(hits, liveHit{row: row})
		}
		return hits
	}
	for _, row := range rows {
		probServer := problems && row.hasProblemServer()
		if problems && row.Problem == "" && !probServer {
			continue
		}
		svcMatch := q == "" || strings.Contains(row.search, q)
		if svcMatch && !probServer {
			hits = append(hits, liveHit{row: row})
			continue
		}
		keep := []int{}
		for j, sr := range row.Servers {
			if (svcMatch || strings.Contains(sr.search, q)) && (!probServer || sr.Problem != "" || sr.Status == "draining") {
				keep = append(keep, j)
			}
		}
		if !svcMatch && len(keep) == 0 {
			continue
		}
		hits = append(hits, liveHit{row: row, servers: keep})
	}
	return hits
}

func (row *svcRow) hasProblemServer() bool {
	for _, s := range row.Servers {
		if s.Problem != "" {
			return true
		}
	}
	return false
}

func stateRank(s *svcRow) int {
	switch s.State {
	case "down", "all down":
		return 0
	case "degraded":
		return 1
	case "unknown":
		return 2
	case "up":
		return 3
	}
	return 4
}

func (p *Panel) liveShow(w http.ResponseWriter, r *http.Request, u who) {
	d, err := p.liveData(r, u)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	pg := p.newPage(r.Context(), r, u, "Live", "live")
	pg.Flash = takeFlash(w, r)
	pg.Kernel = nil // the table says its own age, refreshed with it
	pg.Refresh = queryWith("/live/rows", d.Query)
	pg.Data = d
	p.render(w, r, http.StatusOK, "live", pg)
}

// liveRows is the live table's body alone, which the page fetches every 2 s:
// rendered once per view, query, role and staleness for every browser, with
// the data's age put in per request.
func (p *Panel) liveRows(w http.ResponseWriter, r *http.Request, u who) {
	m, err := p.model(r.Context())
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	kb := kernelOf(m.Snap)
	if m.Snap == nil {
		p.renderTemplate(w, r, http.StatusOK, "live_rows", "live_rows", p.liveDataOf(r, u, m, kb))
		return
	}
	lv := p.liveView(m)
	frag, err := lv.fragment(liveFragKey{query: r.URL.RawQuery, canOp: u.Can("rs drain"), stale: kb.Bad}, func() (*holed, error) {
		d := p.liveDataOf(r, u, m, kb)
		d.Age = p.holes.mark(0)
		b, err := p.renderBytes(r, "live_rows", "live_rows", d)
		if err != nil {
			return nil, err
		}
		return p.holes.split(b), nil
	})
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	writeHTML(w, http.StatusOK, frag, []string{kb.Age})
}
