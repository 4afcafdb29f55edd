package panel

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

var settingsFields = []string{"network", "tcp_timeout", "tcpfin_timeout", "udp_timeout", "keep_foreign_services", "retire_timeout", "maintenance_dir"}

type settingsData struct {
	Form       *form
	Base       int64
	Drafted    bool
	Kernel     *server.Snapshot
	Redundancy *redundancyCard
	Directors  *directorsCard // replication between directors (directors.go)
	Alerts     *alertsCard    // the alert destinations' deliveries (alerts.go)
	// RedForm edits settings.redundancy, NodeForm this director's priority.
	RedForm, NodeForm *form
}

func settingsForm(s *ipvsmgr.Settings) *form {
	f := newForm()
	f.Values["network"] = s.Network
	f.Values["tcp_timeout"] = strconv.Itoa(s.TCPTimeout)
	f.Values["tcpfin_timeout"] = strconv.Itoa(s.TCPFinTimeout)
	f.Values["udp_timeout"] = strconv.Itoa(s.UDPTimeout)
	if s.KeepForeignServices {
		f.Values["keep_foreign_services"] = "1"
	}
	f.Values["retire_timeout"] = strconv.Itoa(s.RetireTimeout)
	f.Values["maintenance_dir"] = s.MaintenanceDir
	return f
}

func (p *Panel) settingsShow(w http.ResponseWriter, r *http.Request, u who) {
	st, rev, drafted, err := p.desired(r.Context(), u)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	p.showSettings(w, r, u, http.StatusOK, &settingsData{Form: settingsForm(&st.Settings), Base: rev, Drafted: drafted})
}

func (p *Panel) showSettings(w http.ResponseWriter, r *http.Request, u who, status int, d *settingsData) {
	pg := p.newPage(r.Context(), r, u, "Global settings", "settings")
	pg.Flash = takeFlash(w, r)
	ctx := r.Context()
	node, _ := p.core.NodeSettings(ctx) // the card says what it can without
	if d.RedForm == nil {
		if st, _, _, err := p.desired(ctx, u); err == nil {
			d.RedForm = redundancyForm(st.Settings.Redundancy)
		} else {
			d.RedForm = newForm()
		}
	}
	if d.NodeForm == nil {
		d.NodeForm = newForm()
		if node != nil {
			d.NodeForm.Values["priority"] = strconv.Itoa(node.Priority)
		}
	}
	invalid := false
	for _, f := range []*form{d.Form, d.RedForm, d.NodeForm} {
		pg.Errors = append(pg.Errors, f.Top...)
		invalid = invalid || len(f.Errs) > 0
	}
	if invalid && len(pg.Errors) == 0 {
		pg.Errors = []string{"Some fields are not valid: see the messages beside them."}
	}
	d.Kernel = p.core.Snapshot()
	if st, _, err := p.core.State(ctx); err == nil {
		d.Redundancy = redundancyCardOf(st.Settings.Redundancy, node)
	}
	followers, _ := p.core.Followers(ctx) // the card shows what it can without
	d.Directors = directorsCardOf(node, followers, time.Now())
	d.Alerts = alertsCardOf(p.core.AlertDeliveries(), time.Now())
	pg.Data = d
	p.render(w, r, status, "settings", pg)
}

func (p *Panel) settingsSave(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	f := newForm()
	for _, k := range settingsFields {
		f.Values[k] = r.PostFormValue(k)
	}
	// The form's fields only: the rest of the settings (redundancy) stays.
	network, keep, maintenance := f.V("network"), f.V("keep_foreign_services") != "", strings.TrimSpace(f.V("maintenance_dir"))
	tcp, fin, udp, retire := f.intField("tcp_timeout"), f.intField("tcpfin_timeout"), f.intField("udp_timeout"), f.intField("retire_timeout")
	patch := server.SettingsPatch{Network: &network, TCPTimeout: &tcp, TCPFinTimeout: &fin, UDPTimeout: &udp, KeepForeignServices: &keep,
		RetireTimeout: &retire, MaintenanceDir: &maintenance}
	d := &settingsData{Form: f, Base: baseOf(r), Drafted: p.staging(ctx, r, u)}
	if f.Invalid() {
		p.showSettings(w, r, u, http.StatusUnprocessableEntity, d)
		return
	}
	msg, err := p.commit(ctx, r, u, "settings", server.SettingsEdit(patch), d.Base)
	if err != nil {
		if server.CodeOf(err) == server.CodeInvalid {
			f.takeErr(err, false, settingsFields)
			p.showSettings(w, r, u, http.StatusUnprocessableEntity, d)
			return
		}
		p.formFailed(w, r, u, err, f, false, func(status int) { p.showSettings(w, r, u, status, d) })
		return
	}
	redirect(w, r, "/settings", msg)
}
