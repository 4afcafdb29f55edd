package ipvsmgr

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// VIP is an address ipvsctl brings up on a director interface.
type VIP struct {
	Interface string     `json:"interface"`
	Addr      netip.Addr `json:"address"`
}

func (v VIP) String() string { return v.Addr.String() + " on " + v.Interface }

// MarkRule marks packets to a fwmark service's VIP (a mangle rule ipvsctl owns).
type MarkRule struct {
	Mark     uint32
	Addr     netip.Addr
	Protocol string
	Ports    []int
}

// Desired is a validated state in the kernel's terms.
type Desired struct {
	Table *Table // enabled services with their enabled servers
	VIPs  []VIP
	// Standby are VIPs this director carries only as VRRP master, withheld
	// now by its role (the daemon's overlay leaves them out of VIPs): the
	// reconcile keeps them in the ledger's intent, so that a takeover adds
	// them before it writes anything.
	Standby  []VIP
	Marks    []MarkRule
	Names    map[ServiceKey]string
	Settings Settings
	// Checks lists every enabled real server that has a check or a forced
	// health, with its effective check; Sorry each checked service's sorry
	// server and quorum. The health runner takes these.
	Checks []ServerCheck
	Sorry  []SorryPolicy
	// Health is what the checks observed, set by the caller before a
	// reconcile: the plan lays it over Table (ApplyHealth). Nil leaves the
	// table as it is.
	Health *HealthView
}

// Compile validates st and translates it into kernel terms. The error is a
// *ValidationError listing every invalid value.
func Compile(st *State) (*Desired, error) { return CompileWith(st, nil, nil) }

// CompileCache keeps what Compile made of each service, by the service's
// encoding: compiling a state of 1,000 services of which one changed then
// validates and translates that one only. The daemon keeps one.
type CompileCache struct {
	network string
	bgp     bool
	pieces  map[string]*compiled
	// last are the encodings and pieces of the last state compiled, by
	// index: a service whose encoding is the very same bytes is found
	// without hashing them.
	lastEnc    [][]byte
	lastPieces []*compiled
}

// compiled is one valid service in kernel terms.
type compiled struct {
	vs      *VirtualService
	vip     netip.Addr
	enabled bool
	name    string
	checks  []ServerCheck
	sorry   []SorryPolicy
	marks   []MarkRule
}

// CompileWith is Compile that takes each service's encoding (enc[i] for
// st.Services[i], as AppendService writes it) and reuses what cache has of
// the services it has seen; enc and cache may be nil.
func CompileWith(st *State, enc [][]byte, cache *CompileCache) (*Desired, error) {
	v := &validator{bgp: st.Settings.BGP != nil}
	v.settings(&st.Settings)
	d := &Desired{Table: &Table{Services: make([]*VirtualService, 0, len(st.Services))}, Names: make(map[ServiceKey]string, len(st.Services)), Settings: st.Settings}
	d.Table.Timeouts = Timeouts{TCP: uint32(max(st.Settings.TCPTimeout, 0)), TCPFin: uint32(max(st.Settings.TCPFinTimeout, 0)), UDP: uint32(max(st.Settings.UDPTimeout, 0))}
	if cache != nil && (cache.pieces == nil || cache.network != st.Settings.Network || cache.bgp != v.bgp || len(enc) != len(st.Services)) {
		cache.network, cache.bgp, cache.pieces = st.Settings.Network, v.bgp, map[string]*compiled{}
	}
	seenKeys := make(map[ServiceKey]string, len(st.Services))
	seenNames := make(map[string]string, len(st.Services))
	vips := map[VIP]bool{}
	var pieces []*compiled
	if cache != nil {
		pieces = make([]*compiled, len(st.Services))
	}
	for i := range st.Services {
		svc := &st.Services[i]
		field := "services[" + strconv.Itoa(i) + "]"
		if svc.Name != "" {
			if prev, dup := seenNames[svc.Name]; dup {
				v.addf(field+".name", "%q is already the name of %s", svc.Name, prev)
			} else {
				seenNames[svc.Name] = field
			}
		}
		caching := cache != nil && len(enc) == len(st.Services)
		var c *compiled
		if caching {
			c = cache.piece(enc, i)
		}
		if c == nil {
			var clean bool
			if c, clean = v.compileService(field, svc, st.Settings.Network); c == nil {
				continue
			}
			caching = caching && clean
		}
		if caching {
			pieces[i] = c
		}
		if prev, dup := seenKeys[c.vs.Key]; dup {
			v.addf(field, "duplicate service %s: %s already defines it", c.vs.Key, prev)
			continue
		}
		seenKeys[c.vs.Key] = field
		d.add(c, vipInterface(svc, v.bgp), vips)
	}
	if len(v.problems) > 0 {
		return nil, &ValidationError{Problems: v.problems}
	}
	if v.bgp {
		quiesceFailures(d.Checks)
	}
	if cache != nil && len(enc) == len(st.Services) {
		cache.keep(enc, pieces)
	}
	return d, nil
}

