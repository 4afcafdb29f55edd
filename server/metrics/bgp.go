package metrics

import (
	"strconv"

	"github.com/ipvsctl/ipvsctl/server"
)

// bgpCollector reports the BGP sessions and the VIPs announced at each
// scrape, from the daemon's BGP status (nothing outside BGP mode).
type bgpCollector struct{ core *server.Core }

func (b *bgpCollector) write(e *expo) {
	s := b.core.BGPStatus()
	if s == nil {
		return
	}
	one := func(ok bool) float64 {
		if ok {
			return 1
		}
		return 0
	}
	gauge := func(name, help string, labels ...string) *family { return e.family(name, "gauge", help, labels...) }
	sessionUp := gauge("ipvsctl_bgp_session_up", "1 while the BGP session with the peer is Established.", "peer", "peer_asn")
	announced := gauge("ipvsctl_bgp_announced_prefixes", "VIP prefixes the director announces to the peer.", "peer")
	bfdUp := gauge("ipvsctl_bfd_session_up", "1 while the BFD session with the peer is up (only peers with bfd).", "peer")
	for _, p := range s.Peers {
		sessionUp.add(one(p.Up), p.Address, strconv.Itoa(p.ASN))
		announced.add(float64(p.Advertised), p.Address)
		if p.BFD != "" {
			bfdUp.add(one(p.BFD == "up"), p.Address)
		}
	}
	vip := gauge("ipvsctl_bgp_vip_announced", "1 while the director announces the VIP, 0 while it withdraws it (node show says why).", "prefix")
	for _, v := range s.VIPs {
		vip.add(one(v.Announce), v.Prefix.String())
	}
	per := map[string]int{}
	for _, m := range s.Mismatches {
		per[m.Director]++
	}
	mismatches := gauge("ipvsctl_bgp_maglev_mismatches",
		"Services whose Maglev inputs (scheduler, flags, real servers in the kernel's order with weights) differ between this director and the other one, per other director of the group it knows.", "director")
	compared := gauge("ipvsctl_bgp_maglev_compared",
		"1 while the other director's Maglev fingerprints are compared with this one's; 0 while they are stale (not heard for 15 s) or it could not be asked.", "director")
	for _, d := range s.Directors {
		mismatches.add(float64(per[d.Director]), d.Director)
		compared.add(one(d.Error == "" && !d.Stale), d.Director)
	}
	if s.Drain != nil {
		gauge("ipvsctl_bgp_drain", "1 for the phase of node drain in progress (draining, drained, timed_out); absent when not drained.", "phase").add(1, s.Drain.Phase)
	}
}
