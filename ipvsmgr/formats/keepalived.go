package formats

import (
	"cmp"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// keepalived.conf: the virtual_server and real_server blocks become services
// and servers, their checkers checks (keepalived_check.go); everything else
// (global_defs, vrrp_instance, hysteresis, a digest...) is kept in
// State.Imported: a block as one entry whose value is its text, a statement
// as its keyword and arguments.

var kaForwarding = map[string]string{"DR": "dr", "NAT": "nat", "TUN": "tun"}

// Scopes of entries an import could not take up, saying why.
const (
	kaGroupScope   = "not imported: a virtual_server group is not expanded; define one virtual_server per address to import it"
	kaIncludeScope = "not read: import the included file separately"
)

type kaImporter struct {
	data  []byte
	st    *ipvsmgr.State
	lines lineIndex
}

func (k *kaImporter) errf(line int, format string, args ...any) error {
	return &ParseError{Format: FormatKeepalived, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// keep records n as it is written: a block with its text, a statement with
// its arguments.
func (k *kaImporter) keep(scope string, n *kaNode) {
	key, value := n.word(0), n.rest(k.data)
	if n.block {
		key, value = n.header(), n.text(k.data)
	}
	k.st.Imported = append(k.st.Imported, ipvsmgr.ImportedKey{Source: FormatKeepalived, Line: n.line, Scope: scope, Key: key, Value: value})
}

func parseKeepalived(data []byte) (*ipvsmgr.State, lineIndex, error) {
	nodes, err := parseKeepalivedTree(data)
	if err != nil {
		return nil, nil, err
	}
	k := &kaImporter{data: data, st: &ipvsmgr.State{Services: []ipvsmgr.Service{}}, lines: lineIndex{}}
	for _, n := range nodes {
		switch {
		case n.word(0) == "virtual_server" && n.word(1) == "group":
			k.keep(kaGroupScope, n)
		case n.word(0) == "virtual_server":
			if err := k.virtualServer(n); err != nil {
				return nil, nil, err
			}
		case n.word(0) == "include":
			k.keep(kaIncludeScope, n)
		default:
			k.keep("", n)
		}
	}
	return k.st, k.lines, nil
}

func (k *kaImporter) virtualServer(n *kaNode) error {
	if !n.block {
		return k.errf(n.line, "virtual_server without a { ... } block")
	}
	idx := len(k.st.Services)
	field := fmt.Sprintf("services[%d]", idx)
	k.lines[field] = n.line
	svc := ipvsmgr.Service{Servers: []ipvsmgr.Server{}}
	switch {
	case n.word(1) == "fwmark":
		if len(n.words) != 3 {
			return k.errf(n.line, "want `virtual_server fwmark MARK {`")
		}
		m, err := strconv.ParseUint(n.word(2), 10, 32)
		if err != nil || m == 0 {
			return k.errf(n.line, "fwmark %q: want a number 1..4294967295", n.word(2))
		}
		svc.FWMark = uint32(m)
	default:
		if len(n.words) != 3 {
			return k.errf(n.line, "want `virtual_server ADDRESS PORT {` or `virtual_server fwmark MARK {`")
		}
		a, err := netip.ParseAddr(n.word(1))
		if err != nil {
			return k.errf(n.line, "%q is not an IP address", n.word(1))
		}
		port, err := strconv.Atoi(n.word(2))
		if err != nil {
			return k.errf(n.line, "port %q is not a number", n.word(2))
		}
		svc.Address, svc.Port = a.Unmap().String(), port
	}
	scope := n.header()
	// protocol is only known to matter once every key is read (a fwmark
	// service has none), and keepalived's default method is NAT.
	var protocol, sorry, quorum *kaNode
	var servers []*kaNode
	var checks kaCheckSettings
	for _, c := range n.children {
		kw := c.word(0)
		set := func(f string) { k.lines[field+"."+f] = c.line }
		if c.block && kw != "real_server" {
			k.keep(scope, c)
			continue
		}
		switch kw {
		case "lb_algo", "lvs_sched":
			v, err := k.arg(c)
			if err != nil {
				return err
			}
			svc.Scheduler = v
			set("scheduler")
		case "lb_kind", "lvs_method":
			v, err := k.arg(c)
			if err != nil {
				return err
			}
			fwd, ok := kaForwarding[strings.ToUpper(v)]
			if !ok {
				return k.errf(c.line, "%s %q: want DR, NAT or TUN", kw, v)
			}
			svc.Forwarding = fwd
			set("forwarding")
		case "persistence_timeout":
			svc.Persistence = defaultPersistence
			if len(c.words) > 1 {
				p, err := strconv.Atoi(c.word(1))
				if err != nil || p < 0 {
					return k.errf(c.line, "persistence_timeout %q: want a number of seconds", c.word(1))
				}
				svc.Persistence = p
			}
			set("persistence")
		case "persistence_granularity":
			v, err := k.arg(c)
			if err != nil {
				return err
			}
			svc.PersistenceNetmask = v
			set("persistence_netmask")
		case "protocol":
			protocol = c
		case "ops":
			svc.OnePacket = true
			set("one_packet")
		case "sh-fallback", "mh-fallback", "flag-1", "sh-port", "mh-port", "flag-2", "lvs_flags":
			flags := []string{kw}
			if kw == "lvs_flags" {
				flags = nil
				for _, w := range c.words[1:] {
					flags = append(flags, w.text)
				}
			}
			for _, f := range flags {
				switch f {
				case "sh-fallback", "mh-fallback", "flag-1":
					svc.SchedulerFlags = append(svc.SchedulerFlags, "fallback")
				case "sh-port", "mh-port", "flag-2":
					svc.SchedulerFlags = append(svc.SchedulerFlags, "port")
				case "ops", "onepacket":
					svc.OnePacket = true
				default:
					return k.errf(c.line, "%q is not a scheduler flag (want sh-fallback, sh-port, mh-fallback or mh-port)", f)
				}
			}
			set("scheduler_flags")
		case "real_server":
			servers = append(servers, c)
		case "sorry_server":
			sorry = c
		case "quorum":
			quorum = c
		case "alpha":
			checks.alpha = true
		default:
			if checks.setting(c) {
				continue
			}
			// virtualhost, omega, hysteresis, ha_suspend, quorum_up,
			// delay_before_retry...
			k.keep(scope, c)
		}
	}
	if protocol != nil {
		v, err := k.arg(protocol)
		if err != nil {
			return err
		}
		switch {
		case svc.FWMark > 0:
			// keepalived's checkers use it; IPVS keys the service by the mark.
			k.keep(scope, protocol)
		case strings.EqualFold(v, "tcp") || strings.EqualFold(v, "udp") || strings.EqualFold(v, "sctp"):
			svc.Protocol = strings.ToLower(v)
			k.lines[field+".protocol"] = protocol.line
		default:
			return k.errf(protocol.line, "protocol %q: want TCP, UDP or SCTP", v)
		}
	}
	if svc.Forwarding == "" {
		svc.Forwarding = "nat"
	}
	var rsChecks []*kaCheck
	for _, c := range servers {
		ch, err := k.realServer(&svc, idx, scope, c, checks)
		if err != nil {
			return err
		}
		rsChecks = append(rsChecks, ch)
	}
	k.placeChecks(&svc, field, rsChecks)
	if sorry != nil {
		if err := k.sorryServer(&svc, field, scope, sorry); err != nil {
			return err
		}
	}
	if quorum != nil {
		if err := k.quorum(&svc, field, scope, quorum); err != nil {
			return err
		}
	}
	k.st.Services = append(k.st.Services, svc)
	return nil
}

func (k *kaImporter) arg(n *kaNode) (string, error) {
	if len(n.words) != 2 {
		return "", k.errf(n.line, "%s takes one value, got %d", n.word(0), len(n.words)-1)
	}
	return n.word(1), nil
}

// realServer adds the server to svc and returns its check (nil: none).
func (k *kaImporter) realServer(svc *ipvsmgr.Service, idx int, vsScope string, n *kaNode, checks kaCheckSettings) (*kaCheck, error) {
	field := fmt.Sprintf("services[%d].servers[%d]", idx, len(svc.Servers))
	k.lines[field] = n.line
	if len(n.words) < 2 || len(n.words) > 3 {
		return nil, k.errf(n.line, "want `real_server ADDRESS [PORT] {`")
	}
	a, err := netip.ParseAddr(n.word(1))
	if err != nil {
		return nil, k.errf(n.line, "real server %q is not an IP address", n.word(1))
	}
	rs := ipvsmgr.Server{Address: a.Unmap().String()}
	if len(n.words) == 3 {
		if rs.Port, err = strconv.Atoi(n.word(2)); err != nil {
			return nil, k.errf(n.line, "real server port %q is not a number", n.word(2))
		}
		k.lines[field+".port"] = n.line
	}
	scope := vsScope + " " + n.header()
	var checkers []*kaNode
	for _, c := range n.children {
		kw := c.word(0)
		if c.block {
			checkers = append(checkers, c)
			continue
		}
		if checks.setting(c) {
			continue
		}
		num := func(f string, dst *int) error {
			v, err := k.arg(c)
			if err != nil {
				return err
			}
			if *dst, err = strconv.Atoi(v); err != nil {
				return k.errf(c.line, "%s %q is not a number", kw, v)
			}
			k.lines[field+"."+f] = c.line
			return nil
		}
		switch kw {
		case "weight":
			var w int
			if err := num("weight", &w); err != nil {
				return nil, err
			}
			rs.Weight = intPtr(w)
		case "uthreshold":
			if err := num("upper_threshold", &rs.UpperThreshold); err != nil {
				return nil, err
			}
		case "lthreshold":
			if err := num("lower_threshold", &rs.LowerThreshold); err != nil {
				return nil, err
			}
		case "lvs_method", "lb_kind":
			v, err := k.arg(c)
			if err != nil {
				return nil, err
			}
			fwd, ok := kaForwarding[strings.ToUpper(v)]
			if !ok {
				return nil, k.errf(c.line, "%s %q: want DR, NAT or TUN", kw, v)
			}
			rs.Forwarding = fwd
			k.lines[field+".forwarding"] = c.line
		default:
			// notify_up, notify_down, delay_before_retry...
			k.keep(scope, c)
		}
	}
	// keepalived requires every checker of a server to pass; a server has
	// one check here, the first that maps, and the others are kept.
	var check *kaCheck
	for _, c := range checkers {
		if check == nil {
			kept := len(k.st.Imported)
			ch, err := k.checker(scope, c, checks)
			if err != nil {
				return nil, err
			}
			if check = ch; check != nil {
				continue
			}
			k.st.Imported = k.st.Imported[:kept] // the block is kept whole
		}
		k.keep(scope, c)
	}
	if rs.Weight == nil {
		rs.Weight = intPtr(1)
	}
	fwd := rs.Forwarding
	if fwd == "" {
		fwd = svc.Forwarding
	}
	switch {
	case svc.FWMark > 0 && rs.Port != 0 && fwd != "nat":
		// A DR or TUN server of a fwmark service gets the packet's own
		// port; the port written here is only where checkers connect.
		if check == nil {
			k.st.Imported = append(k.st.Imported, ipvsmgr.ImportedKey{Source: FormatKeepalived, Line: n.line, Scope: scope, Key: "port", Value: n.word(2)})
		} else if check.check.Port == 0 {
			check.check.Port = rs.Port
			check.lines["port"] = n.line
		}
		rs.Port = 0
	case check != nil && check.check.Port != 0 && check.check.Port == cmp.Or(rs.Port, svc.Port):
		check.check.Port = 0 // the server's own port
		delete(check.lines, "port")
	}
	svc.Servers = append(svc.Servers, rs)
	return check, nil
}