// piece is what the cache has of service i: the last compile's piece when
// enc[i] is the very encoding it had, else the piece of an equal encoding.
func (cache *CompileCache) piece(enc [][]byte, i int) *compiled {
	if i < len(cache.lastEnc) && len(enc[i]) > 0 && len(cache.lastEnc[i]) == len(enc[i]) && &cache.lastEnc[i][0] == &enc[i][0] {
		return cache.lastPieces[i]
	}
	return cache.pieces[string(enc[i])]
}

// keep remembers this compile's pieces. New pieces join the map; what the
// state no longer has is let go when the map has grown to twice the state
// (a weight change at a time does not hash the whole document).
func (cache *CompileCache) keep(enc [][]byte, pieces []*compiled) {
	for i, c := range pieces {
		if c != nil && (i >= len(cache.lastPieces) || cache.lastPieces[i] != c) {
			cache.pieces[string(enc[i])] = c
		}
	}
	if len(cache.pieces) > 2*len(pieces)+16 {
		used := map[string]*compiled{}
		for i, c := range pieces {
			if c != nil {
				used[string(enc[i])] = c
			}
		}
		cache.pieces = used
	}
	cache.lastEnc, cache.lastPieces = slices.Clone(enc), pieces // the caller may reuse enc
}

// add puts a compiled service into the desired state: its checks and sorry
// servers always, its virtual service, VIP (on iface, once) and marks when
// it is enabled.
func (d *Desired) add(c *compiled, iface string, vips map[VIP]bool) {
	d.Checks = append(d.Checks, c.checks...)
	d.Sorry = append(d.Sorry, c.sorry...)
	if !c.enabled {
		return
	}
	d.Names[c.vs.Key] = c.name
	d.Table.Services = append(d.Table.Services, c.vs)
	if iface != "" && c.vip.IsValid() {
		vip := VIP{Interface: iface, Addr: c.vip}
		if !vips[vip] {
			vips[vip] = true
			d.VIPs = append(d.VIPs, vip)
		}
	}
	d.Marks = append(d.Marks, c.marks...)
}

// compileService validates one service on its own (what needs no other
// service) and translates it; nil when its key could not be built, and
// clean false when it has a problem.
func (v *validator) compileService(field string, svc *Service, network string) (c *compiled, clean bool) {
	before := len(v.problems)
	if svc.Name != "" {
		v.name(field+".name", svc.Name)
	}
	if svc.Group != "" {
		v.groupName(field+".group", svc.Group)
	}
	vs, vipAddr, ok := v.service(field, svc, network)
	if !ok {
		return nil, false
	}
	c = &compiled{vs: vs, vip: vipAddr, enabled: svc.IsEnabled()}
	if svc.Check != nil || svc.SorryServer != nil || svc.Quorum != 0 || svc.Hysteresis != 0 || svc.QuorumUp != nil || svc.QuorumDown != nil || serversHaveHealth(svc.Servers) {
		part := &Desired{}
		v.checks(field, svc, vs, part, svc.IsEnabled(), network)
		c.checks, c.sorry = part.Checks, part.Sorry
	}
	if c.enabled {
		c.name = serviceName(svc, vs.Key)
		for _, m := range svc.Match {
			c.marks = append(c.marks, MarkRule{Mark: vs.Key.FWMark, Addr: vipAddr, Protocol: m.Protocol, Ports: slices.Clone(m.Ports)})
		}
	}
	return c, len(v.problems) == before
}

