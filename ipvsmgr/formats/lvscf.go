package formats

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Piranha's lvs.cf: `key = value` lines at the top level (the director
// pair, heartbeat, network), `virtual NAME { ... }` blocks with `server NAME
// { ... }` blocks inside, and `failover NAME { ... }` blocks. Values are
// kept as written (quotes included) when they go to State.Imported, so that
// an export writes them back unchanged.

// lvsGlobalOrder is the order Piranha's GUI writes the top-level keys in;
// export follows it.
var lvsGlobalOrder = []string{
	"serial_no", "primary", "primary_private", "primary_shared", "service", "rsh_command",
	"backup_active", "backup", "backup_private", "backup_shared", "heartbeat", "heartbeat_port",
	"keepalive", "deadtime", "network", "nat_router", "nat_nmask", "reservation_conflict_action",
	"debug_level", "active_cmd", "inactive_cmd", "monitor_links", "syncdaemon", "syncd_iface", "syncd_id", "vrrp_vrid",
	"tcp_timeout", "tcpfin_timeout", "udp_timeout",
}

var lvsNetworks = map[string]string{"direct": "dr", "nat": "nat", "tunnel": "tun"}

// lvsBlock is an open block while parsing.
type lvsBlock struct {
	kind, name string
	line       int
	svc        int // index of the service (virtual and server blocks)
	rs         int // index of the server (server blocks)
	pmask      *ipvsmgr.ImportedKey
	port       *ipvsmgr.ImportedKey // of a fwmark virtual, kept until the end of the block
	protocol   *ipvsmgr.ImportedKey
	hasAddress bool
	// health holds nanny's keys (send, expect, use_regex, send_program,
	// timeout, reentry, quiesce_server) until the block closes: the check
	// they make depends on the service's protocol.
	health map[string]*ipvsmgr.ImportedKey
}

func (b *lvsBlock) scope(parent *lvsBlock) string {
	if b.kind == "server" && parent != nil {
		return parent.scope(nil) + " server " + b.name
	}
	return b.kind + " " + b.name
}

type lvsParser struct {
	im    *importer
	st    *ipvsmgr.State
	lines lineIndex
	line  int
	stack []*lvsBlock
	// pending is a block header whose { is on a later line.
	pending *lvsBlock
}

func (p *lvsParser) errf(format string, args ...any) error {
	return &ParseError{Format: FormatLVSCF, Line: p.line, Msg: fmt.Sprintf(format, args...)}
}

func (p *lvsParser) top() *lvsBlock {
	if len(p.stack) == 0 {
		return nil
	}
	return p.stack[len(p.stack)-1]
}

func (p *lvsParser) keep(scope, key, value string) {
	p.st.Imported = append(p.st.Imported, ipvsmgr.ImportedKey{Source: FormatLVSCF, Line: p.line, Scope: scope, Key: key, Value: value})
}

