package formats

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// The VRRP side of keepalived.conf: the first vrrp_instance with an
// interface and a virtual_router_id becomes settings.redundancy (its
// priority and state the director's own node settings, Report.Node), its
// virtual_ipaddress the interfaces of the services at those addresses;
// global_defs' mail settings become settings.alerts.smtp. The blocks are
// still kept as written, for what has no equivalent, and each keyword of
// them with none is named in a warning. The export writes the mapped
// keywords from the settings and the others as kept.

// kaVRRPMapped are the vrrp_instance keywords settings.redundancy (or the
// node, or a service's interface) takes up.
var kaVRRPMapped = words("interface virtual_router_id advert_int nopreempt preempt preempt_delay unicast_peer " +
	"unicast_src_ip track_interface garp_master_delay garp_master_repeat notify_master notify_backup notify_fault " +
	"notify_stop notify smtp_alert priority state virtual_ipaddress virtual_ipaddress_excluded version")

// NodeHint is what an import says of the director's own node settings:
// keepalived's priority (255, the address owner, is role master).
type NodeHint struct {
	Priority int    `json:"priority"`
	Role     string `json:"role"`
	Line     int    `json:"line"`
}

// kaTrue reads keepalived's boolean (check_true_false): a bare keyword is
// true.
func kaTrue(c *kaNode) (bool, bool) {
	if len(c.words) < 2 {
		return true, true
	}
	switch strings.ToLower(c.word(1)) {
	case "yes", "on", "true":
		return true, true
	case "no", "off", "false":
		return false, true
	}
	return false, false
}

// vrrpInstance maps the first usable vrrp_instance of top.
func (k *kaImporter) vrrpInstance(top []*kaNode) error {
	vi, others := k.firstInstance(top)
	if vi == nil {
		k.syncGroups(top, nil, nil, nil)
		return nil
	}
	r := &ipvsmgr.Redundancy{}
	if name := vi.word(1); name != ipvsmgr.DefaultInstance {
		r.Instance = name
	}
	var src string
	node := &NodeHint{Priority: 100, Role: "auto", Line: vi.line}
	for _, c := range vi.children {
		k.vrrpKeyword(vi, c, r, node, &src)
	}
	if !r.PreemptOn() && r.PreemptDelay != 0 {
		k.warnf(vi.line, "(%s) preempt_delay is incompatible with nopreempt mode - resetting", vi.word(1))
		r.PreemptDelay = 0
	}
	if src != "" && len(r.UnicastPeers) > 0 {
		if a, err := netip.ParseAddr(src); err == nil && !slices.Contains(r.UnicastPeers, a.Unmap().String()) {
			r.UnicastPeers = append([]string{a.Unmap().String()}, r.UnicastPeers...)
		}
	}
	if node.Priority == 255 {
		node.Role = "master"
	}
	k.st.Settings.Redundancy = r
	k.lines["settings.redundancy"] = vi.line
	k.rep.Node = node
	// The excluded addresses stay in the kept text, services' or not: the
	// export writes them back as excluded.
	k.unkeep(vi, kaVRRPMapped(), func(block string, v *kaNode) bool {
		return block == "virtual_ipaddress_excluded" || !kaServiceVIP(v, k.st.Services)
	})
	handled := k.syncGroups(top, vi, r, others)
	for _, n := range others {
		if !handled[n.word(1)] {
			k.warnf(n.line, "vrrp_instance %s: ipvsctl runs one VRRP instance (vrrp_instance %s, line %d): kept as written, not run", n.word(1), vi.word(1), vi.line)
		}
	}
	return nil
}

