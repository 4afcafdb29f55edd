package formats

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// A virtual_server block is read once (kaVS) and then made into one service
// per target: its own address and port or fwmark, or each member of its
// virtual_server_group, all sharing its real servers and checks.

// kaVSKeywords are the statements keepalived knows in a virtual_server
// (check_parser.c); the unmapped ones are kept.
var kaVSKeywords = words("ip_family retry delay_before_retry warmup connect_timeout delay_loop inhibit_on_failure " +
	"lb_algo lvs_sched hashed ops flag-1 flag-2 flag-3 sh-port sh-fallback mh-port mh-fallback lb_kind lvs_method " +
	"persistence_engine persistence_timeout persistence_granularity protocol ha_suspend smtp_alert virtualhost " +
	"snmp_name alpha omega quorum_up quorum_down quorum hysteresis weight sorry_server sorry_server_inhibit " +
	"sorry_server_lvs_method real_server lvs_flags")

// kaLegacyVSKeywords are keepalived 1.x keywords of a virtual_server that
// keepalived 2 no longer knows ("Unknown keyword") and runs without; real
// files still carry them: ignored, with a warning.
var kaLegacyVSKeywords = words("nat_mask lvs_id")

// kaRSKeywords, likewise in a real_server, besides its checker blocks.
var kaRSKeywords = words("weight lvs_method uthreshold lthreshold inhibit_on_failure notify_up notify_down alpha " +
	"retry delay_before_retry warmup connect_timeout delay_loop smtp_alert virtualhost snmp_name")

// kaTarget is what one service of a virtual_server is keyed by.
type kaTarget struct {
	addr   string // "" for a fwmark
	port   int
	fwmark uint32
	line   int
}

func (t kaTarget) String() string {
	if t.fwmark > 0 {
		return fmt.Sprintf("FWM %d", t.fwmark)
	}
	return netip.AddrPortFrom(netip.MustParseAddr(t.addr), uint16(t.port)).String()
}

// kaVS is a virtual_server block as read, before it is made into services.
type kaVS struct {
	n        *kaNode
	scope    string
	group    *kaGroup
	svc      ipvsmgr.Service // the settings every target shares
	fields   map[string]int  // field -> line, for the settings set
	weight   int             // the servers' default weight
	proto    *kaNode
	sorry    *kaNode
	quorum   *kaNode
	hyst     *kaNode
	hystKept bool // the hysteresis is in imported (once for the block)
	servers  []*kaRS
	checks   kaCheckSettings
	tunnel   kaTunnel // of lvs_method TUN, for the servers that inherit it
}

// kaRS is a real_server block as read.
type kaRS struct {
	n      *kaNode
	scope  string
	rs     ipvsmgr.Server
	fields map[string]int
	check  *kaCheck
	weight bool // weight was written
	// kept is the run of State.Imported this block's kept keys fill
	// (real servers are read one after another), dropped with the server
	// when it duplicates an earlier one: keepalived frees the whole rs.
	kept [2]int
}

func (k *kaImporter) virtualServer(n *kaNode) error {
	if !n.block {
		return k.errf(n.line, "virtual_server without a { ... } block")
	}
	targets, group, err := k.vsTargets(n)
	if err != nil {
		return err
	}
	v := &kaVS{n: n, scope: n.header(), group: group, fields: map[string]int{}, weight: 1, svc: ipvsmgr.Service{Servers: []ipvsmgr.Server{}}}
	kept := len(k.st.Imported)
	for _, c := range n.children {
		if err := k.vsStatement(v, c); err != nil {
			return err
		}
	}
	for _, c := range n.children {
		if c.word(0) == "real_server" {
			r, err := k.realServer(v, c)
			if err != nil {
				return err
			}
			v.servers = append(v.servers, r)
		}
	}
	k.vsDefaults(v, targets)
	for _, t := range targets {
		if err := k.service(v, t); err != nil {
			return err
		}
	}
	if len(v.servers) == 0 {
		// keepalived ignores a virtual_server with no real servers whole
		// (service warns): the keys kept from its block go with it.
		k.st.Imported = k.st.Imported[:kept]
	}
	return nil
}

