package panel

import (
	"context"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/server"
)

type prepRow struct {
	server.RealServerPrep
	Bad    bool   // its last result is not prepared, or it cannot be verified from here
	Detail string // the last result's detail, without its state repeated
}

type prepData struct {
	Rows      []prepRow
	Pager     pager
	Selected  *prepRow
	Iface     string
	Gateway   string
	Script    string
	Verify    string
	Command   string
	ScriptErr string
	// CanVerify shows the Verify buttons (admins); VerifyOff, when set, says
	// why they are disabled and how to enable them.
	CanVerify bool
	VerifyOff string
	Back      string
}

// realserversShow lists each real-server address with the VIPs it serves,
// the mode its forwarding needs, its last push/verify result, and for one
// chosen address the script `ipvsctl realserver script` prints.
func (p *Panel) realserversShow(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	preps, err := p.core.RealServers(ctx)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	rows := prepRows(preps)
	q := r.URL.Query()
	d := &prepData{Iface: q.Get("interface"), Gateway: q.Get("gateway"), CanVerify: u.Can("realserver"), Back: r.URL.RequestURI()}
	if d.CanVerify {
		d.VerifyOff = p.core.RealServerSSHUnavailable()
	}
	if rip := q.Get("rip"); rip != "" {
		for i := range rows {
			if rows[i].RIP == rip {
				d.Selected = &rows[i]
			}
		}
		if d.Selected != nil {
			p.prepScript(d)
		}
	}
	d.Pager = newPager(r, len(rows), 100)
	d.Rows = rows[d.Pager.From:d.Pager.To]
	pg := p.newPage(ctx, r, u, "Real-server preparation", "realservers")
	pg.Flash = takeFlash(w, r)
	pg.Data = d
	p.render(w, r, http.StatusOK, "realservers", pg)
}

// realserversVerify reads the chosen real servers' state back over SSH
// (rip, repeatable; none: every one), through the core, which stores each
// result; the page then shows them.
func (p *Panel) realserversVerify(w http.ResponseWriter, r *http.Request, u who) {
	if err := r.ParseForm(); err != nil {
		p.renderError(w, r, u, http.StatusBadRequest, "The form could not be read.")
		return
	}
	// Each real server may take the SSH timeout; the run finishes, and is
	// stored, even if the browser goes away.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(15 * time.Minute))
	ctx := context.WithoutCancel(r.Context())
	rep, err := p.core.PrepareRealServers(ctx, p.actor(r, u), server.RealServerVerify, server.RealServerSelection{RIPs: r.PostForm["rip"]})
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	redirect(w, r, backTo(r, "/realservers"), "Verified: "+server.PrepSummary(rep))
}

// prepRows puts the real servers with a problem first.
func prepRows(preps []server.RealServerPrep) []prepRow {
	rows := make([]prepRow, len(preps))
	for i, pr := range preps {
		rows[i] = prepRow{RealServerPrep: pr, Bad: pr.Problem != ""}
		if res := pr.Result; res != nil {
			rows[i].Bad = rows[i].Bad || !res.OK()
			rows[i].Detail = strings.TrimPrefix(res.Detail, string(res.State)+": ")
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Bad && !rows[j].Bad })
	return rows
}

// prepScript renders the selected real server's scripts with arpguard, as
// `ipvsctl realserver script` does, for the interface and gateway of its
// last push unless the form names others.
func (p *Panel) prepScript(d *prepData) {
	row := d.Selected
	t := arpguard.Target{Interface: "eth0", Mode: arpguard.Mode(row.Mode)}
	if row.Target != nil {
		t = *row.Target
	}
	if d.Iface == "" {
		d.Iface = t.Interface
	}
	if d.Gateway == "" && t.Gateway.IsValid() {
		d.Gateway = t.Gateway.String()
	}
	if strings.Contains(row.Mode, "+") {
		d.ScriptErr = row.Problem
		return
	}
	rip, err := netip.ParseAddr(row.RIP)
	if err != nil {
		d.ScriptErr = err.Error()
		return
	}
	t.RIP, t.Interface, t.VIPs = rip, d.Iface, nil
	for _, v := range row.VIPs {
		if a, err := netip.ParseAddr(v); err == nil {
			t.VIPs = append(t.VIPs, a)
		}
	}
	if d.Gateway != "" {
		if t.Gateway, err = netip.ParseAddr(d.Gateway); err != nil {
			d.ScriptErr = "gateway: " + d.Gateway + " is not an address"
			return
		}
	}
	d.Command = "ipvsctl realserver script --rip " + row.RIP + " --vip " + strings.Join(row.VIPs, ",") + " --mode " + row.Mode + " --interface " + d.Iface
	if d.Gateway != "" {
		d.Command += " --gateway " + d.Gateway
	}
	if t.Route == arpguard.RouteHost {
		var ps []string
		for _, c := range t.ClientPrefixes {
			ps = append(ps, c.String())
		}
		d.Command += " --route host --client-prefix " + strings.Join(ps, ",")
	}
	if err := t.Validate(); err != nil {
		d.ScriptErr = err.Error()
		return
	}
	paths := arpguard.DefaultPaths()
	steps, err := arpguard.Plan(t, paths)
	if err != nil {
		d.ScriptErr = err.Error()
		return
	}
	d.Script = arpguard.RenderApply(t, steps, paths)
	d.Verify = arpguard.RenderVerify(t, steps)
}
