package formats

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// ipvsadm's save format (`ipvsadm -S -n`): one ipvsadm command per line, the
// virtual services (-A) each followed by its real servers (-a). The kernel
// table is all it holds: names, VIP interfaces and fwmark match rules have no
// place in it, and disabled entries are not written.

// defaultPersistence is what ipvsadm gives `-p` without a timeout.
const defaultPersistence = 360

// ipvsadmAliases maps long options to the short ones the parser handles.
var ipvsadmAliases = map[string]string{
	"--add-service": "-A", "--add-server": "-a", "--clear": "-C",
	"--tcp-service": "-t", "--udp-service": "-u", "--fwmark-service": "-f",
	"--scheduler": "-s", "--persistent": "-p", "--netmask": "-M", "--sched-flags": "-b",
	"--ops": "-o", "--ipv6": "-6", "--real-server": "-r", "--gatewaying": "-g",
	"--masquerading": "-m", "--ipip": "-i", "--weight": "-w", "--u-threshold": "-x",
	"--l-threshold": "-y",
}

type ipvsadmParser struct {
	im    *importer
	st    *ipvsmgr.State
	lines lineIndex
	line  int
	// byKey finds the service an -a line adds to (by its ipvsadm spec).
	byKey map[string]int
}

func (p *ipvsadmParser) errf(format string, args ...any) error {
	return &ParseError{Format: FormatIpvsadm, Line: p.line, Msg: fmt.Sprintf(format, args...)}
}