// serversHaveHealth says whether a server has a check, a forced health or a
// notify program to validate.
func serversHaveHealth(rs []Server) bool {
	for i := range rs {
		if rs[i].Check != nil || rs[i].Health != "" || rs[i].NotifyUp != nil || rs[i].NotifyDown != nil {
			return true
		}
	}
	return false
}

func serviceName(svc *Service, k ServiceKey) string {
	if svc.Name != "" {
		return svc.Name
	}
	return k.String()
}

// service validates one service and builds its kernel form and its VIP (the
// address, which for a fwmark service is not part of the kernel key); ok is
// false when its key could not be built.
func (v *validator) service(field string, svc *Service, defaultFwd string) (*VirtualService, netip.Addr, bool) {
	vs := &VirtualService{}
	ok := true
	var addr netip.Addr
	if svc.Address != "" {
		a, err := parseAddr(svc.Address)
		if err != nil {
			v.addf(field+".address", "%v", err)
			ok = false
		}
		addr = a
	}
	if svc.FWMark > 0 {
		v.fwmarkKey(field, svc, addr, &vs.Key)
	} else if !v.addressKey(field, svc, addr, &vs.Key) {
		ok = false
	}
	if len(svc.Match) > 0 {
		v.matches(field, svc)
	}
	if svc.Interface != "" {
		if !validInterfaceName(svc.Interface) {
			v.addf(field+".interface", "%q is not an interface name", svc.Interface)
		} else if svc.Address == "" {
			v.addf(field+".interface", "%q: a VIP interface needs the service's address", svc.Interface)
		}
	}
	v.scheduler(field, svc, vs)
	fwd := svc.Forwarding
	v.forwarding(field+".forwarding", fwd)
	if fwd == "" {
		fwd = defaultFwd
	}
	if fwd == "" {
		fwd = "dr"
	}
	v.servers(field, svc, vs, fwd)
	if v.bgp {
		canonicalOrder(vs.Dests)
	}
	return vs, addr, ok
}

// fwmarkKey builds the key of a fwmark service: its mark, and the family of
// its address, else of its first real server, else IPv4.
func (v *validator) fwmarkKey(field string, svc *Service, addr netip.Addr, k *ServiceKey) {
	k.FWMark = svc.FWMark
	if svc.Port != 0 {
		v.addf(field+".port", "%d: a fwmark service is keyed by its mark and has no port", svc.Port)
	}
	if svc.Protocol != "" {
		v.addf(field+".protocol", "%q: a fwmark service is keyed by its mark and has no protocol (match[].protocol says which packets get the mark)", svc.Protocol)
	}
	k.Family = FamilyIPv4
	if addr.IsValid() {
		k.Family = familyOf(addr)
	} else if len(svc.Servers) > 0 {
		if a, err := parseAddr(svc.Servers[0].Address); err == nil {
			k.Family = familyOf(a)
		}
	}
}

