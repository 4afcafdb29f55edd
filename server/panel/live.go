package panel

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
)

type liveData struct {
	Q        string
	Problems bool
	Sort     string
	Query    url.Values
	Rows     []liveSvc
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

type liveSvc struct {
	*svcRow
	Spark   string
	Servers []liveSrv
	Hidden  int // servers filtered out
}

type liveSrv struct {
	*srvRow
	Spark string
}

var liveSorts = map[string]string{"name": "name", "state": "state", "active": "active", "cps": "cps", "bps": "bps", "pps": "pps"}

func (p *Panel) liveData(r *http.Request, u who) (*liveData, error) {
	ctx := r.Context()
	m, err := p.model(ctx)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	d := &liveData{Q: strings.TrimSpace(q.Get("q")), Problems: q.Get("problems") != "", Sort: liveSorts[q.Get("sort")], Rev: m.Rev,
		Total: len(m.Rows), CanOp: u.CanOperate()}
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
	kb := kernelOf(m.Snap)
	d.Stale, d.Known, d.Age = kb.Bad, kb.Known, kb.Age
	var rows []liveSvc
	for _, row := range m.Rows {
		if d.Problems && row.Problem == "" && !hasProblemServer(row) {
			continue
		}
		ls := liveSvc{svcRow: row}
		svcMatch := d.Q == "" || matchText(d.Q, row.Name, row.KeyText, row.Svc.Address, row.ID)
		for _, sr := range row.Servers {
			keep := svcMatch || matchText(d.Q, sr.Name, sr.Addr, sr.ID)
			if d.Problems && hasProblemServer(row) && sr.Problem == "" && sr.Status != "draining" {
				keep = false // show the servers that are the problem
			}
			if keep {
				ls.Servers = append(ls.Servers, liveSrv{srvRow: sr})
			} else {
				ls.Hidden++
			}
		}
		if !svcMatch && len(ls.Servers) == 0 {
			continue
		}
		rows = append(rows, ls)
	}
	sortLive(rows, d.Sort)
	d.Matched = len(rows)
	d.Pager = newPager(r, len(rows), p.d.PageSize)
	rows = rows[d.Pager.From:d.Pager.To]
	for i := range rows {
		rows[i].Spark = p.sampler.spark(rows[i].SeriesKey)
		for j := range rows[i].Servers {
			rows[i].Servers[j].Spark = p.sampler.spark(rows[i].Servers[j].SeriesKey)
		}
		d.Shown += len(rows[i].Servers)
	}
	d.Rows = rows
	return d, nil
}

func hasProblemServer(row *svcRow) bool {
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

func sortLive(rows []liveSvc, by string) {
	key := func(r liveSvc) uint64 {
		switch by {
		case "active":
			return r.Active
		case "cps":
			return r.Stats.CPS
		case "bps":
			return r.Stats.InBPS + r.Stats.OutBPS
		case "pps":
			return r.Stats.InPPS + r.Stats.OutPPS
		}
		return 0
	}
	switch by {
	case "name":
		return // the desired state's order
	case "state":
		sort.SliceStable(rows, func(i, j int) bool { return stateRank(rows[i].svcRow) < stateRank(rows[j].svcRow) })
	default:
		sort.SliceStable(rows, func(i, j int) bool { return key(rows[i]) > key(rows[j]) })
	}
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

// liveRows is the live table's body alone, which the page fetches every 2 s.
func (p *Panel) liveRows(w http.ResponseWriter, r *http.Request, u who) {
	d, err := p.liveData(r, u)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	p.renderTemplate(w, r, http.StatusOK, "live_rows", "live_rows", d)
}