func parseIpvsadm(data []byte, im *importer) (*ipvsmgr.State, lineIndex, error) {
	p := &ipvsadmParser{im: im, st: &ipvsmgr.State{Services: []ipvsmgr.Service{}}, lines: lineIndex{}, byKey: map[string]int{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), maxDocument)
	for sc.Scan() {
		p.line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		args := strings.Fields(text)
		if strings.EqualFold(args[0], "ipvsadm") {
			args = args[1:]
			if len(args) == 0 {
				continue
			}
		}
		cmd := canonicalOpt(args[0])
		var err error
		switch cmd {
		case "-A":
			err = p.addService(args[1:])
		case "-a":
			err = p.addServer(args[1:])
		case "--set":
			err = p.setTimeouts(args[1:])
		case "-C":
			// A restore file often starts by clearing the table; importing
			// replaces the whole desired state anyway.
			if len(args) > 1 {
				err = p.errf("-C takes no arguments, got %q", strings.Join(args[1:], " "))
			}
		default:
			err = p.errf("%q is not a command of the save format (want -A, -a or --set)", args[0])
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, &ParseError{Format: FormatIpvsadm, Line: p.line + 1, Msg: fmt.Sprintf("read: %v", err)}
	}
	for i := range p.st.Services {
		hoistForwarding(&p.st.Services[i])
	}
	p.dropRedundantFamily()
	return p.st, p.lines, nil
}

// dropRedundantFamily forgets the -6 of fwmark services whose real servers
// already say they are IPv6.
func (p *ipvsadmParser) dropRedundantFamily() {
	kept := p.st.Imported[:0]
	for _, k := range p.st.Imported {
		if k.Key == "-6" {
			if idx, ok := p.byKey[k.Scope]; ok && len(p.st.Services[idx].Servers) > 0 {
				continue
			}
		}
		kept = append(kept, k)
	}
	if len(kept) == 0 {
		kept = nil
	}
	p.st.Imported = kept
}

func canonicalOpt(a string) string {
	if s, ok := ipvsadmAliases[a]; ok {
		return s
	}
	return a
}

// hoistForwarding puts the servers' forwarding method on the service when
// they all agree, as a person would write the document.
func hoistForwarding(svc *ipvsmgr.Service) {
	if len(svc.Servers) == 0 {
		return
	}
	fwd := svc.Servers[0].Forwarding
	for _, rs := range svc.Servers[1:] {
		if rs.Forwarding != fwd {
			return
		}
	}
	svc.Forwarding = fwd
	for j := range svc.Servers {
		svc.Servers[j].Forwarding = ""
	}
}

// svcSpec is a parsed virtual-service option: -t/-u/--sctp-service ADDR:PORT
// or -f MARK.
type svcSpec struct {
	proto string
	addr  netip.Addr
	port  int
	mark  uint32
	v6    bool // -6 on a fwmark service
}

// key is the service as ipvsadm -Sn names it, used as the scope of its
// imported options.
func (s svcSpec) key() string {
	if s.mark > 0 {
		k := "-f " + strconv.FormatUint(uint64(s.mark), 10)
		if s.v6 {
			k += " -6"
		}
		return k
	}
	return protoOpt(s.proto) + " " + netip.AddrPortFrom(s.addr, uint16(s.port)).String()
}

func protoOpt(proto string) string {
	switch proto {
	case "udp":
		return "-u"
	case "sctp":
		return "--sctp-service"
	}
	return "-t"
}

// takeSpec reads the service option at args[i] if there is one.
func (p *ipvsadmParser) takeSpec(args []string, i int, spec *svcSpec) (next int, ok bool, err error) {
	opt := canonicalOpt(args[i])
	switch opt {
	case "-t", "-u", "--sctp-service", "-f":
	default:
		return i, false, nil
	}
	if i+1 >= len(args) {
		return 0, false, p.errf("%s needs a value", args[i])
	}
	v := args[i+1]
	if opt == "-f" {
		m, err := strconv.ParseUint(v, 10, 32)
		if err != nil || m == 0 {
			return 0, false, p.errf("-f %q: a firewall mark is a number 1..4294967295", v)
		}
		spec.mark = uint32(m)
		return i + 2, true, nil
	}
	spec.proto = map[string]string{"-t": "tcp", "-u": "udp", "--sctp-service": "sctp"}[opt]
	a, port, hasPort, err := p.addrPort(v, spec.proto)
	if err != nil {
		return 0, false, err
	}
	if !hasPort {
		return 0, false, p.errf("%s %s: a virtual service needs a port (0 for all ports, with -p)", args[i], v)
	}
	spec.addr, spec.port = a, port
	return i + 2, true, nil
}

// addrPort parses ADDR[:PORT] / [ADDR6]:PORT as ipvsadm writes them, the
// port a number or (ipvsadm -S without -n) a service name.
func (p *ipvsadmParser) addrPort(s, proto string) (netip.Addr, int, bool, error) {
	host, port, hasPort := s, "", false
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return netip.Addr{}, 0, false, p.errf("%q: missing ] after the IPv6 address", s)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return netip.Addr{}, 0, false, p.errf("%q: want [ADDRESS]:PORT", s)
			}
			port, hasPort = rest[1:], true
		}
	case strings.Count(s, ":") == 1:
		i := strings.IndexByte(s, ':')
		host, port, hasPort = s[:i], s[i+1:], true
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, 0, false, p.errf("%q is not an IP address: names are not resolved, save the table with `ipvsadm -S -n`", host)
	}
	a = a.Unmap()
	if !hasPort {
		return a, 0, false, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		var ok bool
		if n, ok = p.im.servicePort(port, proto); !ok {
			return netip.Addr{}, 0, false, p.errf("port %q is neither a number nor a service name of /etc/services", port)
		}
	}
	if n < 0 || n > 65535 {
		return netip.Addr{}, 0, false, p.errf("port %d is out of range 0..65535", n)
	}
	return a, n, true, nil
}

func (p *ipvsadmParser) value(args []string, i int) (string, error) {
	if i+1 >= len(args) {
		return "", p.errf("%s needs a value", args[i])
	}
	return args[i+1], nil
}

func (p *ipvsadmParser) number(args []string, i, lo, hi int) (int, error) {
	v, err := p.value(args, i)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, p.errf("%s %q: want a number %d..%d", args[i], v, lo, hi)
	}
	return n, nil
}