// firstInstance is the first vrrp_instance of top with an interface and a
// virtual_router_id (nil if none), and the first block of each other name.
func (k *kaImporter) firstInstance(top []*kaNode) (vi *kaNode, others []*kaNode) {
	seen := map[string]bool{}
	for _, n := range top {
		if !n.block || n.word(0) != "vrrp_instance" {
			continue
		}
		if n.word(1) == "" {
			// keepalived names every instance; run nameless, it would be
			// exported as VI_1, over a kept block of that name.
			k.warnf(n.line, "vrrp_instance: no name: kept as written, not run")
			continue
		}
		if n.word(2) != "" {
			// keepalived 2.2.7: "vrrp_instance must have a name", and skips it.
			k.warnf(n.line, "vrrp_instance %s: a name of more than one word, which keepalived skips: kept as written, not run", strings.Join(kaWords(n)[1:], " "))
			continue
		}
		if seen[n.word(1)] {
			// Only the first block of a name may be the one run: the
			// export rewrites the first it kept under that name.
			k.warnf(n.line, "vrrp_instance %s: a second block of that name: kept as written, not run", n.word(1))
			continue
		}
		seen[n.word(1)] = true
		if vi != nil {
			others = append(others, n)
			continue
		}
		if !slices.ContainsFunc(n.children, func(c *kaNode) bool { return c.word(0) == "interface" }) ||
			!slices.ContainsFunc(n.children, func(c *kaNode) bool { return c.word(0) == "virtual_router_id" }) {
			k.warnf(n.line, "vrrp_instance %s: no interface or virtual_router_id: kept as written, not run", n.word(1))
			continue
		}
		vi = n
	}
	return vi, others
}

// kaVRRPNumbers are the vrrp_instance keywords that take a number: its
// range and what it sets.
var kaVRRPNumbers = map[string]struct {
	lo, hi float64
	set    func(r *ipvsmgr.Redundancy, node *NodeHint, f float64)
}{
	"virtual_router_id": {1, 255, func(r *ipvsmgr.Redundancy, _ *NodeHint, f float64) { r.VRID = int(f) }},
	"advert_int": {0.01, 40.95, func(r *ipvsmgr.Redundancy, _ *NodeHint, f float64) {
		if f != 1 {
			r.AdvertInterval = f
		}
	}},
	"preempt_delay": {0, 1000, func(r *ipvsmgr.Redundancy, _ *NodeHint, f float64) { r.PreemptDelay = f }},
	"priority":      {1, 255, func(_ *ipvsmgr.Redundancy, node *NodeHint, f float64) { node.Priority = int(f) }},
	"garp_master_delay": {0, 3600, func(r *ipvsmgr.Redundancy, _ *NodeHint, f float64) {
		f = math.Trunc(f) // keepalived reads whole seconds
		r.GARPRepeatDelay = &f
	}},
	"garp_master_repeat": {0, 1000, func(r *ipvsmgr.Redundancy, _ *NodeHint, f float64) {
		n := int(f)
		r.GARPCount = &n
	}},
}

// vrrpKeyword maps the keyword c of vrrp_instance vi into r, the node or
// src (unicast_src_ip), or warns of what it cannot.
func (k *kaImporter) vrrpKeyword(vi, c *kaNode, r *ipvsmgr.Redundancy, node *NodeHint, src *string) {
	kw := c.word(0)
	bad := func(format string, args ...any) {
		k.warnf(c.line, "vrrp_instance %s: %s %s: %s - kept, not mapped", vi.word(1), kw, c.rest(), fmt.Sprintf(format, args...))
	}
	if n, ok := kaVRRPNumbers[kw]; ok {
		f, err := strconv.ParseFloat(c.word(1), 64)
		if err != nil || f < n.lo || f > n.hi {
			bad("want a number %v..%v", n.lo, n.hi)
			return
		}
		n.set(r, node, f)
		return
	}
	switch kw {
	case "interface":
		r.Interface = c.word(1)
	case "nopreempt":
		r.Preempt = boolPtr(false)
	case "preempt":
		r.Preempt = nil
	case "state":
		if s := strings.ToUpper(c.word(1)); s == "MASTER" {
			k.warnf(c.line, "vrrp_instance %s: state MASTER: ipvsctl elects by priority from the start (keepalived's initial state has no equivalent)", vi.word(1))
		}
	case "version":
		if c.word(1) != "3" {
			k.warnf(c.line, "vrrp_instance %s: version %s: ipvsctl speaks VRRPv3; give a keepalived peer vrrp_version 3 (the export says version 3)", vi.word(1), c.word(1))
		}
	case "unicast_src_ip":
		*src = c.word(1)
	case "unicast_peer":
		for _, p := range c.children {
			if a, err := netip.ParseAddr(p.word(0)); err == nil {
				r.UnicastPeers = append(r.UnicastPeers, a.Unmap().String())
			} else {
				k.warnf(p.line, "vrrp_instance %s: unicast_peer %s: not an address - not mapped", vi.word(1), p.word(0))
			}
		}
	case "track_interface":
		for _, t := range c.children {
			if len(t.words) > 1 {
				k.warnf(t.line, "vrrp_instance %s: track_interface %s %s: ipvsctl's tracked interfaces put the director in fault, with no weight - tracked without it",
					vi.word(1), t.word(0), strings.Join(kaWords(t)[1:], " "))
			}
			r.TrackInterfaces = append(r.TrackInterfaces, t.word(0))
		}
	case "notify_master", "notify_backup", "notify_fault", "notify_stop", "notify":
		if !k.notifyProgram(c, &r.VRRPNotify) {
			bad("a user to run it as, or no program: not run as root by mistake")
		}
	case "smtp_alert":
		if b, ok := kaTrue(c); ok {
			r.SMTPAlert = &b
		} else {
			bad("want yes or no")
		}
	case "virtual_ipaddress", "virtual_ipaddress_excluded":
		for _, v := range c.children {
			k.vip(vi, v, r)
		}
	case "authentication":
		k.warnf(c.line, "vrrp_instance %s: authentication: VRRPv3 has none (keepalived's PASS and AH are VRRPv2's); settings.redundancy.auth signs the adverts as keepalived 2.4's auth_hmac - kept, not mapped", vi.word(1))
	default:
		k.warnf(c.line, "vrrp_instance %s: %s has no equivalent in ipvsctl - kept as written, not acted on", vi.word(1), kw)
	}
}

