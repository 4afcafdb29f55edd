package panel

import (
	"bytes"
	"html/template"
	"sort"
	"strings"
	"sync"
)

// liveView is the live table's rows rendered to HTML, built lazily for one
// model (revision and snapshot) and one sparkline sample, and shared by every
// browser: a snapshot changes every 2 s, so a row is rendered at most once
// per 2 s however many browsers poll it. Rendering goes through html/template
// (partials/live_row.html), which escapes every field; a request only joins
// the pieces its filter and page kept.
type liveView struct {
	m     *model
	spark uint64
	t     *template.Template
	tErr  error // why t is nil
	s     *sampler

	mu     sync.Mutex
	orders map[string][]*svcRow
	pages  map[livePageKey]livePage // a page of the table as shown, by what asked for it
	frags  map[liveFragKey]*holed   // the fragment the page polls, by what asked for it
	// Per variant (0: viewer, 1: operator, who gets checkboxes and buttons),
	// per row: each real server's row, and the service's whole tbody (its
	// row and all its servers'); hidden: service rows that say a filter hid
	// some of its servers.
	srv    [2][][]string
	grp    [2][]string
	hidden map[hiddenKey]string
}

// liveView returns the shared view of m, a new one when m or the sparklines moved.
func (p *Panel) liveView(m *model) *liveView {
	gen := p.sampler.generation()
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	if lv := p.live; lv != nil && lv.m == m && lv.spark == gen {
		return lv
	}
	t, err := p.views.get("live_row")
	if err != nil {
		p.log.Error("panel: view", "view", "live_row", "err", err)
	}
	lv := &liveView{m: m, spark: gen, t: t, tErr: err, s: p.sampler, orders: map[string][]*svcRow{},
		pages: map[livePageKey]livePage{}, frags: map[liveFragKey]*holed{}, hidden: map[hiddenKey]string{}}
	for v := range lv.grp {
		lv.grp[v] = make([]string, len(m.Rows))
		lv.srv[v] = make([][]string, len(m.Rows))
	}
	p.live = lv
	return lv
}

// livePage is one page of the table, as a filter, sort and role see it.
type livePage struct {
	body           template.HTML
	shown, matched int
	pager          pager
}

type livePageKey struct {
	sort, q, page   string
	problems, canOp bool
}

// maxLivePages bounds the pages kept per view (a view lives 2 s).
const maxLivePages = 64

// page is the page that sort, q, problems and page number ask for, made
// once per view by build: every browser showing the same page shares it.
func (lv *liveView) page(sort, q string, problems bool, page string, canOp bool, build func() livePage) livePage {
	key := livePageKey{sort, q, page, problems, canOp}
	lv.mu.Lock()
	pg, ok := lv.pages[key]
	lv.mu.Unlock()
	if ok {
		return pg
	}
	pg = build()
	lv.mu.Lock()
	if len(lv.pages) >= maxLivePages {
		clear(lv.pages)
	}
	lv.pages[key] = pg
	lv.mu.Unlock()
	return pg
}

// liveFragKey is what the polled fragment is made from besides the view:
// the query as sent (its links keep it), the role, and whether the data
// is stale (it says so).
type liveFragKey struct {
	query        string
	canOp, stale bool
}

// fragment is the fragment for key, made once per view by build.
func (lv *liveView) fragment(key liveFragKey, build func() (*holed, error)) (*holed, error) {
	lv.mu.Lock()
	f := lv.frags[key]
	lv.mu.Unlock()
	if f != nil {
		return f, nil
	}
	f, err := build()
	if err != nil {
		return nil, err
	}
	lv.mu.Lock()
	if len(lv.frags) >= maxLivePages {
		clear(lv.frags)
	}
	lv.frags[key] = f
	lv.mu.Unlock()
	return f, nil
}