// vsTargets reads the virtual_server line as keepalived's alloc_vs does:
// `group NAME`, `fwmark MARK` or `ADDRESS [PORT]` (no port, or 0: all
// ports); words after those two are ignored with a warning.
func (k *kaImporter) vsTargets(n *kaNode) ([]kaTarget, *kaGroup, error) {
	if len(n.words) < 2 {
		return nil, nil, k.errf(n.line, "want `virtual_server ADDRESS [PORT] {`, `virtual_server fwmark MARK {` or `virtual_server group NAME {`")
	}
	if len(n.words) > 3 {
		k.warnf(n.line, "virtual_server: %q after %s %s ignored, as keepalived does", strings.Join(wordTexts(n.words[3:]), " "), n.word(1), n.word(2))
	}
	switch n.word(1) {
	case "group":
		g := k.groups[n.word(2)]
		if g == nil {
			return nil, nil, k.errf(n.line, "virtual_server group %q: no virtual_server_group of that name", n.word(2))
		}
		return g.targets, g, nil
	case "fwmark":
		m, err := strconv.ParseUint(n.word(2), 10, 32)
		if err != nil || m == 0 {
			return nil, nil, k.errf(n.line, "fwmark %q: want a number 1..4294967295", n.word(2))
		}
		return []kaTarget{{fwmark: uint32(m), line: n.line}}, nil, nil
	}
	a, err := netip.ParseAddr(n.word(1))
	if err != nil {
		return nil, nil, k.errf(n.line, "%q is not an IP address", n.word(1))
	}
	port := 0
	if len(n.words) > 2 {
		if port, err = kaPort(n.word(2)); err != nil {
			return nil, nil, k.errf(n.line, "port %q: %v", n.word(2), err)
		}
	}
	return []kaTarget{{addr: a.Unmap().String(), port: port, line: n.line}}, nil, nil
}

func wordTexts(ws []kaToken) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.text
	}
	return out
}

// kaPort reads a port as inet_stosockaddr does: a number 0..65535.
func kaPort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 0 || p > 65535 {
		return 0, fmt.Errorf("want a number 0..65535")
	}
	return p, nil
}

// script reads a command line (misc_path, quorum_up, quorum_down) as
// keepalived 2.3.2 and later read it (kaScript), with a warning where the
// earlier ones, such as Debian's 2.2.7, read it otherwise.
func (k *kaImporter) script(c *kaNode) (argv, after []string, err error) {
	argv, after, err = kaScript(c.rest())
	old, oldAfter, oldErr := kaScriptLegacy(c.rest())
	if (err == nil) == (oldErr == nil) && slices.Equal(argv, old) && slices.Equal(after, oldAfter) {
		return argv, after, err
	}
	reading := func(argv, after []string, err error) string {
		if err != nil {
			return "nothing (" + err.Error() + ")"
		}
		if len(after) > 0 {
			return fmt.Sprintf("%q, then %q", argv, after)
		}
		return fmt.Sprintf("%q", argv)
	}
	k.warnf(c.line, "%s: keepalived 2.3.2 and later read %s (as ipvsctl does), earlier ones such as Debian's 2.2.7 read %s: "+
		"a backslash in the line is read otherwise since 2.3.2", c.word(0), reading(argv, after, err), reading(old, oldAfter, oldErr))
	return argv, after, err
}

// vsStatement takes one statement of a virtual_server block (real servers
// are read after all of them, since they inherit the checker settings).
func (k *kaImporter) vsStatement(v *kaVS, c *kaNode) error {
	kw := c.word(0)
	if kaLegacyVSKeywords()[kw] && !c.block {
		k.warnf(c.line, "%s: a keepalived 1.x keyword keepalived 2 does not know - ignored, as keepalived ignores it", kw)
		k.keep(v.scope, c)
		return nil
	}
	if !kaVSKeywords()[kw] || (c.block && kw != "real_server") {
		return k.unknownKeyword(v.scope, c)
	}
	set := func(f string) { v.fields[f] = c.line }
	switch kw {
	case "real_server":
	case "lb_algo", "lvs_sched":
		val, err := k.arg(c)
		if err != nil {
			return err
		}
		v.svc.Scheduler = val
		set("scheduler")
	case "lb_kind", "lvs_method":
		fwd, tun, err := k.forwarding(c)
		if err != nil {
			return err
		}
		v.svc.Forwarding, v.tunnel = fwd, tun
		set("forwarding")
	case "persistence_timeout":
		return k.vsPersistence(v, c)
	case "persistence_granularity":
		val, err := k.arg(c)
		if err != nil {
			return err
		}
		v.svc.PersistenceNetmask = val
		set("persistence_netmask")
	case "protocol":
		v.proto = c
	case "ops":
		v.svc.OnePacket = true
		set("one_packet")
	case "sh-fallback", "mh-fallback", "flag-1", "sh-port", "mh-port", "flag-2", "lvs_flags":
		if err := k.schedFlags(v, c); err != nil {
			return err
		}
		set("scheduler_flags")
	case "weight":
		return k.vsWeight(v, c)
	case "sorry_server":
		v.sorry = c
	case "quorum":
		v.quorum = c
	case "hysteresis":
		v.hyst = c // mapped with the quorum (keepalived_fix.go), else kept
	case "quorum_up", "quorum_down":
		k.vsQuorumProgram(v, c)
	case "alpha":
		v.checks.alpha = true
	case "smtp_alert":
		b, ok := kaTrue(c)
		if !ok {
			k.keep(v.scope, c)
			return nil
		}
		v.svc.SMTPAlert = &b
		set(kw)
	default:
		if !v.checks.setting(c) {
			// omega, ha_suspend, quorum_up, delay_before_retry...
			k.keep(v.scope, c)
		}
	}
	return nil
}