// notifyProgram sets the one of the five programs the notify line c
// names; false when it names a user to run it as, or no program.
func (k *kaImporter) notifyProgram(c *kaNode, n *ipvsmgr.VRRPNotify) bool {
	cmd, user, err := k.script(c)
	if err != nil || len(user) > 0 {
		return false
	}
	for _, p := range n.Programs() {
		if p.Keyword == c.word(0) {
			*p.Argv = cmd
		}
	}
	return true
}

// unkeep takes the keywords in mapped out of the kept text of block n:
// the settings say them now, and the export writes them from there.
func (k *kaImporter) unkeep(n *kaNode, mapped map[string]bool, other func(block string, v *kaNode) bool) {
	for _, c := range n.children {
		if !mapped[c.word(0)] && c.movedToLineStart() {
			k.warnf(c.line, "%s: unknown keyword %q after another on its line - ignored, as keepalived ignores it (not kept: on a line of its own it would be read otherwise)", n.header(), c.word(0))
		}
	}
	for i := range k.st.Imported {
		if key := &k.st.Imported[i]; key.Line == n.line && key.Scope == "" && key.Key == n.header() {
			key.Value = kaRewrite(key.Value, mapped, nil, other)
		}
	}
}

// kaServiceVIP is whether a virtual_ipaddress line is a service's address
// that the service carries.
func kaServiceVIP(v *kaNode, services []ipvsmgr.Service) bool { return kaServiceAt(v, services, true) }

// kaServiceAt is whether a virtual_ipaddress line is a service's address
// (one that carries it, when carried).
func kaServiceAt(v *kaNode, services []ipvsmgr.Service, carried bool) bool {
	addr, _, _ := strings.Cut(v.word(0), "/")
	a, err := netip.ParseAddr(addr)
	return err == nil && slices.ContainsFunc(services, func(s ipvsmgr.Service) bool {
		sa, err := netip.ParseAddr(s.Address)
		return err == nil && sa.Unmap() == a.Unmap() && (s.Interface != "" || !carried)
	})
}

// kaLine writes n's words again, one line, each as kaWord writes it (a
// quoted word with a blank stays one word).
func kaLine(n *kaNode) string {
	words := kaWords(n)
	for i, w := range words {
		words[i] = kaWord(w)
	}
	return strings.Join(words, " ")
}

func kaWords(n *kaNode) []string {
	out := make([]string, len(n.words))
	for i, w := range n.words {
		out[i] = w.text
	}
	return out
}

