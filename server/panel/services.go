package panel

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

type serviceListData struct {
	Q       string
	Rows    []serviceListRow
	Pager   pager
	Drafted bool
	Base    int64
}

type serviceListRow struct {
	ID, Name, Key string
	Svc           *ipvsmgr.Service
	Live          *svcRow // nil in a draft, or not matched
}

func (p *Panel) serviceList(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	st, rev, drafted, err := p.desired(ctx, u)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	m, _ := p.model(ctx)
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	var rows []serviceListRow
	for i := range st.Services {
		s := &st.Services[i]
		id := server.ServiceID(s)
		if q != "" && !matchText(q, s.Name, s.Address, strconv.Itoa(s.Port), id) {
			continue
		}
		row := serviceListRow{ID: id, Name: s.Name, Key: describeKey(s), Svc: s}
		if m != nil && !drafted {
			row.Live = m.byID[id]
		}
		rows = append(rows, row)
	}
	pg := p.newPage(ctx, r, u, "Virtual services", "services")
	pg.Flash = takeFlash(w, r)
	pgr := newPager(r, len(rows), 50)
	rows = rows[pgr.From:pgr.To]
	pg.Data = &serviceListData{Q: q, Rows: rows, Pager: pgr, Drafted: drafted, Base: rev}
	p.render(w, r, http.StatusOK, "services", pg)
}

// describeKey is a service's key as people write it: TCP 198.18.0.100:80, fwmark 5 (198.18.0.101).
func describeKey(s *ipvsmgr.Service) string {
	if s.FWMark != 0 {
		k := "fwmark " + strconv.FormatUint(uint64(s.FWMark), 10)
		if s.Address != "" {
			k += " (" + s.Address + ")"
		}
		return k
	}
	proto := s.Protocol
	if proto == "" {
		proto = "tcp"
	}
	addr := s.Address
	if strings.Contains(addr, ":") {
		addr = "[" + addr + "]"
	}
	return strings.ToUpper(proto) + " " + addr + ":" + strconv.Itoa(s.Port)
}

func matchText(q string, fields ...string) bool {
	q = strings.ToLower(q)
	for _, f := range fields {
		if strings.Contains(strings.ToLower(f), q) {
			return true
		}
	}
	return false
}

type serviceFormData struct {
	Form       *form
	ID         string // "" for a new service
	Base       int64
	Drafted    bool
	Schedulers []string
	CheckRows  []checkRow
}

func (p *Panel) serviceNew(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	_, rev, drafted, err := p.desired(ctx, u)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	f := newForm()
	f.Values["kind"], f.Values["enabled"] = "port", "1"
	p.showServiceForm(w, r, u, http.StatusOK, "service_new", &serviceFormData{Form: f, Base: rev, Drafted: drafted})
}

func (p *Panel) showServiceForm(w http.ResponseWriter, r *http.Request, u who, status int, view string, d *serviceFormData) {
	title := "New virtual service"
	if d.ID != "" {
		title = "Edit virtual service " + d.ID
	}
	pg := p.newPage(r.Context(), r, u, title, "services")
	d.Schedulers = ipvsmgr.Schedulers()
	d.CheckRows = checkRows(false, "", d.Form.V("check_type"))
	pg.Errors = d.Form.Top
	if len(d.Form.Errs) > 0 && len(pg.Errors) == 0 {
		pg.Errors = []string{"Some fields are not valid: see the messages beside them."}
	}
	pg.Data = d
	p.render(w, r, status, view, pg)
}

func (p *Panel) serviceCreate(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	f, svc := parseServiceForm(r)
	svc.Servers = []ipvsmgr.Server{}
	d := &serviceFormData{Form: f, Base: baseOf(r), Drafted: p.staging(ctx, r, u)}
	if f.Invalid() {
		p.showServiceForm(w, r, u, http.StatusUnprocessableEntity, "service_new", d)
		return
	}
	if svc.Name == "" {
		f.set("name", "a new virtual service needs a name")
		p.showServiceForm(w, r, u, http.StatusUnprocessableEntity, "service_new", d)
		return
	}
	msg, err := p.commit(ctx, r, u, "add virtual service "+svc.Name, server.AddServiceEdit(svc), d.Base)
	if err != nil {
		p.formFailed(w, r, u, err, f, false, func(status int) { p.showServiceForm(w, r, u, status, "service_new", d) })
		return
	}
	redirect(w, r, pathOf("services", svc.Name), msg)
}

// formFailed shows a form again with the core's error beside its fields,
// or the error page for what is not about the form.
func (p *Panel) formFailed(w http.ResponseWriter, r *http.Request, u who, err error, f *form, serverForm bool, show func(status int)) {
	switch server.CodeOf(err) {
	case server.CodeInvalid, server.CodeMalformed, server.CodeExists, server.CodeBadInput:
		if server.CodeOf(err) == server.CodeExists {
			f.set("name", err.Error())
		} else {
			f.takeErr(err, serverForm, formFields(serverForm))
		}
		show(http.StatusUnprocessableEntity)
	case server.CodeStale:
		p.showStale(w, r, u, err)
	default:
		p.fail(w, r, u, err)
	}
}

type staleData struct {
	Err   string
	Since []staleRevision
}

// showStale refuses a change made on a revision that moved, with what moved it.
func (p *Panel) showStale(w http.ResponseWriter, r *http.Request, u who, err error) {
	pg := p.newPage(r.Context(), r, u, "The state changed under you", "")
	pg.Errors = []string{err.Error()}
	pg.Data = &staleData{Err: err.Error(), Since: p.since(r.Context(), baseOf(r))}
	p.render(w, r, http.StatusConflict, "stale", pg)
}

