package panel

import (
	"net/http"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// actionsSubmit applies one action to the selected real servers (sel =
// SERVICE/SERVER), or to one address in every virtual service that has it
// (address = IP), as one revision.
func (p *Panel) actionsSubmit(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	action := r.PostFormValue("action")
	if !validAction(action) {
		p.renderError(w, r, u, http.StatusUnprocessableEntity, "Choose drain, enable or disable.")
		return
	}
	var ts []target
	for _, sel := range r.PostForm["sel"] {
		// Names have no '/' in a key form; a service name may: split at the last one.
		i := strings.LastIndex(sel, "/")
		if i <= 0 {
			continue
		}
		ts = append(ts, target{sel[:i], sel[i+1:]})
	}
	if addr := r.PostFormValue("address"); addr != "" {
		st, _, err := p.core.State(ctx)
		if err != nil {
			p.fail(w, r, u, err)
			return
		}
		ts = append(ts, serversAt(st, addr)...)
	}
	if len(ts) == 0 {
		p.renderError(w, r, u, http.StatusUnprocessableEntity, "No real server was selected.")
		return
	}
	msg, err := p.act(ctx, r, u, action, ts)
	if err != nil {
		p.writeFailed(w, r, u, err)
		return
	}
	redirect(w, r, backTo(r, "/live"), msg)
}

// serversAt names every real server at address addr, in every service.
func serversAt(st *ipvsmgr.State, addr string) []target {
	var ts []target
	for i := range st.Services {
		for j := range st.Services[i].Servers {
			if st.Services[i].Servers[j].Address == addr {
				ts = append(ts, target{server.ServiceID(&st.Services[i]), server.ServerID(&st.Services[i].Servers[j])})
			}
		}
	}
	return ts
}

type addressData struct {
	Addr  string
	Rows  []*srvRow
	CanOp bool
}

// addressShow is one real-server address across every virtual service.
func (p *Panel) addressShow(w http.ResponseWriter, r *http.Request, u who) {
	m, err := p.model(r.Context())
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	addr := r.PathValue("addr")
	d := &addressData{Addr: addr, CanOp: u.Can("rs drain")}
	for _, row := range m.Rows {
		for _, sr := range row.Servers {
			if sr.Server != nil && sr.Server.Address == addr {
				d.Rows = append(d.Rows, sr)
			}
		}
	}
	pg := p.newPage(r.Context(), r, u, "Real server "+addr+" in every service", "live")
	pg.Flash = takeFlash(w, r)
	pg.Data = d
	p.render(w, r, http.StatusOK, "address", pg)
}