// vip maps one virtual_ipaddress line ("198.18.0.1/32 dev eth0 label
// eth0:1"): the services at that address carry it on dev (else the
// instance's interface).
func (k *kaImporter) vip(vi, v *kaNode, r *ipvsmgr.Redundancy) {
	addr, _, _ := strings.Cut(v.word(0), "/")
	a, err := netip.ParseAddr(addr)
	if err != nil {
		k.warnf(v.line, "vrrp_instance %s: virtual_ipaddress %s: not an address - kept, not mapped", vi.word(1), v.word(0))
		return
	}
	dev := r.Interface
	for i := 1; i+1 < len(v.words); i++ {
		switch v.word(i) {
		case "dev":
			dev = v.word(i + 1)
			i++
		case "label", "brd", "broadcast", "scope":
			i++
		default:
			k.warnf(v.line, "vrrp_instance %s: virtual_ipaddress %s: %s has no equivalent (ipvsctl adds the address as /32 or /128)", vi.word(1), v.word(0), v.word(i))
		}
	}
	found := false
	for i := range k.st.Services {
		svc := &k.st.Services[i]
		if sa, err := netip.ParseAddr(svc.Address); err == nil && sa.Unmap() == a.Unmap() {
			found = true
			if svc.Interface == "" {
				svc.Interface = dev
			}
		}
	}
	if !found {
		k.warnf(v.line, "vrrp_instance %s: virtual_ipaddress %s: no virtual_server at this address; ipvsctl carries the addresses of its services - kept, not carried", vi.word(1), v.word(0))
	}
}

// smtpDefs maps global_defs' mail settings onto settings.alerts.smtp,
// when keepalived would mail (smtp_server and notification_email set).
func (k *kaImporter) smtpDefs(n *kaNode) {
	s := &ipvsmgr.SMTPAlerts{}
	for _, c := range n.children {
		switch c.word(0) {
		case "smtp_server":
			s.Server = c.word(1)
			if p, err := strconv.Atoi(c.word(2)); err == nil && p != ipvsmgr.DefaultSMTPPort {
				s.Port = p
			}
		case "smtp_helo_name":
			s.HeloName = c.word(1)
		case "notification_email_from":
			s.From = c.word(1)
		case "notification_email":
			for _, e := range c.children {
				s.To = append(s.To, e.word(0))
			}
		case "smtp_connect_timeout":
			if t, err := strconv.Atoi(c.word(1)); err == nil && t != ipvsmgr.DefaultSMTPConnectTimeout {
				s.ConnectTimeout = t
			}
		case "router_id":
			s.RouterID = c.word(1)
		case "no_email_faults":
			s.NoEmailFaults = true
		case "smtp_alert", "smtp_alert_vrrp", "smtp_alert_checker":
			if b, ok := kaTrue(c); ok {
				*map[string]**bool{"smtp_alert": &s.Alert, "smtp_alert_vrrp": &s.AlertVRRP, "smtp_alert_checker": &s.AlertChecker}[c.word(0)] = &b
			}
		}
	}
	if s.Server == "" || len(s.To) == 0 {
		return
	}
	k.st.Settings.Alerts = &ipvsmgr.Alerts{SMTP: s}
	k.lines["settings.alerts"] = n.line
	k.unkeep(n, kaSMTPMapped(), nil)
}

// kaSMTPMapped are the global_defs keywords settings.alerts.smtp takes up.
var kaSMTPMapped = words("smtp_server smtp_helo_name notification_email_from notification_email smtp_connect_timeout " +
	"router_id no_email_faults smtp_alert smtp_alert_vrrp smtp_alert_checker")

// kaRewrite writes a kept block's text with the keywords in mapped left
// out and lines (the settings' own) written first.
// A mapped virtual_ipaddress block keeps the lines other (when set) says
// are not taken up.
func kaRewrite(text string, mapped map[string]bool, lines []string, other func(block string, v *kaNode) bool) string {
	nodes, err := parseKeepalivedTree([]byte(text), nil)
	if err != nil || len(nodes) != 1 || !nodes[0].block {
		return text // as the import kept it
	}
	// The virtual addresses left come first, where the export writes
	// its virtual_ipaddress: a round trip keeps the text as it is. Two
	// blocks of one keyword are one (keepalived reads both alike), as the
	// export writes them.
	var rest strings.Builder
	left := map[string][]string{}
	for _, c := range nodes[0].children {
		kw := c.word(0)
		switch {
		case mapped[kw] && other != nil && (kw == "virtual_ipaddress" || kw == "virtual_ipaddress_excluded"):
			for _, v := range c.children {
				if other(kw, v) {
					left[kw] = append(left[kw], "        "+kaLine(v)+"\n")
				}
			}
		case mapped[kw]:
		case c.movedToLineStart():
			// Not kept: on a line of its own it would be read otherwise
			// (the import warns).
		default:
			for l := range strings.SplitSeq(c.text(), "\n") {
				rest.WriteString("    " + l + "\n")
			}
		}
	}
	var b strings.Builder
	b.WriteString(nodes[0].header() + " {\n")
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	for _, kw := range []string{"virtual_ipaddress", "virtual_ipaddress_excluded"} {
		if len(left[kw]) > 0 {
			b.WriteString("    " + kw + " {\n" + strings.Join(left[kw], "") + "    }\n")
		}
	}
	b.WriteString(rest.String())
	b.WriteString("}")
	return b.String()
}

