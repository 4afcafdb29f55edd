package panel

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/ipvsctl/ipvsctl/server"
)

// check is one thing that can keep a real server from getting traffic.
type check struct {
	What     string
	Blocking bool   // this stops traffic
	Unknown  bool   // cannot tell
	Detail   string // what was found
}

type whyData struct {
	SvcID, ID string
	Addr      string
	Checks    []check
	Verdict   string
	Blocked   int
}

// whyShow answers "why is this real server not getting traffic?": every
// check in order, each saying what it found.
func (p *Panel) whyShow(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	m, err := p.model(ctx)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	i, err := server.FindService(m.State, r.PathValue("id"))
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	svc := &m.State.Services[i]
	j, err := server.FindServer(svc, r.PathValue("sid"))
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	row := m.Rows[i]
	sr := row.Servers[j]
	rs := sr.Server
	d := &whyData{SvcID: row.ID, ID: sr.ID, Addr: sr.Addr}
	add := func(c check) {
		if c.Blocking {
			d.Blocked++
		}
		d.Checks = append(d.Checks, c)
	}
	kb := kernelOf(m.Snap)
	if kb.Bad {
		add(check{What: "Kernel data", Unknown: true, Detail: "the kernel table is stale or unreadable: what follows about the kernel may be old. " + kb.Reason + kb.Error})
	}
	add(check{What: "Virtual service enabled", Blocking: !row.Enabled, Detail: ifElse(row.Enabled, "yes", "no: the virtual service "+row.ID+" is disabled, so none of its real servers is in the kernel")})
	add(check{What: "Real server enabled", Blocking: !rs.IsEnabled(), Detail: ifElse(rs.IsEnabled(), "yes", "no: this real server is disabled (kept in the configuration, out of the kernel)")})
	wt := rs.EffectiveWeight()
	switch {
	case wt == 0 && sr.Active > 0:
		add(check{What: "Weight", Blocking: true, Detail: fmt.Sprintf("0: drained — no new connections; %d established ones still draining", sr.Active)})
	case wt == 0:
		add(check{What: "Weight", Blocking: true, Detail: "0: drained — the scheduler sends it no new connection"})
	default:
		add(check{What: "Weight", Detail: fmt.Sprintf("%d configured", wt)})
	}
	rep, haveRep := p.core.LastReconcile()
	kernelErr := ""
	if haveRep {
		for _, f := range rep.Failures {
			if strings.Contains(f.Change, " -r "+sr.Addr) || (strings.Contains(f.Change, row.KeyText) && !strings.Contains(f.Change, " -r ")) {
				kernelErr = f.Change + ": " + f.Err
				break
			}
		}
		if kernelErr == "" && rep.Err != "" {
			kernelErr = "the last reconcile failed: " + rep.Err
		}
	}
	switch {
	case !kb.Known:
		add(check{What: "In the kernel", Unknown: true, Detail: "unknown: no kernel data"})
	case !row.InKernel && row.Enabled:
		add(check{What: "In the kernel", Blocking: true, Detail: "the virtual service " + row.KeyText + " is not in the kernel" + withErr(kernelErr)})
	case !sr.InKernel && row.Enabled && rs.IsEnabled():
		add(check{What: "In the kernel", Blocking: true, Detail: "the kernel has no real server " + sr.Addr + " in " + row.KeyText + withErr(kernelErr)})
	case sr.InKernel && sr.KWeight == 0 && wt > 0:
		add(check{What: "In the kernel", Blocking: true, Detail: fmt.Sprintf("in the kernel with weight 0 (configured %d)%s", wt, withErr(kernelErr))})
	case sr.InKernel:
		add(check{What: "In the kernel", Detail: fmt.Sprintf("yes, weight %d", sr.KWeight)})
	default:
		add(check{What: "In the kernel", Detail: "no (as configured)"})
	}
	// The VIP: the diff of the stored state lists an "ip addr add" it would make.
	if svc.Interface != "" && svc.Address != "" {
		diff, err := p.core.Diff(ctx, nil)
		switch {
		case err != nil:
			add(check{What: "VIP on its interface", Unknown: true, Detail: "cannot tell: " + err.Error()})
		default:
			missing := ""
			for _, c := range diff.Changes {
				if strings.HasPrefix(c, "ip addr add ") && strings.Fields(c)[3] == svc.Address {
					missing = c
				}
			}
			if missing != "" {
				add(check{What: "VIP on its interface", Blocking: true, Detail: svc.Address + " is not on " + svc.Interface + ": the next reconcile would run “" + missing + "”"})
			} else {
				add(check{What: "VIP on its interface", Detail: svc.Address + " is on " + svc.Interface})
			}
		}
	} else {
		add(check{What: "VIP on its interface", Detail: "not managed by ipvsctl (the service names no interface)"})
	}
	// The last preparation of the real server (ARP hiding, tunnel, routes).
	prep := check{What: "Real-server preparation", Unknown: true, Detail: "never pushed or verified from this director (ipvsctl realserver verify)"}
	if results, err := p.core.RealServerResults(ctx); err == nil {
		for _, res := range results {
			if hostOf(res.Host) == rs.Address || res.Target == rs.Address || (rs.Name != "" && res.Target == rs.Name) {
				prep = check{What: "Real-server preparation", Blocking: !res.OK(), Detail: res.Action + " " + ago(res.At) + ": " + res.Summary()}
			}
		}
	}
	add(prep)
	switch h := sr.HealthOf; {
	case h == nil:
		add(check{What: "Health", Detail: "unchecked: no check, the server is always in (give it or its service a check to have it watched)"})
	case h.State == "down":
		detail := h.Phase
		if h.Since != nil {
			detail += " since " + ago(*h.Since)
		}
		if h.Reason != "" {
			detail += ": " + h.Reason
		}
		if h.Fault != "" {
			detail += " (checker fault: " + h.Fault + ")"
		}
		add(check{What: "Health", Blocking: true, Detail: detail})
	case h.State == "up":
		add(check{What: "Health", Detail: h.Phase + ", effective weight " + fmt.Sprint(h.EffectiveWeight) + " of " + fmt.Sprint(h.ConfiguredWeight)})
	default:
		add(check{What: "Health", Unknown: true, Detail: h.Phase + ": " + h.Reason})
	}
	switch {
	case sr.Upper > 0 && int(sr.Active) >= sr.Upper:
		add(check{What: "Connection limit", Blocking: true, Detail: fmt.Sprintf("reached: %d active ≥ upper threshold %d (the kernel sends it no new connection until it is below %d)", sr.Active, sr.Upper, max(sr.Lower, 0))})
	case sr.Upper > 0:
		add(check{What: "Connection limit", Detail: fmt.Sprintf("%d active of %d", sr.Active, sr.Upper)})
	default:
		add(check{What: "Connection limit", Detail: "none"})
	}
	if d.Blocked == 0 {
		d.Verdict = "Nothing found that stops traffic to this real server."
		if sr.Stats.CPS == 0 && sr.Active == 0 && kb.Known {
			d.Verdict += " It has no connection now: check the clients, the scheduler and persistence, and its health."
		}
	} else {
		d.Verdict = fmt.Sprintf("%d reason(s) found, in order below.", d.Blocked)
	}
	pg := p.newPage(ctx, r, u, "Why is "+sr.ID+" not getting traffic?", "live")
	pg.Data = d
	p.render(w, r, http.StatusOK, "why", pg)
}

func ifElse(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

func withErr(e string) string {
	if e == "" {
		return ""
	}
	return " — the kernel said at the last reconcile: " + e
}

func hostOf(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}