func (p *ipvsadmParser) addService(args []string) error {
	var spec svcSpec
	var haveSpec bool
	svc := ipvsmgr.Service{Servers: []ipvsmgr.Server{}}
	var imported []ipvsmgr.ImportedKey
	for i := 0; i < len(args); {
		next, ok, err := p.takeSpec(args, i, &spec)
		if err != nil {
			return err
		}
		if ok {
			if haveSpec {
				return p.errf("more than one virtual service on one -A line")
			}
			haveSpec, i = true, next
			continue
		}
		if i, err = p.serviceOption(args, i, &svc, &spec, &imported); err != nil {
			return err
		}
	}
	if !haveSpec {
		return p.errf("-A without a virtual service (-t, -u, --sctp-service or -f)")
	}
	if spec.v6 && spec.mark == 0 {
		return p.errf("-6 is for fwmark services (-f); an address says its own family")
	}
	if spec.mark == 0 && spec.port == 0 && svc.Persistence == 0 {
		return p.errf("Zero port specified for non-persistent service (as ipvsadm refuses it)")
	}
	p.im.declare(1, 0)
	key := spec.key()
	if prev, dup := p.byKey[key]; dup {
		return p.errf("virtual service %s is already defined on line %d", key, p.lines.lineOf(fmt.Sprintf("services[%d]", prev)))
	}
	if spec.mark > 0 {
		svc.FWMark = spec.mark
	} else {
		svc.Protocol, svc.Address, svc.Port = spec.proto, spec.addr.String(), spec.port
	}
	if spec.v6 {
		// Without an address or a server nothing else says the mark is IPv6.
		imported = append(imported, ipvsmgr.ImportedKey{Source: FormatIpvsadm, Line: p.line, Key: "-6"})
	}
	for _, k := range imported {
		k.Scope = key
		p.st.Imported = append(p.st.Imported, k)
	}
	idx := len(p.st.Services)
	p.byKey[key] = idx
	p.lines[fmt.Sprintf("services[%d]", idx)] = p.line
	p.st.Services = append(p.st.Services, svc)
	return nil
}

// serviceOption takes the option of an -A line at args[i] into svc (or
// spec, or imported) and returns the index of the next one.
func (p *ipvsadmParser) serviceOption(args []string, i int, svc *ipvsmgr.Service, spec *svcSpec, imported *[]ipvsmgr.ImportedKey) (int, error) {
	switch opt := canonicalOpt(args[i]); opt {
	case "-6":
		spec.v6 = true
		i++
	case "-s":
		v, err := p.value(args, i)
		if err != nil {
			return 0, err
		}
		svc.Scheduler = v
		i += 2
	case "-p":
		svc.Persistence = defaultPersistence
		i++
		if i < len(args) && !strings.HasPrefix(args[i], "-") {
			n, err := strconv.Atoi(args[i])
			if err != nil || n < 1 {
				return 0, p.errf("-p %q: a persistence timeout is a number of seconds", args[i])
			}
			svc.Persistence = n
			i++
		}
	case "-M":
		v, err := p.value(args, i)
		if err != nil {
			return 0, err
		}
		svc.PersistenceNetmask = v
		i += 2
	case "-b":
		v, err := p.value(args, i)
		if err != nil {
			return 0, err
		}
		for f := range strings.SplitSeq(v, ",") {
			switch f {
			case "sh-fallback", "mh-fallback", "flag-1":
				svc.SchedulerFlags = append(svc.SchedulerFlags, "fallback")
			case "sh-port", "mh-port", "flag-2":
				svc.SchedulerFlags = append(svc.SchedulerFlags, "port")
			default:
				return 0, p.errf("-b %q: %q is not a scheduler flag (want sh-fallback, sh-port, mh-fallback or mh-port)", v, f)
			}
		}
		i += 2
	case "-o":
		svc.OnePacket = true
		i++
	case "--pe":
		v, err := p.value(args, i)
		if err != nil {
			return 0, err
		}
		*imported = append(*imported, ipvsmgr.ImportedKey{Source: FormatIpvsadm, Line: p.line, Key: "--pe", Value: v})
		i += 2
	default:
		return 0, p.errf("%q is not an option of -A (want -t/-u/--sctp-service/-f, -s, -p, -M, -b, -o, -6)", args[i])
	}
	return i, nil
}

// rsLine is an -a line as it is read.
type rsLine struct {
	spec     svcSpec
	haveSpec bool
	rs       ipvsmgr.Server
	addr     netip.Addr
	port     int
	haveRS   bool
	fwd      string
	weight   int
	imported []ipvsmgr.ImportedKey
}