// vsPersistence is persistence_timeout: keepalived's default without a
// number of seconds.
func (k *kaImporter) vsPersistence(v *kaVS, c *kaNode) error {
	v.svc.Persistence = defaultPersistence
	if len(c.words) > 1 {
		p, err := strconv.Atoi(c.word(1))
		if err != nil || p < 0 {
			return k.errf(c.line, "persistence_timeout %q: want a number of seconds", c.word(1))
		}
		v.svc.Persistence = p
	}
	v.fields["persistence"] = c.line
	return nil
}

// vsWeight is the weight the virtual server's real servers inherit.
func (k *kaImporter) vsWeight(v *kaVS, c *kaNode) error {
	w, err := k.arg(c)
	if err != nil {
		return err
	}
	if v.weight, err = strconv.Atoi(w); err != nil || v.weight < 0 {
		return k.errf(c.line, "weight %q: want a number", w)
	}
	return nil
}

// vsQuorumProgram is quorum_up or quorum_down; one with a user to run it
// as (`"prog args" user`), or no program, is kept, not run as root by
// mistake.
func (k *kaImporter) vsQuorumProgram(v *kaVS, c *kaNode) {
	cmd, user, err := k.script(c)
	if err != nil || len(user) > 0 {
		k.keep(v.scope, c)
		return
	}
	if c.word(0) == "quorum_up" {
		v.svc.QuorumUp = cmd
	} else {
		v.svc.QuorumDown = cmd
	}
	v.fields[c.word(0)] = c.line
}

// kaTunnel is what `lvs_method TUN type ...` says.
type kaTunnel struct {
	typ, checksum string
	port          int
}

// forwarding reads `lvs_method DR|NAT|TUN [type ipip|gue port N|gre
// [nocsum|csum|remcsum]]` as svr_forwarding_handler does.
func (k *kaImporter) forwarding(c *kaNode) (string, kaTunnel, error) {
	var tun kaTunnel
	if len(c.words) < 2 {
		return "", tun, k.errf(c.line, "%s: want DR, NAT or TUN", c.word(0))
	}
	v := c.word(1)
	fwd, ok := kaForwarding[strings.ToUpper(v)]
	if !ok {
		return "", tun, k.errf(c.line, "%s %q: want DR, NAT or TUN", c.word(0), v)
	}
	if len(c.words) > 2 && fwd != "tun" {
		return "", tun, k.errf(c.line, "%s takes one value, got %d", c.word(0), len(c.words)-1)
	}
	for i := 2; i < len(c.words); i++ {
		switch w := c.word(i); w {
		case "type":
			if i++; i >= len(c.words) {
				return "", tun, k.errf(c.line, "lvs_method TUN type: want ipip, gue or gre")
			}
			tun.typ = c.word(i)
		case "port":
			if i++; i >= len(c.words) {
				return "", tun, k.errf(c.line, "lvs_method TUN port: want a UDP port")
			}
			p, err := strconv.Atoi(c.word(i))
			if err != nil {
				return "", tun, k.errf(c.line, "lvs_method TUN port %q is not a number", c.word(i))
			}
			tun.port = p
		case "nocsum", "csum", "remcsum":
			tun.checksum = w
		default:
			return "", tun, k.errf(c.line, "lvs_method TUN: %q is not type, port, nocsum, csum or remcsum", w)
		}
	}
	if tun.typ == "ipip" {
		tun.typ = ""
	}
	if tun.checksum == "nocsum" {
		tun.checksum = ""
	}
	return fwd, tun, nil
}

func (k *kaImporter) schedFlags(v *kaVS, c *kaNode) error {
	flags := []string{c.word(0)}
	if c.word(0) == "lvs_flags" {
		flags = wordTexts(c.words[1:])
	}
	for _, f := range flags {
		switch f {
		case "sh-fallback", "mh-fallback", "flag-1":
			v.svc.SchedulerFlags = append(v.svc.SchedulerFlags, "fallback")
		case "sh-port", "mh-port", "flag-2":
			v.svc.SchedulerFlags = append(v.svc.SchedulerFlags, "port")
		case "ops", "onepacket":
			v.svc.OnePacket = true
		default:
			return k.errf(c.line, "%q is not a scheduler flag (want sh-fallback, sh-port, mh-fallback or mh-port)", f)
		}
	}
	return nil
}

