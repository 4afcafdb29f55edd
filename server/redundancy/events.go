package redundancy

import (
	"strconv"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/vrrp"
	"github.com/ipvsctl/ipvsctl/server/events"
)

// vrrpEvent tells of a change of VRRP role in keepalived's words: master,
// backup, fault, and stop for the shutdown's return to initialize (from
// initialize is a start).
func vrrpEvent(t vrrp.Transition, family string) events.Event {
	state, from := keepalivedState(t.To), t.From.String()
	return events.Event{Time: t.At, Type: events.VRRPState, Subject: "vrrp/" + family,
		Message: "VRRP " + family + ": " + from + " -> " + state + " (" + t.Reason + ")",
		Fields: map[string]string{"family": family, "state": state, "from": from, "reason": t.Reason,
			"priority": strconv.Itoa(int(t.Priority))}}
}

func keepalivedState(s vrrp.State) string {
	if s == vrrp.Initialize {
		return "stop"
	}
	return s.String()
}