// addressKey builds the key of a service at an address: protocol, address
// and port; it is false when one of them is missing or wrong.
func (v *validator) addressKey(field string, svc *Service, addr netip.Addr, k *ServiceKey) bool {
	ok := true
	proto := svc.Protocol
	if proto == "" {
		proto = "tcp"
	}
	p, known := protocolNumber(proto)
	if !known {
		v.addf(field+".protocol", "%q is not a protocol (want tcp, udp or sctp)", svc.Protocol)
		ok = false
	}
	if svc.Address == "" {
		v.addf(field+".address", "missing: a service needs an address (or a fwmark)")
		ok = false
	}
	switch {
	case svc.Port == 0 && svc.Persistence > 0:
		// All ports: IPVS takes port 0 only for a persistent service.
	case svc.Port == 0:
		v.addf(field+".port", "0 (all ports) is only valid for a persistent service: set persistence, or a port 1..65535")
		ok = false
	case svc.Port < 1 || svc.Port > 65535:
		v.addf(field+".port", "%d is out of range 1..65535", svc.Port)
		ok = false
	}
	k.Protocol, k.Addr, k.Port = p, addr, uint16(max(min(svc.Port, 65535), 0))
	if addr.IsValid() {
		k.Family = familyOf(addr)
	}
	return ok
}

func familyOf(a netip.Addr) uint16 {
	if a.Is4() {
		return FamilyIPv4
	}
	return FamilyIPv6
}

func (v *validator) matches(field string, svc *Service) {
	if svc.FWMark == 0 {
		v.addf(field+".match", "only a fwmark service marks packets: set fwmark")
		return
	}
	if svc.Address == "" {
		v.addf(field+".match", "marking packets needs the VIP: set address")
	}
	for j, m := range svc.Match {
		f := fmt.Sprintf("%s.match[%d]", field, j)
		if _, ok := protocolNumber(m.Protocol); !ok {
			v.addf(f+".protocol", "%q is not a protocol (want tcp, udp or sctp)", m.Protocol)
		}
		if len(m.Ports) == 0 || len(m.Ports) > 15 {
			v.addf(f+".ports", "%d ports given; want 1..15", len(m.Ports))
		}
		for x, p := range m.Ports {
			v.rangeCheck(fmt.Sprintf("%s.ports[%d]", f, x), p, 1, 65535)
		}
	}
}

func (v *validator) scheduler(field string, svc *Service, vs *VirtualService) {
	vs.Scheduler = svc.Scheduler
	switch {
	case vs.Scheduler == "" && v.bgp:
		// Every director maps a flow to the same real server (Maglev),
		// hashing the source port too so that one client's flows spread.
		vs.Scheduler = "mh"
		if len(svc.SchedulerFlags) == 0 {
			vs.Flags |= FlagSched2
		}
	case vs.Scheduler == "":
		vs.Scheduler = "wlc"
	}
	if !slices.Contains(Schedulers(), vs.Scheduler) {
		v.addf(field+".scheduler", "%q is not a scheduler (want one of %s)", svc.Scheduler, strings.Join(Schedulers(), " "))
	}
	for j, f := range svc.SchedulerFlags {
		ff := fmt.Sprintf("%s.scheduler_flags[%d]", field, j)
		if vs.Scheduler != "sh" && vs.Scheduler != "mh" {
			v.addf(ff, "%q: scheduler %s takes no flags (fallback and port are for sh and mh)", f, vs.Scheduler)
			continue
		}
		switch f {
		case "fallback":
			vs.Flags |= FlagSched1
		case "port":
			vs.Flags |= FlagSched2
		default:
			v.addf(ff, "%q is not a flag of scheduler %s (want fallback or port)", f, vs.Scheduler)
		}
	}
	if svc.OnePacket {
		if svc.FWMark == 0 && svc.Protocol != "udp" {
			v.addf(field+".one_packet", "true: one-packet scheduling is for udp (or fwmark) services, not %q", svc.Protocol)
		}
		vs.Flags |= FlagOnePacket
	}
	v.rangeCheck(field+".persistence", svc.Persistence, 0, maxPersistence)
	vs.Netmask = 0xffffffff
	if vs.Key.Family == FamilyIPv6 {
		vs.Netmask = 128
	}
	if svc.Persistence > 0 {
		vs.Flags |= FlagPersistent
		vs.Timeout = uint32(min(svc.Persistence, maxPersistence))
	}
	if svc.PersistenceNetmask != "" {
		if svc.Persistence <= 0 {
			v.addf(field+".persistence_netmask", "%q: a netmask needs persistence > 0", svc.PersistenceNetmask)
		}
		m, err := parseNetmask(vs.Key.Family, svc.PersistenceNetmask)
		if err != nil {
			v.addf(field+".persistence_netmask", "%v", err)
		} else {
			vs.Netmask = m
		}
	}
}

