package metrics

import (
	"maps"
	"slices"

	"github.com/ipvsctl/ipvsctl/server"
)

// redundancy reports the director's VRRP role and replication at each
// scrape, from the daemon's status (nothing without settings.redundancy or
// a peer).
type redundancy struct{ side *server.DaemonSide }

var vrrpStates = []string{"initialize", "backup", "master", "fault"}

func (r *redundancy) write(e *expo) {
	s := r.side.RedundancyStatus()
	if s == nil {
		return
	}
	if s.Replication != nil {
		e.family("ipvsctl_replication_lag_seconds", "gauge",
			"0 while the desired state is in sync with the peer's, else how long since it last was.").add(s.Replication.LagSeconds)
		connected := 0.0
		if s.Replication.Connected {
			connected = 1
		}
		e.family("ipvsctl_replication_connected", "gauge",
			"1 while the last poll of the replication peer was answered with a director's state, else 0.").add(connected)
		e.family("ipvsctl_replication_failures_total", "counter",
			"Replication polls that failed (peer unreachable, an answer that is not a director's state, too large, damaged) and peer revisions refused, since replication started; node show says why the last one was.").
			add(float64(s.Replication.Failures))
	}
	if s.Role == "standalone" {
		return
	}
	state := e.family("ipvsctl_vrrp_state", "gauge",
		"1 for the VRRP state each family's instance is in (initialize, backup, master, fault).", "family", "state")
	dropped := e.family("ipvsctl_vrrp_adverts_dropped_total", "counter",
		"VRRP packets refused since the instance started, by reason (bad_ttl, not_peer, other_vrid, malformed, auth_missing, auth_bad_hmac, auth_unknown_key, auth_malformed, auth_stale, auth_replay).",
		"family", "reason")
	auth := e.family("ipvsctl_vrrp_authenticated", "gauge",
		"1 when the family's VRRP adverts are authenticated (settings.redundancy.auth), 0 when any host on the link can forge them.", "family")
	for _, f := range s.Families {
		for _, st := range vrrpStates {
			v := 0.0
			if f.State == st {
				v = 1
			}
			state.add(v, f.Family, st)
		}
		for _, reason := range slices.Sorted(maps.Keys(f.Dropped)) {
			dropped.add(float64(f.Dropped[reason]), f.Family, reason)
		}
		if f.Auth != "" {
			v := 1.0
			if f.Auth == "none" {
				v = 0
			}
			auth.add(v, f.Family)
		}
	}
	transitions := e.family("ipvsctl_vrrp_transitions_total", "counter",
		"VRRP state changes since the daemon started, by the state entered.", "state")
	for _, st := range vrrpStates {
		transitions.add(float64(s.TransitionCounts[st]), st)
	}
}
