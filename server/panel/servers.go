package panel

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

type serverFormData struct {
	Form     *form
	SvcID    string
	ID       string // "" for a new real server
	Base     int64
	Drafted  bool
	AdminAll bool // an operator edits the weight and the forced health only
	// Inherit is the service's check type; CheckRows the check overrides.
	Inherit   string
	CheckRows []checkRow
}

func (p *Panel) showServerForm(w http.ResponseWriter, r *http.Request, u who, status int, d *serverFormData) {
	title := "New real server in " + d.SvcID
	if d.ID != "" {
		title = "Edit real server " + d.ID + " of " + d.SvcID
	}
	pg := p.newPage(r.Context(), r, u, title, "services")
	d.AdminAll = u.CanAdmin()
	d.CheckRows = checkRows(true, d.Inherit, "")
	pg.Errors = d.Form.Top
	if len(d.Form.Errs) > 0 && len(pg.Errors) == 0 {
		pg.Errors = []string{"Some fields are not valid: see the messages beside them."}
	}
	pg.Data = d
	p.render(w, r, status, "server_form", pg)
}

func (p *Panel) serverNew(w http.ResponseWriter, r *http.Request, u who) {
	l, ok := p.locate(w, r, u, false)
	if !ok {
		return
	}
	f := newForm()
	f.Values["weight"], f.Values["enabled"] = "1", "1"
	p.showServerForm(w, r, u, http.StatusOK, &serverFormData{Form: f, SvcID: server.ServiceID(l.svc), Base: l.rev, Drafted: l.drafted,
		Inherit: checkType(l.svc)})
}

// checkType is the type of a service's check ("" without one).
func checkType(svc *ipvsmgr.Service) string {
	if svc.Check == nil {
		return ""
	}
	return svc.Check.Type
}

func (p *Panel) serverCreate(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	l, ok := p.locate(w, r, u, false)
	if !ok {
		return
	}
	svcID := r.PathValue("id")
	f, rs := parseServerForm(r, checkType(l.svc))
	d := &serverFormData{Form: f, SvcID: svcID, Base: baseOf(r), Drafted: p.staging(ctx, r, u), Inherit: checkType(l.svc)}
	if f.Invalid() {
		p.showServerForm(w, r, u, http.StatusUnprocessableEntity, d)
		return
	}
	if rs.Address == "" {
		f.set("address", "a real server needs an address")
		p.showServerForm(w, r, u, http.StatusUnprocessableEntity, d)
		return
	}
	msg, err := p.commit(ctx, r, u, "add real server "+server.ServerID(&rs)+" to "+svcID, server.AddServerEdit(svcID, rs), d.Base)
	if err != nil {
		p.formFailed(w, r, u, err, f, true, func(status int) { p.showServerForm(w, r, u, status, d) })
		return
	}
	redirect(w, r, pathOf("services", svcID), msg)
}

type serverData struct {
	SvcID   string
	Svc     *ipvsmgr.Service
	Server  *ipvsmgr.Server
	ID      string
	Live    *srvRow
	Base    int64
	Drafted bool
	Charts  []chartView
	Range   string
	// Inherited is the service's check, Overrides the server's own fields.
	Inherited, Overrides []fact
	Testable             bool
	CheckNow             *checkNow
}

// located is the desired state a page shows (the user's draft, if any) with
// the virtual service and, when asked for, the real server the URL names.
type located struct {
	rev     int64
	drafted bool
	svc     *ipvsmgr.Service
	rs      *ipvsmgr.Server // nil unless the server was asked for
	ri      int
}

// locate finds the URL's {id} (and {sid} when withServer) in the desired
// state; when it cannot, it has answered and ok is false.
func (p *Panel) locate(w http.ResponseWriter, r *http.Request, u who, withServer bool) (l located, ok bool) {
	st, rev, drafted, err := p.desired(r.Context(), u)
	if err == nil {
		var i int
		if i, err = server.FindService(st, r.PathValue("id")); err == nil {
			l = located{rev: rev, drafted: drafted, svc: &st.Services[i]}
			if withServer {
				if l.ri, err = server.FindServer(l.svc, r.PathValue("sid")); err == nil {
					l.rs = &l.svc.Servers[l.ri]
				}
			}
		}
	}
	if err != nil {
		p.fail(w, r, u, err)
		return l, false
	}
	return l, true
}

func (p *Panel) serverShow(w http.ResponseWriter, r *http.Request, u who) {
	p.showServer(w, r, u, nil)
}

// showServer renders a real server's page, with the result of a check run
// now when there is one.
func (p *Panel) showServer(w http.ResponseWriter, r *http.Request, u who, now *checkNow) {
	ctx := r.Context()
	l, ok := p.locate(w, r, u, true)
	if !ok {
		return
	}
	d := &serverData{SvcID: server.ServiceID(l.svc), Svc: l.svc, Server: l.rs, ID: server.ServerID(l.rs), Base: l.rev, Drafted: l.drafted, Range: chartRange(r),
		Inherited: checkFacts(healthOf(l.svc.Check, nil, 0), checkRows(true, "", "")),
		Overrides: checkFacts(healthOf(l.rs.Check, nil, 0), checkRows(true, "", "")),
		Testable:  testable(l.svc, l.rs), CheckNow: now}
	if m, err := p.model(ctx); err == nil && !l.drafted {
		if row := m.byID[d.SvcID]; row != nil && l.ri < len(row.Servers) {
			d.Live = row.Servers[l.ri]
			d.Charts = p.charts(ctx, d.Live.SeriesKey, d.Range)
		}
	}
	pg := p.newPage(ctx, r, u, "Real server "+d.ID+" of "+d.SvcID, "services")
	pg.Flash = takeFlash(w, r)
	pg.Data = d
	p.render(w, r, http.StatusOK, "server", pg)
}