func (p *ipvsadmParser) addServer(args []string) error {
	l := rsLine{fwd: "dr", weight: 1}
	for i := 0; i < len(args); {
		next, ok, err := p.takeSpec(args, i, &l.spec)
		if err != nil {
			return err
		}
		if ok {
			if l.haveSpec {
				return p.errf("more than one virtual service on one -a line")
			}
			l.haveSpec, i = true, next
			continue
		}
		if i, err = p.serverOption(args, i, &l); err != nil {
			return err
		}
	}
	if !l.haveSpec {
		return p.errf("-a without a virtual service (-t, -u, --sctp-service or -f)")
	}
	if !l.haveRS {
		return p.errf("-a without a real server (-r ADDRESS:PORT)")
	}
	idx, ok := p.byKey[l.spec.key()]
	if !ok {
		return p.errf("real server for %s, which no -A line before it defines", l.spec.key())
	}
	svc := &p.st.Services[idx]
	p.im.declare(0, 1)
	if svc.FWMark == 0 && l.fwd != "nat" && l.port != svc.Port {
		// ipvsadm sets a DR/TUN server's port to the service's (silently).
		p.im.warnf(p.line, "real server %s: %s forwarding keeps the service's port %d, not %d (ipvsadm resets it)", l.addr, l.fwd, svc.Port, l.port)
		l.port = svc.Port
	}
	rs := l.rs
	rs.Address, rs.Port, rs.Forwarding, rs.Weight = l.addr.String(), l.port, l.fwd, intPtr(l.weight)
	scope := l.spec.key() + " -r " + netip.AddrPortFrom(l.addr, uint16(l.port)).String()
	for _, k := range l.imported {
		k.Scope = scope
		p.st.Imported = append(p.st.Imported, k)
	}
	p.lines[fmt.Sprintf("services[%d].servers[%d]", idx, len(svc.Servers))] = p.line
	svc.Servers = append(svc.Servers, rs)
	return nil
}

// serverOption takes the option of an -a line at args[i] into l and
// returns the index of the next one.
func (p *ipvsadmParser) serverOption(args []string, i int, l *rsLine) (int, error) {
	switch opt := canonicalOpt(args[i]); opt {
	case "-6":
		l.spec.v6 = true
		return i + 1, nil
	case "-r":
		v, err := p.value(args, i)
		if err != nil {
			return 0, err
		}
		if l.addr, l.port, _, err = p.addrPort(v, l.spec.proto); err != nil {
			return 0, err
		}
		l.haveRS = true
		return i + 2, nil
	case "-g", "-m", "-i":
		l.fwd = map[string]string{"-g": "dr", "-m": "nat", "-i": "tun"}[opt]
		return i + 1, nil
	case "-w", "-x", "-y":
		hi := map[string]int{"-w": 65535, "-x": 1<<31 - 1, "-y": 1<<31 - 1}[opt]
		n, err := p.number(args, i, 0, hi)
		if err != nil {
			return 0, err
		}
		*map[string]*int{"-w": &l.weight, "-x": &l.rs.UpperThreshold, "-y": &l.rs.LowerThreshold}[opt] = n
		return i + 2, nil
	case "--tun-type":
		v, err := p.value(args, i)
		if err != nil {
			return 0, err
		}
		l.rs.Tunnel = v
		if v == "ipip" {
			l.rs.Tunnel = "" // what IPVS does without the option
		}
		return i + 2, nil
	case "--tun-port":
		n, err := p.number(args, i, 1, 65535)
		if err != nil {
			return 0, err
		}
		l.rs.TunnelPort = n
		return i + 2, nil
	case "--tun-nocsum", "--tun-csum", "--tun-remcsum":
		l.rs.TunnelChecksum = strings.TrimPrefix(opt, "--tun-")
		if l.rs.TunnelChecksum == "nocsum" {
			l.rs.TunnelChecksum = "" // the default
		}
		return i + 1, nil
	}
	return 0, p.errf("%q is not an option of -a (want a virtual service, -r, -g/-m/-i, -w, -x, -y)", args[i])
}

func (p *ipvsadmParser) setTimeouts(args []string) error {
	if len(args) != 3 {
		return p.errf("--set takes three timeouts (tcp tcpfin udp), got %d values", len(args))
	}
	var v [3]int
	for i, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 {
			return p.errf("--set %q: a timeout is a number of seconds", a)
		}
		v[i] = n
	}
	s := &p.st.Settings
	s.TCPTimeout, s.TCPFinTimeout, s.UDPTimeout = v[0], v[1], v[2]
	for _, f := range []string{"settings.tcp_timeout", "settings.tcpfin_timeout", "settings.udp_timeout"} {
		p.lines[f] = p.line
	}
	return nil
}