func kaBoolWord(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// smtpLines are settings.alerts.smtp as global_defs says it.
func (x *kaExporter) smtpLines() []string {
	a := x.st.Settings.Alerts
	if a != nil && len(a.Webhooks) > 0 {
		x.bad("settings.alerts.webhooks: keepalived has no webhooks")
	}
	if a == nil || a.SMTP == nil {
		return nil
	}
	s := a.SMTP
	var out []string
	if s.RouterID != "" {
		out = append(out, "router_id "+kaWord(s.RouterID))
	}
	out = append(out, "notification_email {")
	for _, to := range s.To {
		out = append(out, "    "+to)
	}
	out = append(out, "}")
	if s.From != "" {
		out = append(out, "notification_email_from "+s.From)
	}
	server := "smtp_server " + s.Server
	if s.Port != 0 {
		server += " " + strconv.Itoa(s.Port)
	}
	out = append(out, server)
	if s.HeloName != "" {
		out = append(out, "smtp_helo_name "+s.HeloName)
	}
	if s.ConnectTimeout != 0 {
		out = append(out, "smtp_connect_timeout "+strconv.Itoa(s.ConnectTimeout))
	}
	for _, a := range []struct {
		kw string
		b  *bool
	}{{"smtp_alert", s.Alert}, {"smtp_alert_vrrp", s.AlertVRRP}, {"smtp_alert_checker", s.AlertChecker}} {
		if a.b != nil {
			out = append(out, a.kw+" "+kaBoolWord(*a.b))
		}
	}
	if s.NoEmailFaults {
		out = append(out, "no_email_faults")
	}
	return out
}

// vrrpLines are settings.redundancy (and the node's priority) as a
// vrrp_instance says them.
func (x *kaExporter) vrrpLines(r *ipvsmgr.Redundancy, kept string) []string {
	state, prio := "BACKUP", 100
	if n := x.opts.Node; n != nil {
		if n.Priority >= 1 && n.Priority <= 255 {
			prio = n.Priority
		}
		if n.Role == "master" {
			state, prio = "MASTER", 255
		}
	}
	out := []string{"state " + state, "interface " + r.Interface, "virtual_router_id " + strconv.Itoa(r.VRID),
		"priority " + strconv.Itoa(prio), "version 3"}
	if r.AdvertInterval != 0 {
		out = append(out, "advert_int "+strconv.FormatFloat(r.AdvertInterval, 'f', -1, 64))
	}
	if !r.PreemptOn() {
		out = append(out, "nopreempt")
	}
	if r.PreemptDelay != 0 && r.PreemptOn() {
		out = append(out, "preempt_delay "+strconv.FormatFloat(r.PreemptDelay, 'f', -1, 64))
	}
	if len(r.UnicastPeers) > 0 {
		// keepalived lists the others: each director's export names
		// all, and keepalived skips an address of its own (as ipvsctl).
		out = append(out, "unicast_peer {")
		for _, p := range r.UnicastPeers {
			out = append(out, "    "+p)
		}
		out = append(out, "}")
	}
	if len(r.TrackInterfaces) > 0 {
		out = append(out, "track_interface {")
		for _, t := range r.TrackInterfaces {
			out = append(out, "    "+kaWord(t))
		}
		out = append(out, "}")
	}
	if r.GARPCount != nil {
		out = append(out, "garp_master_repeat "+strconv.Itoa(*r.GARPCount))
	}
	if d := r.GARPRepeatDelay; d != nil && *d != math.Trunc(*d) {
		x.bad("settings.redundancy.garp_repeat_delay: %v: keepalived's garp_master_delay is whole seconds", *d)
	} else if d != nil {
		out = append(out, "garp_master_delay "+strconv.Itoa(int(*d)))
	}
	out = append(out, x.notifyLines("settings.redundancy", r.VRRPNotify)...)
	if r.SMTPAlert != nil {
		out = append(out, "smtp_alert "+kaBoolWord(*r.SMTPAlert))
	}
	vips, excluded := x.vipLines(r, kept)
	if len(vips) == 0 && len(excluded) == 0 {
		x.bad("settings.redundancy: keepalived's vrrp_instance needs a virtual address: no service has an interface to carry its address on")
	}
	for _, b := range []struct {
		kw    string
		lines []string
	}{{"virtual_ipaddress", vips}, {"virtual_ipaddress_excluded", excluded}} {
		if len(b.lines) > 0 {
			out = append(out, b.kw+" {")
			for _, v := range b.lines {
				out = append(out, "    "+v)
			}
			out = append(out, "}")
		}
	}
	if r.Auth != nil {
		x.bad("settings.redundancy.auth: keepalived 2.2 has no auth_hmac (2.4's, not written yet)")
	}
	if w := r.PreemptSyncWait; w != nil && *w != 0 {
		x.bad("settings.redundancy.preempt_sync_wait: %g: keepalived preempts without waiting for its sync daemon", *w)
	}
	return out
}

// notifyLines are the five programs of field as keepalived's notify lines.
func (x *kaExporter) notifyLines(field string, n ipvsmgr.VRRPNotify) []string {
	var out []string
	for _, p := range n.Programs() {
		argv := *p.Argv
		if len(argv) == 0 {
			continue
		}
		text, ok := kaCommand(argv)
		if !ok {
			x.bad("%s.%s: %q: %s", field, p.Keyword, argv, kaCommandQuoted)
			continue
		}
		out = append(out, p.Keyword+" "+text)
	}
	return out
}

// syncDaemonLine is global_defs' lvs_sync_daemon for the settings.
func (x *kaExporter) syncDaemonLine() []string {
	r := x.st.Settings.Redundancy
	if r == nil || !r.SyncDaemon {
		return nil
	}
	return []string{fmt.Sprintf("lvs_sync_daemon %s %s id %d", r.SyncDaemonInterface(), cmp.Or(r.Instance, ipvsmgr.DefaultInstance), r.SyncID)}
}

// vipLines are the instance's virtual_ipaddress and
// virtual_ipaddress_excluded lines: the services' addresses on their
// interfaces, in virtual_ipaddress unless the kept instance lists one as
// excluded, and the kept lines at no service's address as they were read.
func (x *kaExporter) vipLines(r *ipvsmgr.Redundancy, kept string) (vips, excluded []string) {
	line := func(svc ipvsmgr.Service) string {
		if svc.Interface != r.Interface {
			return svc.Address + " dev " + svc.Interface
		}
		return svc.Address
	}
	carried := func(v *kaNode) (ipvsmgr.Service, bool) {
		for _, svc := range x.st.Services {
			if svc.Interface != "" && svc.Address != "" && kaServiceVIP(v, []ipvsmgr.Service{svc}) {
				return svc, true
			}
		}
		return ipvsmgr.Service{}, false
	}
	var other []string
	isExcluded := map[string]bool{}
	if nodes, err := parseKeepalivedTree([]byte(kept), nil); err == nil && len(nodes) == 1 {
		for _, c := range nodes[0].children {
			for _, v := range c.children {
				svc, ok := carried(v)
				switch {
				case c.word(0) == "virtual_ipaddress_excluded" && ok:
					if !isExcluded[svc.Address] {
						isExcluded[svc.Address] = true
						excluded = append(excluded, line(svc))
					}
				case c.word(0) == "virtual_ipaddress_excluded":
					excluded = append(excluded, kaLine(v))
				case c.word(0) == "virtual_ipaddress" && !ok:
					other = append(other, kaLine(v))
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, svc := range x.st.Services {
		if r.SyncGroup != nil && svc.Interface != r.Interface {
			continue // a member instance's (syncMembers)
		}
		if svc.Interface != "" && svc.Address != "" && !seen[svc.Address] && !isExcluded[svc.Address] {
			seen[svc.Address] = true
			vips = append(vips, line(svc))
		}
	}
	return append(vips, other...), excluded
}
