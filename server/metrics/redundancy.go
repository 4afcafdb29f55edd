package metrics

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ipvsctl/ipvsctl/server"
)

// redundancy reports the director's VRRP role and replication at each
// scrape, from the daemon's status (nothing without settings.redundancy or
// a peer).
type redundancy struct{ side *server.DaemonSide }

var (
	descVRRPState = prometheus.NewDesc("ipvsctl_vrrp_state",
		"1 for the VRRP state each family's instance is in (initialize, backup, master, fault).", []string{"family", "state"}, nil)
	descVRRPTransitions = prometheus.NewDesc("ipvsctl_vrrp_transitions_total",
		"VRRP state changes since the daemon started, by the state entered.", []string{"state"}, nil)
	descVRRPDropped = prometheus.NewDesc("ipvsctl_vrrp_adverts_dropped_total",
		"VRRP packets refused since the instance started, by reason (bad_ttl, not_peer, other_vrid, malformed, auth_missing, auth_bad_hmac, auth_unknown_key, auth_malformed, auth_stale, auth_replay).",
		[]string{"family", "reason"}, nil)
	descVRRPAuth = prometheus.NewDesc("ipvsctl_vrrp_authenticated",
		"1 when the family's VRRP adverts are authenticated (settings.redundancy.auth), 0 when any host on the link can forge them.", []string{"family"}, nil)
	descReplLag = prometheus.NewDesc("ipvsctl_replication_lag_seconds",
		"0 while the desired state is in sync with the peer's, else how long since it last was.", nil, nil)
	descReplConnected = prometheus.NewDesc("ipvsctl_replication_connected",
		"1 while the last poll of the replication peer was answered with a director's state, else 0.", nil, nil)
	descReplFailures = prometheus.NewDesc("ipvsctl_replication_failures_total",
		"Replication polls that failed (peer unreachable, an answer that is not a director's state, too large, damaged) and peer revisions refused, since replication started; node show says why the last one was.", nil, nil)
)

var vrrpStates = []string{"initialize", "backup", "master", "fault"}

func (r *redundancy) Describe(ch chan<- *prometheus.Desc) {
	ch <- descVRRPState
	ch <- descVRRPTransitions
	ch <- descVRRPDropped
	ch <- descVRRPAuth
	ch <- descReplLag
	ch <- descReplConnected
	ch <- descReplFailures
}

func (r *redundancy) Collect(ch chan<- prometheus.Metric) {
	s := r.side.RedundancyStatus()
	if s == nil {
		return
	}
	if s.Replication != nil {
		ch <- prometheus.MustNewConstMetric(descReplLag, prometheus.GaugeValue, s.Replication.LagSeconds)
		connected := 0.0
		if s.Replication.Connected {
			connected = 1
		}
		ch <- prometheus.MustNewConstMetric(descReplConnected, prometheus.GaugeValue, connected)
		ch <- prometheus.MustNewConstMetric(descReplFailures, prometheus.CounterValue, float64(s.Replication.Failures))
	}
	if s.Role == "standalone" {
		return
	}
	for _, f := range s.Families {
		for _, st := range vrrpStates {
			v := 0.0
			if f.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descVRRPState, prometheus.GaugeValue, v, f.Family, st)
		}
		for _, reason := range slices.Sorted(maps.Keys(f.Dropped)) {
			ch <- prometheus.MustNewConstMetric(descVRRPDropped, prometheus.CounterValue, float64(f.Dropped[reason]), f.Family, reason)
		}
		if f.Auth != "" {
			v := 1.0
			if f.Auth == "none" {
				v = 0
			}
			ch <- prometheus.MustNewConstMetric(descVRRPAuth, prometheus.GaugeValue, v, f.Family)
		}
	}
	for _, st := range vrrpStates {
		ch <- prometheus.MustNewConstMetric(descVRRPTransitions, prometheus.CounterValue, float64(s.TransitionCounts[st]), st)
	}
}
