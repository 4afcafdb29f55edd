// Package bgp decides which VIPs a director of a BGP group announces, and
// speaks BGP (GoBGP as a library) to the upstream routers.
package bgp

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Director is what a director knows of itself when it decides.
type Director struct {
	// IPVS: the kernel has IPVS and the daemon has it open.
	IPVS bool
	// ReconcileErr is why the last reconcile failed ("" when it did not);
	// Failures counts the changes it could not make.
	ReconcileErr string
	Failures     int
	// Drained: the operator took the director out (node drain).
	Drained bool
}

// Service is one virtual service on a VIP, as the health checks leave it.
type Service struct {
	Name   string
	VIP    netip.Addr
	Quorum int // real servers up that it needs (at least 1)
	Up     int // real servers in with a weight above 0
}

// Decision is whether one VIP is announced, and why not.
type Decision struct {
	Prefix   netip.Prefix `json:"prefix"`
	Announce bool         `json:"announce"`
	Reason   string       `json:"reason,omitempty"`
	// Prepend is how many more times the director's AS is in the route's
	// path (node drain's de-preference); 0 for the plain path.
	Prepend int `json:"prepend,omitempty"`
}

// Decide says for each VIP whether to announce it: while the director can
// serve it (IPVS present, the reconcile healthy, not drained) and every
// service on it has its quorum of real servers up. A VIP of which one
// service cannot be served is withdrawn, so that ECMP sends its flows to the
// directors that can. Sorted by prefix.
func Decide(dir Director, services []Service) []Decision {
	byVIP := map[netip.Addr][]Service{}
	for _, s := range services {
		if s.VIP.IsValid() {
			byVIP[s.VIP] = append(byVIP[s.VIP], s)
		}
	}
	out := make([]Decision, 0, len(byVIP))
	for vip, svcs := range byVIP {
		d := Decision{Prefix: netip.PrefixFrom(vip, vip.BitLen()), Announce: true}
		switch {
		case !dir.IPVS:
			d.Announce, d.Reason = false, "kernel IPVS is not available"
		case dir.Drained:
			d.Announce, d.Reason = false, "the director is drained"
		case dir.ReconcileErr != "":
			d.Announce, d.Reason = false, "the last reconcile failed: "+dir.ReconcileErr
		case dir.Failures > 0:
			d.Announce, d.Reason = false, fmt.Sprintf("the last reconcile could not make %d changes", dir.Failures)
		default:
			var short []string
			for _, s := range svcs {
				if q := max(s.Quorum, 1); s.Up < q {
					short = append(short, fmt.Sprintf("%s has %d of %d real servers up", s.Name, s.Up, q))
				}
			}
			if len(short) > 0 {
				slices.Sort(short)
				d.Announce, d.Reason = false, "below quorum: "+strings.Join(short, "; ")
			}
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Decision) int { return a.Prefix.Addr().Compare(b.Prefix.Addr()) })
	return out
}

// Services reads the services with a VIP out of a desired state and the
// table the kernel should have with the checks' view laid over it
// (ipvsmgr.ApplyHealth): a real server counts as up while it is in with a
// weight above 0, a sorry server never does.
func Services(d *ipvsmgr.Desired, effective *ipvsmgr.Table) []Service {
	if d == nil || effective == nil {
		return nil
	}
	quorum := map[ipvsmgr.ServiceKey]int{}
	sorry := map[ipvsmgr.ServiceKey]ipvsmgr.DestKey{}
	for _, p := range d.Sorry {
		quorum[p.Service] = p.Quorum
		if p.Dest != nil {
			sorry[p.Service] = p.Dest.Key
		}
	}
	vips := vipsOf(d)
	var out []Service
	for _, s := range effective.Services {
		if vip, ok := vipOf(d, s.Key, vips); ok {
			out = append(out, service(d, s, vip, quorum, sorry))
		}
	}
	return out
}

func vipsOf(d *ipvsmgr.Desired) map[netip.Addr]bool {
	vips := map[netip.Addr]bool{}
	for _, v := range d.VIPs {
		vips[v.Addr] = true
	}
	return vips
}

// vipOf is the VIP a service is announced by: its address, or for a fwmark
// service the address its mark rules match.
func vipOf(d *ipvsmgr.Desired, k ipvsmgr.ServiceKey, vips map[netip.Addr]bool) (netip.Addr, bool) {
	if k.FWMark == 0 {
		return k.Addr, k.Addr.IsValid() && vips[k.Addr]
	}
	for _, m := range d.Marks {
		if m.Mark == k.FWMark && vips[m.Addr] {
			return m.Addr, true
		}
	}
	return netip.Addr{}, false
}

func service(d *ipvsmgr.Desired, s *ipvsmgr.VirtualService, vip netip.Addr, quorum map[ipvsmgr.ServiceKey]int, sorry map[ipvsmgr.ServiceKey]ipvsmgr.DestKey) Service {
	up := 0
	sk, hasSorry := sorry[s.Key]
	for _, dst := range s.Dests {
		if dst.Weight > 0 && (!hasSorry || dst.Key != sk) {
			up++
		}
	}
	name := d.Names[s.Key]
	if name == "" {
		name = s.Key.String()
	}
	return Service{Name: name, VIP: vip, Quorum: max(quorum[s.Key], 1), Up: up}
}