// checkNow is a check run from the page: its result, or why it could not run.
type checkNow struct {
	*server.CheckResult
	Took time.Duration
	Err  string
}

// serverCheck runs a real server's saved check once ("test this check
// now") and shows the result on its page; the result does not count toward
// rise or fall.
func (p *Panel) serverCheck(w http.ResponseWriter, r *http.Request, u who) {
	res, err := p.core.CheckServer(r.Context(), p.actor(r, u), r.PathValue("id"), r.PathValue("sid"))
	switch {
	case err == nil:
		p.showServer(w, r, u, &checkNow{CheckResult: res, Took: time.Duration(res.Duration * float64(time.Second))})
	case server.CodeOf(err) == server.CodeBadInput:
		p.showServer(w, r, u, &checkNow{Err: err.Error()})
	default:
		p.fail(w, r, u, err)
	}
}

// testable reports whether a real server has a check to run now: one that
// talks to it, on an enabled server of an enabled service.
func testable(svc *ipvsmgr.Service, rs *ipvsmgr.Server) bool {
	t := checkType(svc)
	if rs.Check != nil && rs.Check.Type != "" {
		t = rs.Check.Type
	}
	return t != "" && t != "none" && svc.IsEnabled() && rs.IsEnabled()
}

func (p *Panel) serverEdit(w http.ResponseWriter, r *http.Request, u who) {
	l, ok := p.locate(w, r, u, true)
	if !ok {
		return
	}
	p.showServerForm(w, r, u, http.StatusOK, &serverFormData{Form: serverForm(l.rs, checkType(l.svc)), SvcID: server.ServiceID(l.svc),
		ID: server.ServerID(l.rs), Base: l.rev, Drafted: l.drafted, Inherit: checkType(l.svc)})
}

func (p *Panel) serverSave(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	l, ok := p.locate(w, r, u, false)
	if !ok {
		return
	}
	svcID, sid := r.PathValue("id"), r.PathValue("sid")
	f, rs := parseServerForm(r, checkType(l.svc))
	d := &serverFormData{Form: f, SvcID: svcID, ID: sid, Base: baseOf(r), Drafted: p.staging(ctx, r, u), Inherit: checkType(l.svc)}
	if f.Invalid() {
		p.showServerForm(w, r, u, http.StatusUnprocessableEntity, d)
		return
	}
	patch := serverPatchOf(&rs)
	if !u.CanAdmin() {
		patch = server.ServerPatch{Weight: rs.Weight, Health: &rs.Health} // an operator changes weights and forces health, nothing else
	}
	msg, err := p.commit(ctx, r, u, "edit real server "+sid+" of "+svcID, server.PatchServerEdit(svcID, sid, patch), d.Base)
	if err != nil {
		p.formFailed(w, r, u, err, f, true, func(status int) { p.showServerForm(w, r, u, status, d) })
		return
	}
	next := sid
	if u.CanAdmin() && rs.Name != "" {
		next = rs.Name
	} else if u.CanAdmin() && rs.Name == "" {
		next = server.ServerID(&rs)
	}
	redirect(w, r, pathOf("services", svcID, "servers", next), msg)
}

// serverAction is a one-click action on one real server: drain, enable,
// disable (operator) or delete (admin). These go straight to the core: an
// operator drains a server now, not in a draft.
func (p *Panel) serverAction(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	svcID, sid, action := r.PathValue("id"), r.PathValue("sid"), r.PathValue("action")
	if action == "delete" { // an admin's (the core refuses an operator)
		msg, err := p.commit(ctx, r, u, "remove real server "+sid+" from "+svcID, server.RemoveServerEdit(svcID, sid), baseOf(r))
		if err != nil {
			p.writeFailed(w, r, u, err)
			return
		}
		redirect(w, r, pathOf("services", svcID), msg)
		return
	}
	if !validAction(action) {
		p.renderError(w, r, u, http.StatusNotFound, fmt.Sprintf("No action %q (want drain, enable or disable).", action))
		return
	}
	msg, err := p.act(ctx, r, u, action, []target{{svcID, sid}})
	if err != nil {
		p.writeFailed(w, r, u, err)
		return
	}
	redirect(w, r, backTo(r, pathOf("services", svcID, "servers", sid)), msg)
}

func validAction(a string) bool { return a == "drain" || a == "enable" || a == "disable" }

// target names one real server of one virtual service.
type target struct{ svc, server string }

// act makes one action on real servers, as one revision, through the core's
// edits: drain (weight 0 in the kernel, the configured weight kept), enable
// (ready again at the configured weight), disable (out of the kernel).
func (p *Panel) act(ctx context.Context, r *http.Request, u who, action string, ts []target) (string, error) {
	if len(ts) == 0 {
		return "", &server.Error{Code: server.CodeBadInput, Msg: "no real server selected"}
	}
	edits := make([]server.Edit, 0, len(ts))
	for _, t := range ts {
		switch action {
		case "drain":
			edits = append(edits, server.DrainServerEdit(t.svc, t.server))
		default:
			edits = append(edits, server.ServerEnabledEdit(t.svc, t.server, action == "enable"))
		}
	}
	label := fmt.Sprintf("%s %d real server(s)", action, len(ts))
	if len(ts) == 1 {
		label = fmt.Sprintf("rs %s %s %s", action, ts[0].svc, ts[0].server)
	}
	res, err := p.core.Write(ctx, p.actor(r, u), server.WriteOptions{NoWait: true}, edits...)
	if err != nil {
		return "", err
	}
	return writeSummary(label, res), nil
}