// servers validates a service's real servers. It runs for every server of
// every apply, so field paths are only built for a problem.
func (v *validator) servers(field string, svc *Service, vs *VirtualService, fwd string) {
	seenAddr := make(map[DestKey]int, len(svc.Servers))
	seenName := map[string]int{}
	vs.Dests = make([]*Destination, 0, len(svc.Servers))
	slab := make([]Destination, len(svc.Servers)) // one allocation for the service's servers
	for j := range svc.Servers {
		rs := &svc.Servers[j]
		f := func(leaf string) string {
			if leaf == "" {
				return fmt.Sprintf("%s.servers[%d]", field, j)
			}
			return fmt.Sprintf("%s.servers[%d].%s", field, j, leaf)
		}
		if rs.Name != "" {
			v.name(f("name"), rs.Name)
			if prev, dup := seenName[rs.Name]; dup {
				v.addf(f("name"), "%q is already the name of %s.servers[%d]", rs.Name, field, prev)
			} else {
				seenName[rs.Name] = j
			}
		}
		d := &slab[j]
		v.destination(f, rs, vs, fwd, d)
		v.destLimits(f, rs, d)
		if d.Key.Addr.IsValid() {
			if prev, dup := seenAddr[d.Key]; dup {
				v.addf(f("address"), "duplicate real server %s: %s.servers[%d] already lists it", d.Key, field, prev)
				continue
			}
			seenAddr[d.Key] = j
		}
		if rs.IsEnabled() {
			vs.Dests = append(vs.Dests, d)
		}
	}
}

// destination validates where a real server is and how packets reach it
// (address, forwarding method, port, tunnel) and builds d's key and forwarding.
func (v *validator) destination(f func(string) string, rs *Server, vs *VirtualService, fwd string, d *Destination) {
	a, err := parseAddr(rs.Address)
	if err != nil {
		v.addf(f("address"), "%v", err)
	} else if vs.Key.Family != 0 && familyOf(a) != vs.Key.Family {
		v.addf(f("address"), "%s: an %s service cannot have an %s real server", rs.Address, familyName(vs.Key.Family), familyName(familyOf(a)))
	}
	d.Key.Addr = a
	rfwd := rs.Forwarding
	if rfwd != "" && rfwd != "dr" && rfwd != "nat" && rfwd != "tun" {
		v.forwarding(f("forwarding"), rfwd)
	}
	if rfwd == "" {
		rfwd = fwd
	}
	switch rfwd {
	case "dr":
		d.Forward = ForwardDR
	case "tun":
		d.Forward = ForwardTUN
	default:
		d.Forward = ForwardNAT
	}
	if rs.Port < 0 || rs.Port > 65535 {
		v.rangeCheck(f("port"), rs.Port, 0, 65535)
	}
	d.Key.Port = uint16(max(min(rs.Port, 65535), 0))
	if d.Key.Port == 0 {
		d.Key.Port = vs.Key.Port
	}
	// A fwmark service's DR/TUN packets keep their own port, whatever
	// the server's (ipvsadm keeps and prints it); a port-0 service's
	// likewise.
	if (rfwd == "dr" || rfwd == "tun") && d.Key.Port != vs.Key.Port && vs.Key.FWMark == 0 && vs.Key.Port != 0 {
		v.addf(f("port"), "%d differs from the service port %d: %s forwarding cannot change the port (only nat can)", rs.Port, vs.Key.Port, rfwd)
	}
	v.tunnel(f, rs, rfwd, d)
}

