package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ipvsctl/ipvsctl/server"
)

// bgpCollector reports the BGP sessions and the VIPs announced at each
// scrape, from the daemon's BGP status (nothing outside BGP mode).
type bgpCollector struct{ core *server.Core }

var (
	descBGPSessionUp = prometheus.NewDesc("ipvsctl_bgp_session_up",
		"1 while the BGP session with the peer is Established.", []string{"peer", "peer_asn"}, nil)
	descBGPAnnounced = prometheus.NewDesc("ipvsctl_bgp_announced_prefixes",
		"VIP prefixes the director announces to the peer.", []string{"peer"}, nil)
	descBFDUp = prometheus.NewDesc("ipvsctl_bfd_session_up",
		"1 while the BFD session with the peer is up (only peers with bfd).", []string{"peer"}, nil)
	descVIPAnnounced = prometheus.NewDesc("ipvsctl_bgp_vip_announced",
		"1 while the director announces the VIP, 0 while it withdraws it (node show says why).", []string{"prefix"}, nil)
	descMaglevMismatches = prometheus.NewDesc("ipvsctl_bgp_maglev_mismatches",
		"Services whose Maglev inputs (scheduler, flags, real servers in the kernel's order with weights) differ between this director and the other one, per other director of the group it knows.", []string{"director"}, nil)
	descMaglevCompared = prometheus.NewDesc("ipvsctl_bgp_maglev_compared",
		"1 while the other director's Maglev fingerprints are compared with this one's; 0 while they are stale (not heard for 15 s) or it could not be asked.", []string{"director"}, nil)
	descDrain = prometheus.NewDesc("ipvsctl_bgp_drain",
		"1 for the phase of node drain in progress (draining, drained, timed_out); absent when not drained.", []string{"phase"}, nil)
)

func (b *bgpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBGPSessionUp
	ch <- descBGPAnnounced
	ch <- descBFDUp
	ch <- descVIPAnnounced
	ch <- descMaglevMismatches
	ch <- descMaglevCompared
	ch <- descDrain
}

func (b *bgpCollector) Collect(ch chan<- prometheus.Metric) {
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
	for _, p := range s.Peers {
		ch <- prometheus.MustNewConstMetric(descBGPSessionUp, prometheus.GaugeValue, one(p.Up), p.Address, strconv.Itoa(p.ASN))
		ch <- prometheus.MustNewConstMetric(descBGPAnnounced, prometheus.GaugeValue, float64(p.Advertised), p.Address)
		if p.BFD != "" {
			ch <- prometheus.MustNewConstMetric(descBFDUp, prometheus.GaugeValue, one(p.BFD == "up"), p.Address)
		}
	}
	for _, v := range s.VIPs {
		ch <- prometheus.MustNewConstMetric(descVIPAnnounced, prometheus.GaugeValue, one(v.Announce), v.Prefix.String())
	}
	per := map[string]int{}
	for _, m := range s.Mismatches {
		per[m.Director]++
	}
	for _, d := range s.Directors {
		ch <- prometheus.MustNewConstMetric(descMaglevMismatches, prometheus.GaugeValue, float64(per[d.Director]), d.Director)
		ch <- prometheus.MustNewConstMetric(descMaglevCompared, prometheus.GaugeValue, one(d.Error == "" && !d.Stale), d.Director)
	}
	if s.Drain != nil {
		ch <- prometheus.MustNewConstMetric(descDrain, prometheus.GaugeValue, 1, s.Drain.Phase)
	}
}