// order is the services sorted by key ("name": the desired state's order),
// sorted once per view.
func (lv *liveView) order(by string) []*svcRow {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if o, ok := lv.orders[by]; ok {
		return o
	}
	o := append([]*svcRow(nil), lv.m.Rows...)
	key := func(r *svcRow) uint64 {
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
	case "state":
		sort.SliceStable(o, func(i, j int) bool { return stateRank(o[i]) < stateRank(o[j]) })
	default:
		sort.SliceStable(o, func(i, j int) bool { return key(o[i]) > key(o[j]) })
	}
	lv.orders[by] = o
	return o
}

// body joins the rows of hits, rendering those not rendered yet. It returns
// the HTML and the number of real-server rows in it. Every piece is a
// template's (partials/live_row.html): a service's whole tbody when no
// filter hid any of its real servers, else one made of its rows the filter
// kept.
func (lv *liveView) body(hits []liveHit, canOp bool) (template.HTML, int) {
	v := 0
	if canOp {
		v = 1
	}
	var b strings.Builder
	shown := 0
	lv.mu.Lock()
	defer lv.mu.Unlock()
	var buf bytes.Buffer
	for _, h := range hits {
		row := h.row
		if lv.grp[v][row.Index] == "" {
			lv.render(&buf, row, v)
		}
		servers := lv.srv[v][row.Index]
		if h.servers == nil || len(h.servers) == len(servers) {
			b.WriteString(lv.grp[v][row.Index])
			shown += len(servers)
			continue
		}
		kept := make([]template.HTML, len(h.servers))
		for k, j := range h.servers {
			kept[k] = template.HTML(servers[j])
		}
		svc := lv.hiddenRow(&buf, row, v, len(servers)-len(h.servers))
		b.WriteString(lv.exec(&buf, "live_group", liveGroup{Svc: template.HTML(svc), Servers: kept}))
		shown += len(h.servers)
	}
	return template.HTML(b.String()), shown
}

// liveGroup is a service's tbody: its row and its real servers' rows.
type liveGroup struct {
	Svc     template.HTML
	Servers []template.HTML
}

// hiddenKey is a service row that says n of its real servers are hidden.
type hiddenKey struct{ v, row, n int }

// hiddenRow is row's service row for variant v saying n real servers are
// hidden, rendered once per view (lv.mu held).
func (lv *liveView) hiddenRow(buf *bytes.Buffer, row *svcRow, v, n int) string {
	k := hiddenKey{v, row.Index, n}
	if s, ok := lv.hidden[k]; ok {
		return s
	}
	c := svcCellsOf(row, lv.s.spark(row.SeriesKey))
	c.Hidden = n
	s := lv.exec(buf, "live_svc", c)
	lv.hidden[k] = s
	return s
}

// exec renders template name with data, or the row that says it cannot.
func (lv *liveView) exec(buf *bytes.Buffer, name string, data any) string {
	buf.Reset()
	if lv.t == nil {
		return template.HTMLEscapeString(lv.tErr.Error())
	}
	if err := lv.t.ExecuteTemplate(buf, name, data); err != nil {
		buf.Reset()
		if err2 := lv.t.ExecuteTemplate(buf, "live_error", err.Error()); err2 != nil {
			return template.HTMLEscapeString(err.Error())
		}
	}
	return buf.String()
}

// render fills in row's HTML for variant v (lv.mu held): its service row,
// its real servers' rows, and the whole tbody of them.
func (lv *liveView) render(buf *bytes.Buffer, row *svcRow, v int) {
	svc := lv.exec(buf, "live_svc", svcCellsOf(row, lv.s.spark(row.SeriesKey)))
	out := make([]string, len(row.Servers))
	all := make([]template.HTML, len(row.Servers))
	for j, sr := range row.Servers {
		out[j] = lv.exec(buf, "live_srv", srvCellsOf(sr, lv.s.spark(sr.SeriesKey), v == 1))
		all[j] = template.HTML(out[j])
	}
	lv.srv[v][row.Index] = out
	lv.grp[v][row.Index] = lv.exec(buf, "live_group", liveGroup{Svc: template.HTML(svc), Servers: all})
}

// svcCells is a service's row with every cell already formatted.
type svcCells struct {
	Problem                    string
	Href, Label, Key           string
	State, StateClass          string
	Active, Inactive, CPS, PPS string
	BPS, Spark                 string
	Hidden                     int // real servers a filter hides
}