type serviceData struct {
	ID      string
	Svc     *ipvsmgr.Service
	Key     string
	Live    *svcRow
	Drafted bool
	Base    int64
	Charts  []chartView
	Range   string
	// LiveServers is the live row of each of Svc.Servers (nil when unknown).
	LiveServers []*srvRow
	// CheckFacts is the service's check, sorry server and quorum; Testable
	// says which of Svc.Servers have a check to run now.
	CheckFacts []fact
	Testable   []bool
}

func (p *Panel) serviceShow(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	l, ok := p.locate(w, r, u, false)
	if !ok {
		return
	}
	svc := l.svc
	d := &serviceData{ID: server.ServiceID(svc), Svc: svc, Key: describeKey(svc), Drafted: l.drafted, Base: l.rev, Range: chartRange(r)}
	if m, err := p.model(ctx); err == nil && !l.drafted {
		d.Live = m.byID[d.ID]
		if d.Live != nil {
			d.Charts = p.charts(ctx, d.Live.SeriesKey, d.Range)
		}
	}
	d.LiveServers = make([]*srvRow, len(svc.Servers))
	if d.Live != nil {
		copy(d.LiveServers, d.Live.Servers)
	}
	typ := formType(svc.Check, false)
	h := healthOf(svc.Check, svc.SorryServer, svc.Quorum)
	h.Hysteresis = svc.Hysteresis
	d.CheckFacts = checkFacts(h, checkRows(false, "", typ))
	for i := range svc.Servers {
		d.Testable = append(d.Testable, testable(svc, &svc.Servers[i]))
	}
	pg := p.newPage(ctx, r, u, "Virtual service "+d.ID, "services")
	pg.Flash = takeFlash(w, r)
	pg.Data = d
	p.render(w, r, http.StatusOK, "service", pg)
}

func (p *Panel) serviceEdit(w http.ResponseWriter, r *http.Request, u who) {
	l, ok := p.locate(w, r, u, false)
	if !ok {
		return
	}
	p.showServiceForm(w, r, u, http.StatusOK, "service_edit", &serviceFormData{Form: serviceForm(l.svc), ID: server.ServiceID(l.svc), Base: l.rev, Drafted: l.drafted})
}

func (p *Panel) serviceSave(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	id := r.PathValue("id")
	f, svc := parseServiceForm(r)
	d := &serviceFormData{Form: f, ID: id, Base: baseOf(r), Drafted: p.staging(ctx, r, u)}
	if f.Invalid() {
		p.showServiceForm(w, r, u, http.StatusUnprocessableEntity, "service_edit", d)
		return
	}
	patch := patchOf(&svc)
	msg, err := p.commit(ctx, r, u, "edit virtual service "+id, server.PatchServiceEdit(id, patch), d.Base)
	if err != nil {
		p.formFailed(w, r, u, err, f, false, func(status int) { p.showServiceForm(w, r, u, status, "service_edit", d) })
		return
	}
	next := svc.Name
	if next == "" {
		next = id
	}
	redirect(w, r, pathOf("services", next), msg)
}

func (p *Panel) serviceEnable(w http.ResponseWriter, r *http.Request, u who) {
	p.serviceSetEnabled(w, r, u, true)
}

func (p *Panel) serviceDisable(w http.ResponseWriter, r *http.Request, u who) {
	p.serviceSetEnabled(w, r, u, false)
}

func (p *Panel) serviceSetEnabled(w http.ResponseWriter, r *http.Request, u who, on bool) {
	ctx := r.Context()
	id := r.PathValue("id")
	msg, err := p.commit(ctx, r, u, enableWord(on)+" virtual service "+id, server.ServiceEnabledEdit(id, on), baseOf(r))
	if err != nil {
		p.writeFailed(w, r, u, err)
		return
	}
	redirect(w, r, backTo(r, pathOf("services", id)), msg)
}

func (p *Panel) serviceDelete(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	id := r.PathValue("id")
	msg, err := p.commit(ctx, r, u, "remove virtual service "+id, server.RemoveServiceEdit(id), baseOf(r))
	if err != nil {
		p.writeFailed(w, r, u, err)
		return
	}
	redirect(w, r, "/services", msg)
}

// writeFailed shows a refused one-click write: stale with what moved, else the error.
func (p *Panel) writeFailed(w http.ResponseWriter, r *http.Request, u who, err error) {
	if server.CodeOf(err) == server.CodeStale {
		p.showStale(w, r, u, err)
		return
	}
	p.fail(w, r, u, err)
}

func enableWord(on bool) string {
	if on {
		return "enable"
	}
	return "disable"
}

// backTo is the local page a form asked to return to ("back"), or def.
func backTo(r *http.Request, def string) string {
	if b := LocalPath(r.PostFormValue("back")); b != "" {
		return b
	}
	return def
}

// pager is one page of a long list.
type pager struct {
	Page, Pages, From, To, Total int
	Prev, Next                   int
	Numbers                      []int
}

func newPager(r *http.Request, total, size int) pager {
	pg := pager{Total: total, Pages: (total + size - 1) / size}
	if pg.Pages == 0 {
		pg.Pages = 1
	}
	pg.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	pg.Page = max(1, min(pg.Page, pg.Pages))
	pg.From = min((pg.Page-1)*size, total)
	pg.To = min(pg.From+size, total)
	if pg.Page > 1 {
		pg.Prev = pg.Page - 1
	}
	if pg.Page < pg.Pages {
		pg.Next = pg.Page + 1
	}
	for n := max(1, pg.Page-4); n <= min(pg.Pages, pg.Page+4); n++ {
		pg.Numbers = append(pg.Numbers, n)
	}
	return pg
}
