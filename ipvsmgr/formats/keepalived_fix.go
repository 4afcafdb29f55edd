package formats

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// What keepalived's validate_check_config (check_data.c) fixes with a
// warning, ipvsctl fixes with the same warning: the defaults a
// virtual_server did not set, a DR/TUN port that differs from the
// service's, a duplicate real server, a quorum above the weights, a
// virtual server left with no real servers.

// vsDefaults settles, once per virtual_server block, what keepalived
// defaults with a warning: the protocol, the forwarding method, the
// persistence of a port-0 service; and drops duplicate real servers.
func (k *kaImporter) vsDefaults(v *kaVS, targets []kaTarget) {
	label := "virtual server " + v.label(targets)
	hasAddr := slices.ContainsFunc(targets, func(t kaTarget) bool { return t.fwmark == 0 })
	switch {
	case v.proto != nil && !hasAddr:
		k.warnf(v.proto.line, "%s: protocol specified for fwmark - protocol will be ignored", label)
	case v.proto != nil:
		p := strings.ToLower(v.proto.word(1))
		if len(v.proto.words) == 2 && (p == "tcp" || p == "udp" || p == "sctp") {
			v.svc.Protocol = p
			v.fields["protocol"] = v.proto.line
			break
		}
		k.warnf(v.proto.line, "unknown protocol %s - ignoring", v.proto.rest())
		fallthrough
	case hasAddr:
		// keepalived: the kernel would take protocol 0 as UDP.
		k.warnf(v.n.line, "%s: no protocol set - defaulting to UDP", label)
		v.svc.Protocol = "udp"
		v.fields["protocol"] = v.n.line
	}
	if v.svc.OnePacket && hasAddr && v.svc.Protocol != "udp" {
		k.warnf(v.fields["one_packet"], "%s: one packet scheduling requires UDP - resetting", label)
		v.svc.OnePacket = false
	}
	if v.svc.Persistence == 0 && slices.ContainsFunc(targets, func(t kaTarget) bool { return t.fwmark == 0 && t.port == 0 }) {
		k.warnf(v.n.line, "%s: zero port only valid for persistent services - setting", label)
		v.svc.Persistence = defaultPersistence
		v.fields["persistence"] = v.n.line
	}
	if v.svc.Scheduler == "" && len(v.servers) > 0 {
		k.warnf(v.n.line, "%s: no scheduler set, setting default 'wlc'", label)
	}
	if v.svc.Forwarding == "" {
		needed := v.sorry != nil
		for _, r := range v.servers {
			needed = needed || r.rs.Forwarding == ""
		}
		if needed {
			k.warnf(v.n.line, "%s: no forwarding method set, setting default NAT", label)
		}
		v.svc.Forwarding = "nat"
	}
	var kept []*kaRS
	var dropped [][2]int
	for _, r := range v.servers {
		if slices.ContainsFunc(kept, func(o *kaRS) bool { return o.rs.Address == r.rs.Address && o.rs.Port == r.rs.Port }) {
			k.warnf(r.n.line, "VS %s: real server %s is duplicated - removing second rs", v.label(targets), r.label())
			dropped = append(dropped, r.kept)
			continue
		}
		kept = append(kept, r)
	}
	v.servers = kept
	// keepalived frees the second rs whole: its kept keys go with it.
	for i := len(dropped) - 1; i >= 0; i-- {
		k.st.Imported = slices.Delete(k.st.Imported, dropped[i][0], dropped[i][1])
	}
}

// label names the virtual server as keepalived's FMT_VS does.
func (v *kaVS) label(targets []kaTarget) string {
	if v.group != nil {
		return "[" + v.group.name + "]"
	}
	if len(targets) == 1 {
		return targets[0].String()
	}
	return v.n.rest()
}

func (r *kaRS) label() string {
	a := netip.MustParseAddr(r.rs.Address)
	return netip.AddrPortFrom(a, uint16(r.rs.Port)).String()
}