// realServer reads a real_server block as alloc_rs does: `ADDRESS [PORT]`,
// the port 0 when not written; a real_server with no block is refused.
func (k *kaImporter) realServer(v *kaVS, n *kaNode) (*kaRS, error) {
	if !n.block {
		// keepalived's parser reports "Missing '{' at beginning of
		// configuration block" (CONFIG_MISSING_BOB) and reads the lines
		// after it as the server's; refused, as a virtual_server is.
		return nil, k.errf(n.line, "real_server without a { ... } block")
	}
	if len(n.words) < 2 || len(n.words) > 3 {
		return nil, k.errf(n.line, "want `real_server ADDRESS [PORT] {`")
	}
	a, err := netip.ParseAddr(n.word(1))
	if err != nil {
		return nil, k.errf(n.line, "real server %q is not an IP address", n.word(1))
	}
	r := &kaRS{n: n, scope: v.scope + " " + n.header(), rs: ipvsmgr.Server{Address: a.Unmap().String()}, fields: map[string]int{}}
	if len(n.words) == 3 {
		if r.rs.Port, err = kaPort(n.word(2)); err != nil {
			return nil, k.errf(n.line, "real server port %q: %v", n.word(2), err)
		}
		r.fields["port"] = n.line
	}
	r.kept[0] = len(k.st.Imported)
	defer func() { r.kept[1] = len(k.st.Imported) }()
	checks := v.checks
	var checkers []*kaNode
	for _, c := range n.children {
		if err := k.rsStatement(r, c, &checks, &checkers); err != nil {
			return nil, err
		}
	}
	// keepalived requires every checker of a server to pass; a server has
	// one check here, the first that maps, and the others are kept.
	for _, c := range checkers {
		if r.check == nil {
			kept := len(k.st.Imported)
			ch, err := k.checker(r.scope, c, checks)
			if err != nil {
				return nil, err
			}
			if ch == kaDropped {
				// keepalived frees a checker it ignores whole: the keys
				// kept from its block go with it.
				k.st.Imported = k.st.Imported[:kept]
				continue
			}
			if r.check = ch; ch != nil {
				continue
			}
			k.st.Imported = k.st.Imported[:kept] // the block is kept whole
		}
		k.keep(r.scope, c)
	}
	return r, nil
}

func (k *kaImporter) rsStatement(r *kaRS, c *kaNode, checks *kaCheckSettings, checkers *[]*kaNode) error {
	kw := c.word(0)
	if _, ok := kaCheckers[kw]; ok && c.block {
		*checkers = append(*checkers, c)
		return nil
	}
	if kaOtherCheckers()[kw] && c.block {
		*checkers = append(*checkers, c) // kept whole, in its place
		return nil
	}
	if !kaRSKeywords()[kw] || c.block {
		return k.unknownKeyword(r.scope, c)
	}
	if checks.setting(c) {
		return nil
	}
	num := func(f string, dst *int) error {
		val, err := k.arg(c)
		if err != nil {
			return err
		}
		if *dst, err = strconv.Atoi(val); err != nil {
			return k.errf(c.line, "%s %q is not a number", kw, val)
		}
		r.fields[f] = c.line
		return nil
	}
	switch kw {
	case "weight":
		var w int
		if err := num("weight", &w); err != nil {
			return err
		}
		r.rs.Weight, r.weight = intPtr(w), true
	case "uthreshold":
		return num("upper_threshold", &r.rs.UpperThreshold)
	case "lthreshold":
		return num("lower_threshold", &r.rs.LowerThreshold)
	case "lvs_method":
		fwd, tun, err := k.forwarding(c)
		if err != nil {
			return err
		}
		r.rs.Forwarding = fwd
		r.rs.Tunnel, r.rs.TunnelPort, r.rs.TunnelChecksum = tun.typ, tun.port, tun.checksum
		r.fields["forwarding"] = c.line
		r.fields["tunnel"] = c.line
	case "alpha":
		checks.alpha = true
	case "notify_up", "notify_down":
		cmd, user, err := k.script(c)
		if err != nil || len(user) > 0 {
			k.keep(r.scope, c) // a user to run it as, or no program: kept, not run as root by mistake
			return nil
		}
		if kw == "notify_up" {
			r.rs.NotifyUp = cmd
		} else {
			r.rs.NotifyDown = cmd
		}
		r.fields[kw] = c.line
	case "smtp_alert":
		b, ok := kaTrue(c)
		if !ok {
			k.keep(r.scope, c)
			return nil
		}
		r.rs.SMTPAlert = &b
		r.fields[kw] = c.line
	default:
		// delay_before_retry...
		k.keep(r.scope, c)
	}
	return nil
}