func svcCellsOf(row *svcRow, spark string) svcCells {
	label := row.Name
	if label == "" {
		label = row.ID
	}
	return svcCells{Problem: row.Problem, Href: pathOf("services", row.ID), Label: label, Key: row.KeyText,
		State: row.State, StateClass: stateClass(row.State), Active: fmtNum(row.Active), Inactive: fmtNum(row.Inactive),
		CPS: fmtRate(row.Stats.CPS), PPS: fmtRate(row.Stats.InPPS + row.Stats.OutPPS), BPS: fmtBytes(row.Stats.InBPS + row.Stats.OutBPS),
		Spark: spark}
}

// srvCells is a real server's row with every cell already formatted; an
// empty URL is a link or button not shown.
type srvCells struct {
	Problem, Draining           string
	Sel, SelLabel               string
	Href, Label, Addr           string
	Status, StatusClass         string
	Admin, AdminClass           string
	Health, HealthClass         string
	CheckAge, CheckLate         string // when its check last ran, how late (checkage.go)
	Weight, Active, Inactive    string
	Limit, Lower                string
	AtLimit                     bool
	CPS, PPS, BPS, Spark        string
	Drain, Enable, Disable, Why string
}

func srvCellsOf(sr *srvRow, spark string, canOp bool) srvCells {
	c := srvCells{Problem: sr.Problem, Addr: sr.Addr, Label: sr.Addr, Status: sr.Status, StatusClass: stateClass(sr.Status),
		Admin: sr.Admin, AdminClass: stateClass(sr.Admin), Health: sr.Health, HealthClass: healthClass(sr.Health),
		CheckAge: sr.CheckAge(), CheckLate: sr.CheckLate(), Active: fmtNum(sr.Active), Inactive: fmtNum(sr.Inactive),
		CPS: fmtRate(sr.Stats.CPS), PPS: fmtRate(sr.Stats.InPPS + sr.Stats.OutPPS), BPS: fmtBytes(sr.Stats.InBPS + sr.Stats.OutBPS),
		Spark: spark}
	if sr.Status == "draining" {
		c.Draining = " ↓"
	}
	cfg, kw := "—", "—"
	if sr.Server != nil {
		cfg = itoa(sr.CfgWeight)
	}
	if sr.InKernel {
		kw = itoa(int(sr.KWeight))
	}
	c.Weight = cfg + " / " + kw
	switch {
	case sr.Upper == 0:
		c.Limit = "—"
	case sr.AtThreshold():
		c.AtLimit, c.Limit = true, itoa(int(sr.Active))+"/"+itoa(sr.Upper)
	default:
		c.Limit = itoa(sr.Upper)
	}
	if sr.Upper != 0 && sr.Lower != 0 {
		c.Lower = " / " + itoa(sr.Lower)
	}
	if sr.Server == nil {
		return c // removed from the desired state: no page, no actions
	}
	if sr.Name != "" {
		c.Label = sr.Name
	}
	base := pathOf("services", sr.Svc.ID, "servers", sr.ID)
	c.Href, c.Why = base, base+"/why"
	if canOp {
		c.Sel, c.SelLabel = sr.Svc.ID+"/"+sr.ID, "Select "+sr.ID+" of "+sr.Svc.ID
		if sr.Admin == "enabled" {
			c.Drain = base + "/drain"
		} else {
			c.Enable = base + "/enable"
		}
		if sr.Admin != "disabled" {
			c.Disable = base + "/disable"
		}
	}
	return c
}

func stateClass(s string) string { return "st-" + strings.ReplaceAll(s, " ", "-") }

// healthClass colours a health phase: up, down, on its way (going up or
// down, forced), or not known (unchecked, not checked yet).
func healthClass(phase string) string {
	switch {
	case phase == "up" || phase == "forced up" || phase == "sorry server":
		return "st-up"
	case phase == "down" || phase == "forced down":
		return "st-down"
	case strings.HasPrefix(phase, "going"):
		return "st-draining"
	}
	return "st-unchecked"
}