// service makes v into the service of target t and adds it, unless it has
// no real servers (keepalived ignores it then, with a warning).
func (k *kaImporter) service(v *kaVS, t kaTarget) error {
	if len(k.st.Services) >= maxGroupMembers {
		return k.errf(t.line, "more than %d virtual services (groups expanded)", maxGroupMembers)
	}
	k.declare(1, len(v.servers))
	idx := len(k.st.Services)
	field := fmt.Sprintf("services[%d]", idx)
	lines := lineIndex{field: t.line}
	for f, l := range v.fields {
		lines[field+"."+f] = l
	}
	svc := v.svc
	svc.SchedulerFlags = slices.Clone(v.svc.SchedulerFlags)
	svc.Address, svc.Port, svc.FWMark = t.addr, t.port, t.fwmark
	if v.group != nil {
		svc.Group = v.group.name
		lines[field+".group"] = v.n.line
	}
	if t.fwmark > 0 {
		svc.Protocol = ""
		delete(lines, field+".protocol")
	}
	label := "virtual server " + t.String()
	var checks []*kaCheck
	weights := 0
	for j, r := range v.servers {
		rs, ch := k.server(&svc, v, r, label, lines, fmt.Sprintf("%s.servers[%d]", field, j))
		svc.Servers = append(svc.Servers, rs)
		checks = append(checks, ch)
		weights += rs.EffectiveWeight()
	}
	if len(svc.Servers) == 0 {
		k.warnf(t.line, "%s has no real servers - ignoring", label)
		k.declare(-1, 0)
		return nil
	}
	k.placeChecks(&svc, field, checks, lines)
	if v.sorry != nil {
		if err := k.sorryServer(&svc, field, label, v.sorry, lines); err != nil {
			return err
		}
	}
	if v.quorum != nil {
		if err := k.quorum(&svc, v, field, label, weights, lines); err != nil {
			return err
		}
	} else {
		k.keepHysteresis(v)
	}
	for f, l := range lines {
		k.lines[f] = l
	}
	k.st.Services = append(k.st.Services, svc)
	return nil
}

// server is r as a server of svc: its weight defaulted, its port reset as
// keepalived resets it, its check (a copy) connecting where keepalived's
// checker would (the port as written).
func (k *kaImporter) server(svc *ipvsmgr.Service, v *kaVS, r *kaRS, label string, lines lineIndex, field string) (ipvsmgr.Server, *kaCheck) {
	rs := r.rs
	if !r.weight {
		rs.Weight = intPtr(v.weight)
	}
	if rs.Forwarding == "" && svc.Forwarding == "tun" {
		rs.Tunnel, rs.TunnelPort, rs.TunnelChecksum = v.tunnel.typ, v.tunnel.port, v.tunnel.checksum
		if v.tunnel != (kaTunnel{}) {
			lines[field+".tunnel"] = v.fields["forwarding"]
		}
	}
	lines[field] = r.n.line
	for f, l := range r.fields {
		lines[field+"."+f] = l
	}
	ch := r.check.clone()
	written := rs.Port
	fwd := cmp.Or(rs.Forwarding, svc.Forwarding)
	switch {
	case fwd == "nat" || written == 0:
	case svc.FWMark > 0:
		k.warnf(r.n.line, "WARNING - fwmark %s, real server %s has port specified - clearing", label, r.label())
		rs.Port = 0
	case written != svc.Port:
		k.warnf(r.n.line, "WARNING - %s and real server %s ports don't match - resetting", label, r.label())
		rs.Port = 0
	}
	if ch != nil && rs.Port != written && ch.check.Port == 0 {
		ch.check.Port = written
		ch.lines["port"] = r.n.line
	}
	if ch != nil && ch.check.Port != 0 && ch.check.Port == cmp.Or(rs.Port, svc.Port) {
		ch.check.Port = 0 // the server's own port
		delete(ch.lines, "port")
	}
	return rs, ch
}

func (c *kaCheck) clone() *kaCheck {
	if c == nil {
		return nil
	}
	var ch ipvsmgr.Check
	b, _ := json.Marshal(c.check)
	_ = json.Unmarshal(b, &ch)
	lines := make(map[string]int, len(c.lines))
	for f, l := range c.lines {
		lines[f] = l
	}
	return &kaCheck{check: &ch, lines: lines}
}