func parseLVSCF(data []byte, im *importer) (*ipvsmgr.State, lineIndex, error) {
	p := &lvsParser{im: im, st: &ipvsmgr.State{Services: []ipvsmgr.Service{}}, lines: lineIndex{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), maxDocument)
	for sc.Scan() {
		p.line++
		if err := p.parseLine(strings.TrimSpace(sc.Text())); err != nil {
			return nil, nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, &ParseError{Format: FormatLVSCF, Line: p.line + 1, Msg: fmt.Sprintf("read: %v", err)}
	}
	if p.pending != nil {
		p.line = p.pending.line
		return nil, nil, p.errf("%s %s: no { follows", p.pending.kind, p.pending.name)
	}
	if b := p.top(); b != nil {
		p.line = b.line
		return nil, nil, p.errf("%s %s: block is not closed (missing })", b.kind, b.name)
	}
	if err := p.mapRedundancy(); err != nil {
		return nil, nil, err
	}
	return p.st, p.lines, nil
}

func (p *lvsParser) parseLine(text string) error {
	text = strings.TrimSpace(stripComment(text))
	if text == "" {
		return nil
	}
	if p.pending != nil {
		if text != "{" {
			return p.errf("want { to open %s %s (line %d)", p.pending.kind, p.pending.name, p.pending.line)
		}
		b := p.pending
		p.pending = nil
		return p.open(b)
	}
	if text == "}" {
		return p.close()
	}
	words := strings.Fields(text)
	switch words[0] {
	case "virtual", "server", "failover":
		if strings.Contains(text, "=") {
			break // `server = ...` is not a block
		}
		b := &lvsBlock{kind: words[0], line: p.line}
		switch {
		case len(words) == 3 && words[2] == "{":
			b.name = words[1]
			return p.open(b)
		case len(words) == 2 && words[1] != "{":
			b.name = words[1]
			p.pending = b
			return nil
		}
		return p.errf("want `%s NAME {`, got %q", words[0], text)
	}
	key, value, ok := strings.Cut(text, "=")
	if ok {
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	} else {
		// Piranha's reader wants `key = value`; `key value` is read as
		// ipvsctl always has, and the key is still checked below.
		key = words[0]
		value = strings.TrimSpace(text[len(key):])
	}
	if key == "" || strings.ContainsAny(key, "{}") || strings.IndexFunc(key, unicode.IsSpace) >= 0 {
		return p.errf("want KEY = VALUE, got %q", text)
	}
	b := p.top()
	if ok, err := p.knownKey(b, key); !ok {
		return err
	}
	switch {
	case b == nil:
		return p.global(key, value)
	case b.kind == "virtual":
		return p.virtualKey(b, key, value)
	case b.kind == "server":
		return p.serverKey(b, key, value)
	}
	p.keep(b.scope(nil), key, value)
	return nil
}

func (p *lvsParser) open(b *lvsBlock) error {
	parent := p.top()
	switch {
	case b.kind == "server" && (parent == nil || parent.kind != "virtual"):
		return p.errf("server %s is outside a virtual block", b.name)
	case b.kind != "server" && parent != nil:
		return p.errf("%s %s is inside %s %s (line %d): close that block first", b.kind, b.name, parent.kind, parent.name, parent.line)
	}
	b.line = p.line
	switch b.kind {
	case "virtual":
		p.im.declare(1, 0)
		b.svc = len(p.st.Services)
		p.st.Services = append(p.st.Services, ipvsmgr.Service{Name: b.name, Servers: []ipvsmgr.Server{}})
		p.lines[fmt.Sprintf("services[%d]", b.svc)] = p.line
	case "server":
		p.im.declare(0, 1)
		b.svc = parent.svc
		svc := &p.st.Services[b.svc]
		b.rs = len(svc.Servers)
		svc.Servers = append(svc.Servers, ipvsmgr.Server{Name: b.name})
		p.lines[fmt.Sprintf("services[%d].servers[%d]", b.svc, b.rs)] = p.line
	}
	p.stack = append(p.stack, b)
	return nil
}

func (p *lvsParser) close() (err error) {
	b := p.top()
	if b == nil {
		return p.errf("} closes no block")
	}
	p.stack = p.stack[:len(p.stack)-1]
	switch b.kind {
	case "virtual":
		svc := &p.st.Services[b.svc]
		if !b.hasAddress {
			p.line = b.line
			return p.errf("virtual %s has no address", b.name)
		}
		if b.pmask != nil {
			if svc.Persistence > 0 {
				svc.PersistenceNetmask = unquote(b.pmask.Value)
				p.lines[fmt.Sprintf("services[%d].persistence_netmask", b.svc)] = b.pmask.Line
			} else {
				// Piranha writes a pmask even when persistence is off; it means nothing then.
				p.st.Imported = append(p.st.Imported, *b.pmask)
			}
		}
		defer func() {
			if err == nil {
				err = p.nannyCheck(svc, b)
			}
		}()
		for _, k := range []*ipvsmgr.ImportedKey{b.port, b.protocol} {
			if k == nil {
				continue
			}
			if svc.FWMark > 0 {
				// A fwmark service is keyed by its mark; Piranha's port is
				// what nanny checks.
				p.st.Imported = append(p.st.Imported, *k)
				continue
			}
			if err := p.applyServiceKey(svc, b, k); err != nil {
				return err
			}
		}
	case "server":
		svc := &p.st.Services[b.svc]
		if svc.Servers[b.rs].Address == "" {
			p.line = b.line
			return p.errf("server %s has no address", b.name)
		}
	}
	return nil
}

// applyServiceKey sets the port or protocol of a service that is not a
// fwmark one (known only once its block closes).
func (p *lvsParser) applyServiceKey(svc *ipvsmgr.Service, b *lvsBlock, k *ipvsmgr.ImportedKey) error {
	v := unquote(k.Value)
	line := p.line
	defer func() { p.line = line }()
	p.line = k.Line
	switch k.Key {
	case "port":
		n, err := strconv.Atoi(v)
		if err != nil {
			// lvsconfig.c's getPort: getservbyname(name, "tcp"), whatever
			// the virtual's protocol (a UDP-only name is not found).
			var ok bool
			if n, ok = p.im.servicePort(v, "tcp"); !ok {
				return p.errf("port %q: neither a number nor a service name of /etc/services (tcp)", v)
			}
			p.im.warnf(k.Line, "port %s resolved to %d (tcp)", v, n)
		}
		if n < 0 || n > 65535 || n == 0 && svc.Persistence == 0 {
			return p.errf("port %q: want a number 1..65535 (0, all ports, only with persistent)", v)
		}
		svc.Port = n
		p.lines[fmt.Sprintf("services[%d].port", b.svc)] = k.Line
	case "protocol":
		proto := strings.ToLower(v)
		if proto != "tcp" && proto != "udp" {
			return p.errf("protocol %q: want tcp or udp", v)
		}
		svc.Protocol = proto
		p.lines[fmt.Sprintf("services[%d].protocol", b.svc)] = k.Line
	}
	return nil
}

func (p *lvsParser) global(key, value string) error {
	s := &p.st.Settings
	switch key {
	case "network":
		fwd, ok := lvsNetworks[unquote(value)]
		if !ok {
			return p.errf("network %q: want direct, nat or tunnel", value)
		}
		s.Network = fwd
		p.lines["settings.network"] = p.line
	case "tcp_timeout", "tcpfin_timeout", "udp_timeout":
		n, err := strconv.Atoi(unquote(value))
		if err != nil || n < 0 {
			return p.errf("%s %q: want a number of seconds", key, value)
		}
		*map[string]*int{"tcp_timeout": &s.TCPTimeout, "tcpfin_timeout": &s.TCPFinTimeout, "udp_timeout": &s.UDPTimeout}[key] = n
		p.lines["settings."+key] = p.line
	default:
		p.keep("", key, value)
	}
	return nil
}

func (p *lvsParser) virtualKey(b *lvsBlock, key, value string) error {
	svc := &p.st.Services[b.svc]
	field := func(f string) { p.lines[fmt.Sprintf("services[%d].%s", b.svc, f)] = p.line }
	v := unquote(value)
	switch key {
	case "address":
		words := strings.Fields(v)
		if len(words) == 0 || len(words) > 2 {
			return p.errf("address %q: want \"VIP DEVICE:ALIAS\"", value)
		}
		a, err := p.im.hostAddr(p.line, words[0])
		if err != nil {
			return p.errf("address %q: %v", value, err)
		}
		svc.Address = a.Unmap().String()
		field("address")
		if len(words) == 2 {
			// ipvsctl adds the VIP to the device itself; the alias label
			// was how ifconfig did it, kept for the way back.
			dev, alias, hasAlias := strings.Cut(words[1], ":")
			svc.Interface = dev
			field("interface")
			if hasAlias {
				p.keep(b.scope(nil), lvsAliasKey, alias)
			}
		}
		b.hasAddress = true
	case "active":
		on, err := lvsActive(v)
		if err != nil {
			return p.errf("active %q: %v", value, err)
		}
		if !on {
			svc.Enabled = boolPtr(false)
		}
	case "fwmark":
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return p.errf("fwmark %q: want a number 0..4294967295", value)
		}
		svc.FWMark = uint32(n)
		field("fwmark")
	case "port", "protocol":
		k := &ipvsmgr.ImportedKey{Source: FormatLVSCF, Line: p.line, Scope: b.scope(nil), Key: key, Value: value}
		if key == "port" {
			b.port = k
		} else {
			b.protocol = k
		}
	case "scheduler":
		svc.Scheduler = v
		field("scheduler")
	case "persistent":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return p.errf("persistent %q: want a number of seconds", value)
		}
		svc.Persistence = n
		field("persistence")
	case "pmask":
		b.pmask = &ipvsmgr.ImportedKey{Source: FormatLVSCF, Line: p.line, Scope: b.scope(nil), Key: key, Value: value}
	case "send", "expect", "use_regex", "send_program", "timeout", "reentry", "quiesce_server":
		if b.health == nil {
			b.health = map[string]*ipvsmgr.ImportedKey{}
		}
		if b.health[key] != nil {
			return p.errf("%s given twice in virtual %s (line %d)", key, b.name, b.health[key].Line)
		}
		b.health[key] = &ipvsmgr.ImportedKey{Source: FormatLVSCF, Line: p.line, Scope: b.scope(nil), Key: key, Value: value}
	default:
		// sorry_server, load_monitor, vip_nmask... (knownKey let only
		// Piranha's keys through)
		p.keep(b.scope(nil), key, value)
	}
	return nil
}

