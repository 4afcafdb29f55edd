package panel

import (
	"fmt"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// redundancyCard is the settings page's Redundancy card: the pair as the
// document sets it and what this director's VRRP is doing, read-only (the
// pair is set in the document and with ipvsctl node set).
type redundancyCard struct {
	Configured bool
	// Role is this director's VRRP state ("not running" without a runner),
	// RoleClass its colour.
	Role, RoleClass string
	Facts           []fact
	Transitions     []server.RedundancyTransition // the last few, newest first
}

const cardTransitions = 5

func redundancyCardOf(cfg *ipvsmgr.Redundancy, node *server.NodeView) *redundancyCard {
	c := &redundancyCard{}
	if cfg == nil {
		return c
	}
	c.Configured = true
	add := func(label, format string, a ...any) {
		c.Facts = append(c.Facts, fact{label, fmt.Sprintf(format, a...)})
	}
	var st *server.RedundancyStatus
	if node != nil {
		st = node.Redundancy
	}
	c.Role, c.RoleClass = "not running", "st-unknown"
	if st != nil {
		c.Role, c.RoleClass = st.Role, roleClass(st.Role)
		if st.Forced {
			c.Role += " (forced)"
		}
	}
	if node != nil {
		add("Priority", "%d, role %s (ipvsctl node set)", node.Priority, node.Role)
	}
	advert := cfg.AdvertInterval
	if advert == 0 {
		advert = ipvsmgr.DefaultAdvertInterval.Seconds()
	}
	preempt := "preempts a lower priority"
	if cfg.Preempt != nil && !*cfg.Preempt {
		preempt = "does not preempt"
	} else if cfg.PreemptDelay > 0 {
		preempt = fmt.Sprintf("preempts after %g s", cfg.PreemptDelay)
	}
	add("Virtual router", "VRID %d on %s, an advert every %g s; %s", cfg.VRID, cfg.Interface, advert, preempt)
	if len(cfg.UnicastPeers) > 0 {
		add("Unicast peers", "%s", strings.Join(cfg.UnicastPeers, ", "))
	} else {
		add("Adverts", "by multicast (no unicast peers)")
	}
	if st == nil {
		return c
	}
	if st.Fault != "" {
		add("Fault", "%s", st.Fault)
	}
	switch {
	case st.Master == "":
		add("Master", "none heard")
	case st.LastAdvertAge != nil:
		add("Master", "%s (priority %d), last advert %.1f s ago", st.Master, st.MasterPriority, *st.LastAdvertAge)
	default:
		add("Master", "%s (priority %d)", st.Master, st.MasterPriority)
	}
	add("VIPs carried by the pair", "%s", noneIfEmpty(strings.Join(st.VIPs, ", ")))
	if sd := st.SyncDaemon; sd.Enabled {
		v := "wants " + sd.Want + ", running " + noneIfEmpty(strings.Join(sd.Running, ", "))
		if sd.Error != "" {
			v += "; " + sd.Error
		}
		if sd.ActiveConnections != nil {
			v += fmt.Sprintf("; %d active connections in this director's table", *sd.ActiveConnections)
		}
		add("Connection sync", "%s", v)
	}
	for _, f := range st.Families {
		if f.PreemptWait != "" {
			add("Preemption waits", "%s (%s, at most %s)", f.PreemptWait, f.Family, cfg.SyncWait())
		}
	}
	if rp := st.Replication; rp != nil {
		add("Desired state", "%s", replicationFact(rp))
	}
	for i := len(st.Transitions) - 1; i >= 0 && len(c.Transitions) < cardTransitions; i-- {
		c.Transitions = append(c.Transitions, st.Transitions[i])
	}
	return c
}

func roleClass(role string) string {
	switch role {
	case "master":
		return "st-up"
	case "backup":
		return "st-enabled"
	case "fault":
		return "st-down"
	}
	return "st-unknown"
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// replicationFact is what replication from the peer (or source) does, on
// the Redundancy and Directors cards.
func replicationFact(rp *server.ReplicationStatus) string {
	v := "from " + rp.Peer + ": "
	switch {
	case !rp.Connected:
		v += "not connected"
	case rp.InSync:
		v += fmt.Sprintf("in sync at its revision %d", rp.PeerRevision)
	default:
		v += fmt.Sprintf("%.0f s behind its revision %d", rp.LagSeconds, rp.PeerRevision)
	}
	if rp.Error != "" {
		v += "; " + rp.Error
	}
	return v
}