// destLimits validates a real server's weight and connection thresholds and
// sets d's, clamped to what the kernel takes; a drained server weighs 0.
func (v *validator) destLimits(f func(string) string, rs *Server, d *Destination) {
	w := rs.EffectiveWeight()
	if w < 0 || w > maxWeight {
		v.rangeCheck(f("weight"), w, 0, maxWeight)
	}
	d.Weight = uint32(max(min(w, maxWeight), 0))
	if rs.Drained {
		d.Weight = 0 // drained: no new connections, the configured weight kept
	}
	if rs.UpperThreshold < 0 || rs.UpperThreshold > maxThreshold {
		v.rangeCheck(f("upper_threshold"), rs.UpperThreshold, 0, maxThreshold)
	}
	if rs.LowerThreshold < 0 || rs.LowerThreshold > maxThreshold {
		v.rangeCheck(f("lower_threshold"), rs.LowerThreshold, 0, maxThreshold)
	}
	if rs.LowerThreshold > rs.UpperThreshold {
		v.addf(f("lower_threshold"), "%d is above upper_threshold %d", rs.LowerThreshold, rs.UpperThreshold)
	}
	d.UpperThreshold = uint32(max(min(rs.UpperThreshold, maxThreshold), 0))
	d.LowerThreshold = uint32(max(min(rs.LowerThreshold, maxThreshold), 0))
}

// tunnel validates a server's tunnel fields onto its destination: only for
// tun forwarding; gue needs its port, remcsum is gue's only.
func (v *validator) tunnel(f func(string) string, rs *Server, fwd string, d *Destination) {
	if rs.Tunnel == "" && rs.TunnelPort == 0 && rs.TunnelChecksum == "" {
		return
	}
	if fwd != "tun" {
		v.addf(f("tunnel"), "%q: a tunnel is for tun forwarding, not %s", rs.Tunnel, fwd)
		return
	}
	switch rs.Tunnel {
	case "", "ipip":
		d.TunType = TunIPIP
	case "gue":
		d.TunType = TunGUE
	case "gre":
		d.TunType = TunGRE
	default:
		v.addf(f("tunnel"), "%q is not a tunnel type (want ipip, gue or gre)", rs.Tunnel)
	}
	switch {
	case d.TunType == TunGUE && (rs.TunnelPort < 1 || rs.TunnelPort > 65535):
		v.addf(f("tunnel_port"), "%d: a gue tunnel needs its UDP port 1..65535", rs.TunnelPort)
	case d.TunType != TunGUE && rs.TunnelPort != 0:
		v.addf(f("tunnel_port"), "%d: only a gue tunnel has a port", rs.TunnelPort)
	}
	d.TunPort = uint16(max(min(rs.TunnelPort, 65535), 0))
	switch rs.TunnelChecksum {
	case "", "nocsum":
	case "csum":
		d.TunFlags = TunFlagCsum
	case "remcsum":
		d.TunFlags = TunFlagRemCsum
	default:
		v.addf(f("tunnel_checksum"), "%q is not a tunnel checksum (want nocsum, csum or remcsum)", rs.TunnelChecksum)
	}
	if d.TunFlags != 0 && d.TunType == TunIPIP {
		v.addf(f("tunnel_checksum"), "%q: ipip has no checksum option (gue and gre have)", rs.TunnelChecksum)
	}
	if d.TunFlags == TunFlagRemCsum && d.TunType != TunGUE {
		v.addf(f("tunnel_checksum"), "remcsum is for gue tunnels only")
	}
}

func familyName(f uint16) string {
	if f == FamilyIPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// ServiceKeyOf is the kernel's key of a service; ok is false when the
// service is too invalid to have one.
func ServiceKeyOf(svc *Service) (ServiceKey, bool) {
	v := &validator{}
	vs, _, ok := v.service("", svc, "")
	if !ok {
		return ServiceKey{}, false
	}
	return vs.Key, true
}
