package daemon

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
	"github.com/ipvsctl/ipvsctl/server/events"
)

// healthEvent is what a check's change of a server's state tells of; ok is
// false for a change of weight or fault only, and for a server back to
// unknown (its check removed).
func healthEvent(e health.Event) (ev events.Event, ok bool) {
	var typ, what string
	switch {
	case e.From == e.To:
		return ev, false
	case e.To == ipvsmgr.HealthDown && e.Quiesce:
		typ, what = events.ServerQuiesced, "down, quiesced (weight 0)"
	case e.To == ipvsmgr.HealthDown:
		typ, what = events.ServerDown, "down, out of the service"
	case e.To == ipvsmgr.HealthUp && e.From == ipvsmgr.HealthDown:
		typ, what = events.ServerBack, "back up"
	case e.To == ipvsmgr.HealthUp:
		typ, what = events.ServerUp, "up"
	default:
		return ev, false
	}
	name := e.Ref.Server.String()
	if e.ServerName != "" {
		name = e.ServerName + " (" + name + ")"
	}
	svc := e.Ref.Service.String()
	if e.ServiceName != "" {
		svc = e.ServiceName + " (" + svc + ")"
	}
	msg := "real server " + name + " of " + svc + " " + what
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	f := map[string]string{"service": e.Ref.Service.String(), "server": e.Ref.Server.String(),
		"from": e.From.String(), "to": e.To.String(), "reason": e.Reason}
	if e.ServiceName != "" {
		f["service_name"] = e.ServiceName
	}
	if e.ServerName != "" {
		f["server_name"] = e.ServerName
	}
	if e.Flapping {
		f["flapping"] = "true"
	}
	return events.Event{Time: e.At, Type: typ, Subject: e.Ref.String(), Message: msg, Fields: f}, true
}

// quorumEvents tells of a service's change of quorum, and of its sorry
// server taking the traffic or giving it back.
func (d *Daemon) quorumEvents(pol *ipvsmgr.SorryPolicy, up, atStart bool, healthy int, what string) {
	svc := pol.Service.String()
	f := map[string]string{"service": svc, "healthy": strconv.Itoa(healthy), "quorum": strconv.Itoa(pol.Quorum),
		"hysteresis": strconv.Itoa(pol.Hysteresis)}
	if atStart {
		f["at_start"] = "true"
	}
	typ := events.QuorumLost
	if up {
		typ = events.QuorumRegained
	}
	log := d.Core.Events()
	log.Publish(events.Event{Type: typ, Subject: svc, Fields: f,
		Message: fmt.Sprintf("service %s %s: %d healthy, quorum %d", svc, what, healthy, pol.Quorum)})
	if pol.Dest == nil {
		return
	}
	sorry := pol.Dest.Key.String()
	if up {
		log.Publish(events.Event{Type: events.SorryOut, Subject: svc, Fields: map[string]string{"service": svc, "sorry": sorry},
			Message: "service " + svc + ": the real servers have the traffic again; sorry server " + sorry + " out"})
	} else {
		log.Publish(events.Event{Type: events.SorryIn, Subject: svc, Fields: map[string]string{"service": svc, "sorry": sorry},
			Message: "service " + svc + ": sorry server " + sorry + " takes the traffic"})
	}
}

// reconcileFailed tells of a reconcile that failed (rev 0: after a health change).
func (d *Daemon) reconcileFailed(rev int64, err error) {
	f := map[string]string{"error": err.Error()}
	if rev > 0 {
		f["revision"] = strconv.FormatInt(rev, 10)
	}
	d.Core.Events().Publish(events.Event{Type: events.ReconcileFail, Subject: "kernel", Fields: f,
		Message: "the kernel could not be made to match the desired state: " + err.Error()})
}

// routeEvents tells of the routes an Announce added and withdrew, with
// why a withdrawn one is no longer announced.
func (r *bgpRunner) routeEvents(before, after []netip.Prefix, decided []bgp.Decision) {
	log := r.d.Core.Events()
	why := map[netip.Prefix]string{}
	for _, v := range decided {
		why[v.Prefix] = v.Reason
	}
	for _, p := range after {
		if !slices.Contains(before, p) {
			log.Publish(events.Event{Type: events.BGPAnnounced, Subject: p.String(), Fields: map[string]string{"prefix": p.String()},
				Message: "route " + p.String() + " announced"})
		}
	}
	for _, p := range before {
		if slices.Contains(after, p) {
			continue
		}
		reason := cmp.Or(why[p], "no longer in the desired state")
		log.Publish(events.Event{Type: events.BGPWithdrawn, Subject: p.String(), Fields: map[string]string{"prefix": p.String(), "reason": reason},
			Message: "route " + p.String() + " withdrawn: " + reason})
	}
}

// sessionEvents tells of each router session that went up or down since
// the last tend.
func (r *bgpRunner) sessionEvents(peers []bgp.PeerStatus) {
	if r.sessions == nil {
		r.sessions = map[string]bool{}
	}
	for _, p := range peers {
		was, seen := r.sessions[p.Address]
		r.sessions[p.Address] = p.Up
		if was == p.Up && seen || !seen && !p.Up {
			continue
		}
		state, msg := "down", "BGP session with "+p.Address+" down"
		if p.Up {
			state, msg = "up", "BGP session with "+p.Address+" established"
		} else if p.LastError != "" {
			msg += ": " + p.LastError
		}
		r.d.Core.Events().Publish(events.Event{Type: events.BGPSession, Subject: p.Address, Message: msg,
			Fields: map[string]string{"router": p.Address, "asn": strconv.Itoa(p.ASN), "state": state, "bgp_state": p.State,
				"last_error": p.LastError}})
	}
}