func (p *lvsParser) serverKey(b *lvsBlock, key, value string) error {
	parent := p.stack[len(p.stack)-2]
	rs := &p.st.Services[b.svc].Servers[b.rs]
	field := func(f string) { p.lines[fmt.Sprintf("services[%d].servers[%d].%s", b.svc, b.rs, f)] = p.line }
	v := unquote(value)
	switch key {
	case "address":
		a, err := p.im.hostAddr(p.line, v)
		if err != nil {
			return p.errf("address %q: %v", value, err)
		}
		rs.Address = a.Unmap().String()
		field("address")
	case "active":
		on, err := lvsActive(v)
		if err != nil {
			return p.errf("active %q: %v", value, err)
		}
		if !on {
			rs.Enabled = boolPtr(false)
		}
	case "weight":
		n, err := strconv.Atoi(v)
		if err != nil {
			return p.errf("weight %q: want a number 0..65535", value)
		}
		rs.Weight = intPtr(n)
		field("weight")
	case "port":
		n, err := strconv.Atoi(v)
		if err != nil {
			// lvsconfig.c reads a port through getservbyname(name, "tcp").
			var ok bool
			if n, ok = p.im.servicePort(v, "tcp"); !ok {
				return p.errf("port %q: neither a number nor a service name of /etc/services", value)
			}
			p.im.warnf(p.line, "port %s resolved to %d (tcp)", v, n)
		}
		if n < 0 || n > 65535 {
			return p.errf("port %q: want a number 0..65535", value)
		}
		rs.Port = n
		field("port")
	default:
		p.keep(b.scope(parent), key, value)
	}
	return nil
}

