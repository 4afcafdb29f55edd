package panel

import (
	"net/http"
	"net/netip"
	"sort"
	"strings"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

type prepRow struct {
	RIP      string
	VIPs     []string
	Services []string
	Mode     string
	Result   *arpguard.Result
	Problem  bool
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
}

// realserversShow lists each real-server address with the VIPs it serves,
// the mode its forwarding needs, its last push/verify result, and for one
// chosen address the script `ipvsctl realserver script` prints.
func (p *Panel) realserversShow(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	st, _, err := p.core.State(ctx)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	results, _ := p.core.RealServerResults(ctx)
	rows := prepRows(st, results)
	q := r.URL.Query()
	d := &prepData{Iface: q.Get("interface"), Gateway: q.Get("gateway")}
	if d.Iface == "" {
		d.Iface = "eth0"
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
	pg.Data = d
	p.render(w, r, http.StatusOK, "realservers", pg)
}

func prepRows(st *ipvsmgr.State, results []arpguard.Result) []prepRow {
	byRIP := map[string]*prepRow{}
	var order []string
	for i := range st.Services {
		svc := &st.Services[i]
		for j := range svc.Servers {
			rs := &svc.Servers[j]
			row := byRIP[rs.Address]
			if row == nil {
				row = &prepRow{RIP: rs.Address}
				byRIP[rs.Address] = row
				order = append(order, rs.Address)
			}
			fwd := firstOf(rs.Forwarding, svc.Forwarding, st.Settings.Network, "dr")
			mode := map[string]string{"dr": "dr-sysctl", "tun": "tun", "nat": "nat"}[fwd]
			if row.Mode == "" {
				row.Mode = mode
			} else if row.Mode != mode && !strings.Contains(row.Mode, mode) {
				row.Mode += "+" + mode
			}
			if svc.Address != "" && !contains(row.VIPs, svc.Address) {
				row.VIPs = append(row.VIPs, svc.Address)
			}
			row.Services = append(row.Services, svcName(svc))
		}
	}
	for i := range results {
		res := &results[i]
		if row := byRIP[hostOf(res.Host)]; row != nil {
			row.Result = res
			row.Problem = !res.OK()
		}
	}
	out := make([]prepRow, 0, len(order))
	for _, a := range order {
		out = append(out, *byRIP[a])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Problem && !out[j].Problem })
	return out
}

func svcName(s *ipvsmgr.Service) string {
	if s.Name != "" {
		return s.Name
	}
	return describeKey(s)
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// prepScript renders the selected real server's scripts with arpguard, as
// `ipvsctl realserver script` does.
func (p *Panel) prepScript(d *prepData) {
	row := d.Selected
	mode := row.Mode
	if strings.Contains(mode, "+") {
		d.ScriptErr = "its virtual services use different forwarding methods (" + mode + "): prepare it for each with the CLI"
		return
	}
	rip, err := netip.ParseAddr(row.RIP)
	if err != nil {
		d.ScriptErr = err.Error()
		return
	}
	t := arpguard.Target{RIP: rip, Interface: d.Iface, Mode: arpguard.Mode(mode)}
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
	d.Command = "ipvsctl realserver script --rip " + row.RIP + " --vip " + strings.Join(row.VIPs, ",") + " --mode " + mode + " --interface " + d.Iface
	if d.Gateway != "" {
		d.Command += " --gateway " + d.Gateway
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