// exportIpvsadm writes the kernel table st describes the way `ipvsadm -S -n`
// does, so that a table saved by ipvsadm comes back byte for byte.
func exportIpvsadm(st *ipvsmgr.State, w io.Writer) error {
	d, err := ipvsmgr.Compile(st)
	if err != nil {
		return err
	}
	imported := map[string][]ipvsmgr.ImportedKey{}
	for _, k := range st.Imported {
		if k.Source == FormatIpvsadm {
			imported[k.Scope] = append(imported[k.Scope], k)
		}
	}
	bw := bufio.NewWriter(w)
	if t := d.Table.Timeouts; t.TCP != 0 || t.TCPFin != 0 || t.UDP != 0 {
		fmt.Fprintf(bw, "--set %d %d %d\n", t.TCP, t.TCPFin, t.UDP)
	}
	for _, vs := range d.Table.Services {
		key := vs.Key.String()
		if vs.Key.FWMark != 0 && vs.Key.Family == ipvsmgr.FamilyIPv4 && len(imported[key+" -6"]) > 0 {
			key += " -6"
		}
		fmt.Fprintf(bw, "-A %s -s %s", key, vs.Scheduler)
		if vs.Flags&ipvsmgr.FlagPersistent != 0 {
			fmt.Fprintf(bw, " -p %d", vs.Timeout)
			switch {
			case vs.Key.Family == ipvsmgr.FamilyIPv6 && vs.Netmask != 128:
				fmt.Fprintf(bw, " -M %d", vs.Netmask)
			case vs.Key.Family != ipvsmgr.FamilyIPv6 && vs.Netmask != 0xffffffff:
				m := vs.Netmask
				fmt.Fprintf(bw, " -M %d.%d.%d.%d", m>>24, m>>16&0xff, m>>8&0xff, m&0xff)
			}
		}
		for _, k := range imported[key] {
			if k.Key == "--pe" {
				fmt.Fprintf(bw, " --pe %s", k.Value)
			}
		}
		if vs.Flags&ipvsmgr.FlagOnePacket != 0 {
			bw.WriteString(" -o")
		}
		if f := vs.Flags & (ipvsmgr.FlagSched1 | ipvsmgr.FlagSched2); f != 0 {
			var names []string
			if f&ipvsmgr.FlagSched1 != 0 {
				names = append(names, vs.Scheduler+"-fallback")
			}
			if f&ipvsmgr.FlagSched2 != 0 {
				names = append(names, vs.Scheduler+"-port")
			}
			fmt.Fprintf(bw, " -b %s", strings.Join(names, ","))
		}
		bw.WriteString("\n")
		for _, rs := range vs.Dests {
			fmt.Fprintf(bw, "-a %s -r %s %s -w %d", key, rs.Key, forwardOpt(rs.Forward), rs.Weight)
			if rs.Forward == ipvsmgr.ForwardTUN {
				bw.WriteString(tunnelOpts(rs))
			}
			// ipvsadm -S leaves thresholds out; ipvsadm -R takes them.
			if rs.UpperThreshold != 0 {
				fmt.Fprintf(bw, " -x %d", rs.UpperThreshold)
			}
			if rs.LowerThreshold != 0 {
				fmt.Fprintf(bw, " -y %d", rs.LowerThreshold)
			}
			bw.WriteString("\n")
		}
	}
	return bw.Flush()
}

// tunnelOpts are a TUN server's options as ipvsadm -S prints them.
func tunnelOpts(d *ipvsmgr.Destination) string {
	s := " --tun-type " + [...]string{"ipip", "gue", "gre"}[min(d.TunType, 2)]
	if d.TunType == ipvsmgr.TunGUE {
		s += " --tun-port " + strconv.Itoa(int(d.TunPort))
	}
	if d.TunType != ipvsmgr.TunIPIP {
		switch {
		case d.TunFlags&ipvsmgr.TunFlagRemCsum != 0:
			s += " --tun-remcsum"
		case d.TunFlags&ipvsmgr.TunFlagCsum != 0:
			s += " --tun-csum"
		default:
			s += " --tun-nocsum"
		}
	}
	return s
}

func forwardOpt(f ipvsmgr.Forwarding) string {
	switch f {
	case ipvsmgr.ForwardNAT:
		return "-m"
	case ipvsmgr.ForwardTUN:
		return "-i"
	}
	return "-g"
}