func lvsActive(v string) (bool, error) {
	switch v {
	case "1":
		return true, nil
	case "0":
		return false, nil
	}
	return false, fmt.Errorf("want 0 or 1")
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// exportLVSCF writes st as Piranha's lvs.cf, with the imported keys of
// lvs.cf origin back in their blocks. What lvs.cf cannot say (per-service
// forwarding methods, scheduler flags, thresholds, sctp, fwmark match rules)
// is an error rather than left out.
func exportLVSCF(st *ipvsmgr.State, w io.Writer) error {
	if _, err := ipvsmgr.Compile(st); err != nil {
		return err
	}
	network, err := lvsNetwork(st)
	if err != nil {
		return err
	}
	scoped := map[string][]ipvsmgr.ImportedKey{}
	var failovers []string
	for _, k := range st.Imported {
		if k.Source != FormatLVSCF {
			continue
		}
		if strings.HasPrefix(k.Scope, "failover ") && len(scoped[k.Scope]) == 0 {
			failovers = append(failovers, k.Scope)
		}
		scoped[k.Scope] = append(scoped[k.Scope], k)
	}
	red, weak, err := lvsRedundancyValues(st.Settings.Redundancy)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	writeLVSGlobals(bw, st, network, scoped[""], red, weak)
	for _, scope := range failovers {
		fmt.Fprintf(bw, "%s {\n", scope)
		for _, k := range scoped[scope] {
			writeKV(bw, "    ", k.Key, k.Value)
		}
		bw.WriteString("}\n")
	}
	vipAliases := newLVSAliases(st, scoped)
	vsNames := blockNames(len(st.Services), func(i int) string { return st.Services[i].Name }, "vs")
	for i := range st.Services {
		writeLVSVirtual(bw, &st.Services[i], "virtual "+vsNames[i], scoped, vipAliases)
	}
	return bw.Flush()
}

// writeLVSGlobals writes the global keys in Piranha's order: the
// redundancy's, the network and timeouts, then the imported ones.
func writeLVSGlobals(bw *bufio.Writer, st *ipvsmgr.State, network string, globals []ipvsmgr.ImportedKey, red map[string]string, weak []string) {
	imported := func(key string) bool {
		return slices.ContainsFunc(globals, func(k ipvsmgr.ImportedKey) bool { return k.Key == key })
	}
	for _, key := range lvsGlobalOrder {
		if v, ok := red[key]; ok && !(slices.Contains(weak, key) && imported(key)) {
			writeKV(bw, "", key, v)
			continue
		}
		switch key {
		case "network":
			fmt.Fprintf(bw, "network = %s\n", map[string]string{"dr": "direct", "nat": "nat", "tun": "tunnel"}[network])
		case "tcp_timeout", "tcpfin_timeout", "udp_timeout":
			n := map[string]int{"tcp_timeout": st.Settings.TCPTimeout, "tcpfin_timeout": st.Settings.TCPFinTimeout, "udp_timeout": st.Settings.UDPTimeout}[key]
			if n != 0 {
				fmt.Fprintf(bw, "%s = %d\n", key, n)
			}
		case "service":
			if !imported("service") {
				bw.WriteString("service = lvs\n")
			}
			fallthrough
		default:
			if _, ok := red[key]; ok && !slices.Contains(weak, key) {
				continue // settings.redundancy says it
			}
			for _, k := range globals {
				if k.Key == key {
					writeKV(bw, "", k.Key, k.Value)
				}
			}
		}
	}
	for _, k := range globals {
		if !slices.Contains(lvsGlobalOrder, k.Key) {
			writeKV(bw, "", k.Key, k.Value)
		}
	}
}

// writeLVSVirtual writes one virtual block with its server blocks and the
// keys imported in their scopes.
func writeLVSVirtual(bw *bufio.Writer, svc *ipvsmgr.Service, scope string, scoped map[string][]ipvsmgr.ImportedKey, vipAliases *lvsAliases) {
	fmt.Fprintf(bw, "%s {\n", scope)
	writeKV(bw, "    ", "active", activeValue(svc.IsEnabled()))
	writeKV(bw, "    ", "address", vipAliases.address(svc, scoped[scope]))
	if svc.FWMark > 0 {
		writeKV(bw, "    ", "fwmark", strconv.FormatUint(uint64(svc.FWMark), 10))
	} else {
		writeKV(bw, "    ", "port", strconv.Itoa(svc.Port))
		writeKV(bw, "    ", "protocol", cmp.Or(svc.Protocol, "tcp"))
	}
	writeKV(bw, "    ", "scheduler", cmp.Or(svc.Scheduler, "wlc"))
	if svc.Persistence > 0 {
		writeKV(bw, "    ", "persistent", strconv.Itoa(svc.Persistence))
		if svc.PersistenceNetmask != "" {
			writeKV(bw, "    ", "pmask", svc.PersistenceNetmask)
		}
	}
	writeLVSCheck(bw, svc, scoped[scope])
	for _, k := range scoped[scope] {
		if k.Key != lvsAliasKey && k.Key != lvsReentryKey {
			writeKV(bw, "    ", k.Key, k.Value)
		}
	}
	rsNames := blockNames(len(svc.Servers), func(j int) string { return svc.Servers[j].Name }, "rs")
	for j := range svc.Servers {
		rs := &svc.Servers[j]
		fmt.Fprintf(bw, "    server %s {\n", rsNames[j])
		writeKV(bw, "        ", "address", rs.Address)
		writeKV(bw, "        ", "active", activeValue(rs.IsEnabled()))
		if rs.Port != 0 {
			writeKV(bw, "        ", "port", strconv.Itoa(rs.Port))
		}
		writeKV(bw, "        ", "weight", strconv.Itoa(rs.EffectiveWeight()))
		for _, k := range scoped[scope+" server "+rsNames[j]] {
			writeKV(bw, "        ", k.Key, k.Value)
		}
		bw.WriteString("    }\n")
	}
	bw.WriteString("}\n")
}

// blockNames names every block: its own name, or PREFIX and a number that
// no other block has (lvs.cf blocks need a name).
func blockNames(n int, name func(int) string, prefix string) []string {
	used := map[string]bool{}
	for i := range n {
		used[name(i)] = true
	}
	names := make([]string, n)
	next := 1
	for i := range n {
		if names[i] = name(i); names[i] != "" {
			continue
		}
		for used[prefix+strconv.Itoa(next)] {
			next++
		}
		names[i] = prefix + strconv.Itoa(next)
		used[names[i]] = true
	}
	return names
}

func badBlockName(name string) bool {
	return strings.ContainsAny(name, "{}=\"#") || strings.IndexFunc(name, unicode.IsSpace) >= 0
}

func activeValue(on bool) string {
	if on {
		return "1"
	}
	return "0"
}

func writeKV(w *bufio.Writer, indent, key, value string) {
	w.WriteString(indent + key + " = " + value + "\n")
}

// lvsNetwork is the one forwarding method lvs.cf can say, or an error naming
// every service and server that uses another, with every other thing lvs.cf
// has no way to hold.
func lvsNetwork(st *ipvsmgr.State) (string, error) {
	network := st.Settings.Network
	if network == "" {
		for i := range st.Services {
			if f := st.Services[i].Forwarding; f != "" {
				network = f
				break
			}
		}
	}
	if network == "" {
		network = "dr"
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for i := range st.Services {
		svc := &st.Services[i]
		f := fmt.Sprintf("services[%d]", i)
		if svc.Forwarding != "" && svc.Forwarding != network {
			bad("%s.forwarding: %q differs from the director's network %q (lvs.cf has one forwarding method)", f, svc.Forwarding, network)
		}
		if svc.Protocol == "sctp" {
			bad("%s.protocol: lvs.cf has no sctp", f)
		}
		if len(svc.SchedulerFlags) > 0 {
			bad("%s.scheduler_flags: lvs.cf has no scheduler flags", f)
		}
		if svc.OnePacket {
			bad("%s.one_packet: lvs.cf has no one-packet scheduling", f)
		}
		if len(svc.Match) > 0 {
			bad("%s.match: lvs.cf does not mark packets (Piranha left fwmark rules to iptables)", f)
		}
		if badBlockName(svc.Name) {
			bad("%s.name: %q cannot be an lvs.cf block name", f, svc.Name)
		}
		lvsCheckProblems(svc, f, bad)
		for j := range svc.Servers {
			rs := &svc.Servers[j]
			rf := fmt.Sprintf("%s.servers[%d]", f, j)
			if rs.Forwarding != "" && rs.Forwarding != network {
				bad("%s.forwarding: %q differs from the director's network %q (lvs.cf has one forwarding method)", rf, rs.Forwarding, network)
			}
			if rs.UpperThreshold != 0 || rs.LowerThreshold != 0 {
				bad("%s: lvs.cf has no connection thresholds", rf)
			}
			if badBlockName(rs.Name) {
				bad("%s.name: %q cannot be an lvs.cf block name", rf, rs.Name)
			}
		}
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("lvs.cf cannot express: %s", strings.Join(problems, "; "))
	}
	return network, nil
}