// placeChecks puts the real servers' checks on the service when they are
// all the same, and leaves each on its server otherwise.
func (k *kaImporter) placeChecks(svc *ipvsmgr.Service, field string, checks []*kaCheck, lines lineIndex) {
	shared := len(checks) > 0
	for _, c := range checks {
		if c == nil || !reflect.DeepEqual(c.check, checks[0].check) {
			shared = false
			break
		}
	}
	setLines := func(prefix string, from map[string]int) {
		for leaf, line := range from {
			f := prefix
			if leaf != "" {
				f += "." + leaf
			}
			lines[f] = line
		}
	}
	if shared {
		svc.Check = checks[0].check
		setLines(field+".check", checks[0].lines)
		return
	}
	for j, c := range checks {
		if c != nil {
			svc.Servers[j].Check = c.check
			setLines(fmt.Sprintf("%s.servers[%d].check", field, j), c.lines)
		}
	}
}

// sorryServer maps `sorry_server ADDRESS [PORT]`; a DR or TUN sorry server
// takes the service's port, reset with keepalived's warning.
func (k *kaImporter) sorryServer(svc *ipvsmgr.Service, field, label string, n *kaNode, lines lineIndex) error {
	if len(n.words) < 2 || len(n.words) > 3 {
		return k.errf(n.line, "want `sorry_server ADDRESS [PORT]`")
	}
	a, err := netip.ParseAddr(n.word(1))
	if err != nil {
		return k.errf(n.line, "sorry server %q is not an IP address", n.word(1))
	}
	port := 0
	if len(n.words) == 3 {
		if port, err = kaPort(n.word(2)); err != nil {
			return k.errf(n.line, "sorry server port %q: %v", n.word(2), err)
		}
	}
	svc.SorryServer = &ipvsmgr.SorryServer{Address: a.Unmap().String(), Port: port}
	lines[field+".sorry_server"] = n.line
	lines[field+".sorry_server.address"] = n.line
	lines[field+".sorry_server.port"] = n.line
	if svc.Forwarding == "nat" || port == 0 || port == svc.Port {
		return nil
	}
	if svc.FWMark > 0 {
		k.warnf(n.line, "WARNING - %s, sorry server has port specified - clearing", label)
	} else {
		k.warnf(n.line, "WARNING - %s and sorry server ports don't match - resetting", label)
	}
	svc.SorryServer.Port = 0
	return nil
}

// quorum maps keepalived's quorum, a sum of the live servers' weights
// (lowered to their total, with keepalived's warning, when it is above),
// onto a number of servers when every server has the same weight;
// otherwise it is kept.
func (k *kaImporter) quorum(svc *ipvsmgr.Service, v *kaVS, field, label string, total int, lines lineIndex) error {
	n := v.quorum
	val, err := k.arg(n)
	if err != nil {
		return err
	}
	q, err := strconv.Atoi(val)
	if err != nil || q < 0 {
		return k.errf(n.line, "quorum %q: want a number", val)
	}
	if q > total {
		k.warnf(n.line, "Warning - quorum %d for %s exceeds total weight of real servers %d, reducing quorum to %d", q, label, total, total)
		q = total
	}
	h := -1
	if v.hyst != nil {
		if hv, err := strconv.Atoi(v.hyst.word(1)); err == nil && hv >= 0 {
			h = hv
			if h >= q && q > 0 {
				k.warnf(v.hyst.line, "%s: hysteresis %d >= quorum %d; setting hysteresis to %d", label, h, q, q-1)
				h = q - 1
			}
		}
	}
	w := 0
	for i := range svc.Servers {
		sw := svc.Servers[i].EffectiveWeight()
		if i > 0 && sw != w || sw <= 0 {
			k.keep(v.scope, n)
			k.keepHysteresis(v)
			return nil
		}
		w = sw
	}
	if w == 0 {
		k.keep(v.scope, n)
		k.keepHysteresis(v)
		return nil
	}
	count := (q + w - 1) / w
	if count > 1 {
		svc.Quorum = count
		lines[field+".quorum"] = n.line
	}
	// keepalived's hysteresis is in weights: in servers when the quorum
	// and it are whole numbers of the servers' one weight.
	switch {
	case h < 0:
		k.keepHysteresis(v)
	case h > 0 && (q%w != 0 || h%w != 0):
		k.keepHysteresis(v)
	case h > 0:
		svc.Hysteresis = h / w
		lines[field+".hysteresis"] = v.hyst.line
	}
	return nil
}

// keepHysteresis keeps a hysteresis that is not mapped, once per block.
func (k *kaImporter) keepHysteresis(v *kaVS) {
	if v.hyst != nil && !v.hystKept {
		v.hystKept = true
		k.keep(v.scope, v.hyst)
	}
}
