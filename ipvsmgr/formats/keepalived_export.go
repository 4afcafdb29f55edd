package formats

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// exportKeepalived writes st as keepalived.conf: what the importer reads,
// written back so that importing the result gives st again. The keys kept
// from a keepalived import go back where they were read (global_defs and
// vrrp_instance as written; a virtual_server's, real_server's or checker's
// statements into its block); a service group is written as one
// virtual_server_group and one `virtual_server group NAME` per block of
// its members. What keepalived cannot say (a rise above 1, a disabled or
// drained server, an agent check...) is an error naming the field rather
// than left out. Names have no place in keepalived's syntax: each is a
// comment above its block.
func exportKeepalived(st *ipvsmgr.State, w io.Writer, o ExportOptions) error {
	if _, err := ipvsmgr.Compile(st); err != nil {
		return err
	}
	x := &kaExporter{st: st, opts: o, kept: newKAKept(st.Imported)}
	blocks, err := x.blocks()
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	x.w = bw
	if err := x.globals(); err != nil {
		return err
	}
	x.trackFileBlocks()
	written := map[string]bool{}
	for _, b := range blocks {
		if b.group != "" && !written[b.group] {
			written[b.group] = true
			x.group(b)
		}
		x.virtualServer(b)
	}
	if len(x.problems) > 0 {
		return fmt.Errorf("keepalived cannot express: %s", strings.Join(x.problems, "; "))
	}
	return bw.Flush()
}

type kaExporter struct {
	st       *ipvsmgr.State
	opts     ExportOptions
	kept     *kaKept
	w        *bufio.Writer
	problems []string
	// trackFiles names the file of each file check: a kept track_file
	// that reads it, or one the export writes.
	trackFiles map[string]string
	newTracks  []string
}

func (x *kaExporter) bad(format string, args ...any) {
	x.problems = append(x.problems, fmt.Sprintf(format, args...))
}

// kaKept indexes the keys kept from a keepalived import by the block they
// were read in (the file an include read them from dropped: the export is
// one file).
type kaKept struct {
	byScope map[string][]ipvsmgr.ImportedKey
	top     []ipvsmgr.ImportedKey
	// vsHeader maps a target ("198.18.0.1 80", "fwmark 5", "group G") to
	// the virtual_server line it was read from, words after the port
	// included; rsHeader a virtual_server line and a server's address to
	// its real_server line (the port as written).
	vsHeader map[string]string
	rsHeader map[string][]string
}

// take is the keys kept in scope, once: a key read in one block is
// written in one (two blocks with one header, such as two virtual_server
// lines of an address for two protocols, would otherwise both write it).
func (k *kaKept) take(scope string) []ipvsmgr.ImportedKey {
	keys := k.byScope[scope]
	delete(k.byScope, scope)
	return keys
}

func kaPlainScope(scope string) string {
	if rest, ok := strings.CutPrefix(scope, "in "); ok {
		_, after, _ := strings.Cut(rest, " ")
		return after
	}
	return scope
}

func newKAKept(imported []ipvsmgr.ImportedKey) *kaKept {
	k := &kaKept{byScope: map[string][]ipvsmgr.ImportedKey{}, vsHeader: map[string]string{}, rsHeader: map[string][]string{}}
	for _, key := range imported {
		if key.Source != FormatKeepalived {
			continue
		}
		scope := kaPlainScope(key.Scope)
		if scope == "" {
			k.top = append(k.top, key)
			continue
		}
		k.byScope[scope] = append(k.byScope[scope], key)
		words := strings.Fields(scope)
		if len(words) < 2 || words[0] != "virtual_server" {
			continue
		}
		end := slices.Index(words, "real_server")
		if end < 0 {
			end = len(words)
		}
		vs := strings.Join(words[:end], " ")
		if t := kaHeaderTarget(words[1:end]); t != "" && k.vsHeader[t] == "" {
			k.vsHeader[t] = vs
		}
		if end < len(words)-1 {
			rs := words[end : end+2]
			if end+2 < len(words) {
				if _, err := strconv.Atoi(words[end+2]); err == nil {
					rs = words[end : end+3]
				}
			}
			h := strings.Join(rs, " ")
			if !slices.Contains(k.rsHeader[vs], h) {
				k.rsHeader[vs] = append(k.rsHeader[vs], h)
			}
		}
	}
	return k
}

// kaHeaderTarget is the target a virtual_server line's words (after the
// keyword) name, as kaTargetKey writes it: the port as the number the
// importer read ("0358" is 358, as keepalived's read_unsigned reads it).
func kaHeaderTarget(words []string) string {
	if len(words) >= 2 && (words[0] == "group" || words[0] == "fwmark") {
		if words[0] == "fwmark" {
			if m, err := strconv.ParseUint(words[1], 10, 32); err == nil {
				return "fwmark " + strconv.FormatUint(m, 10)
			}
		}
		return words[0] + " " + words[1]
	}
	a, err := netip.ParseAddr(words[0])
	if err != nil {
		return ""
	}
	port := 0
	if len(words) > 1 {
		if port, err = kaPort(words[1]); err != nil {
			return ""
		}
	}
	return a.Unmap().String() + " " + strconv.Itoa(port)
}

func kaTargetKey(svc *ipvsmgr.Service) string {
	switch {
	case svc.FWMark > 0:
		return "fwmark " + strconv.FormatUint(uint64(svc.FWMark), 10)
	case svc.Address != "":
		return netip.MustParseAddr(svc.Address).Unmap().String() + " " + strconv.Itoa(svc.Port)
	}
	return ""
}

// kaBlock is one virtual_server block to write: a service, or the services
// of one group that one block made (members in the group's order).
type kaBlock struct {
	group   string
	first   int // index of the service the block is written from
	members []int
	header  string
}

// blocks cuts the services into virtual_server blocks. A group's services
// come in runs, one per virtual_server that names the group, each with
// every member of the group in the same order.
func (x *kaExporter) blocks() ([]kaBlock, error) {
	var out []kaBlock
	groupMembers := map[string][]string{}
	svcs := x.st.Services
	for i := 0; i < len(svcs); {
		svc := &svcs[i]
		if svc.Group == "" {
			t := kaTargetKey(svc)
			out = append(out, kaBlock{first: i, members: []int{i}, header: cmp.Or(x.kept.vsHeader[t], "virtual_server "+kaCanonicalHeader(svc))})
			i++
			continue
		}
		members, known := groupMembers[svc.Group]
		j := i
		var run []int
		var targets []string
		for j < len(svcs) && svcs[j].Group == svc.Group {
			t := kaTargetKey(&svcs[j])
			if slices.Contains(targets, t) || known && len(targets) == len(members) {
				break
			}
			targets = append(targets, t)
			run = append(run, j)
			j++
		}
		if known && !slices.Equal(targets, members) {
			return nil, fmt.Errorf("services[%d].group: %q: its services from services[%d] on are %s, another block of the group has %s; every virtual_server of a group takes all its members",
				i, svc.Group, i, strings.Join(targets, ", "), strings.Join(members, ", "))
		}
		groupMembers[svc.Group] = targets
		for _, m := range run[1:] {
			if f := kaBlockDiff(&svcs[run[0]], &svcs[m]); f != "" {
				return nil, fmt.Errorf("services[%d].%s differs from services[%d] of group %q: a group's services share their settings", m, f, run[0], svc.Group)
			}
		}
		out = append(out, kaBlock{group: svc.Group, first: i, members: run, header: "virtual_server group " + svc.Group})
		i = j
	}
	return out, nil
}

func kaCanonicalHeader(svc *ipvsmgr.Service) string {
	if svc.FWMark > 0 {
		return "fwmark " + strconv.FormatUint(uint64(svc.FWMark), 10)
	}
	return svc.Address + " " + strconv.Itoa(svc.Port)
}

// kaBlockDiff names the first field in which two services of one block
// differ, their targets aside ("" when none).
func kaBlockDiff(a, b *ipvsmgr.Service) string {
	norm := func(s *ipvsmgr.Service) ipvsmgr.Service {
		// What the importer works out per member (a DR port reset, the
		// check's port that follows it) is not compared.
		c := *s
		c.Address, c.Port, c.FWMark, c.Name, c.Check, c.Protocol = "", 0, 0, "", nil, ""
		if c.SorryServer != nil {
			c.SorryServer = &ipvsmgr.SorryServer{Address: s.SorryServer.Address}
		}
		c.Servers = nil
		return c
	}
	na, nb := norm(a), norm(b)
	var ea, eb bytes.Buffer
	_ = (&ipvsmgr.State{Services: []ipvsmgr.Service{na}}).Encode(&ea)
	_ = (&ipvsmgr.State{Services: []ipvsmgr.Service{nb}}).Encode(&eb)
	if a.FWMark == 0 && b.FWMark == 0 && a.Protocol != b.Protocol {
		return "protocol"
	}
	if !bytes.Equal(ea.Bytes(), eb.Bytes()) {
		return "settings"
	}
	if len(a.Servers) != len(b.Servers) {
		return "servers"
	}
	for j := range a.Servers {
		ra, rb := a.Servers[j], b.Servers[j]
		if ra.Port != rb.Port && a.Forwarding == "nat" || ra.Address != rb.Address {
			return fmt.Sprintf("servers[%d]", j)
		}
	}
	return ""
}

// globals writes the top-level keys kept from a keepalived import as they
// were written, global_defs with lvs_timeouts as the settings say.
func (x *kaExporter) globals() error {
	s := &x.st.Settings
	haveDefs, haveInstance, haveGroup := false, false, false
	defs := append(x.smtpLines(), x.syncDaemonLine()...)
	defsMapped := map[string]bool{}
	if s.Alerts != nil && s.Alerts.SMTP != nil {
		defsMapped = maps.Clone(kaSMTPMapped())
	}
	if s.Redundancy != nil && s.Redundancy.SyncDaemon {
		defsMapped["lvs_sync_daemon"] = true
	}
	for _, k := range x.kept.top {
		switch {
		case !haveDefs && (k.Key == "global_defs" || strings.HasPrefix(k.Key, "global_defs ")):
			// The first block of the keyword, with whatever words follow
			// it (keepalived reads "global_defs * {" as global_defs): the
			// one the import mapped.
			haveDefs = true
			k.Value = kaSetTimeouts(k.Value, s)
			if len(defs) > 0 {
				k.Value = kaRewrite(k.Value, defsMapped, defs, nil)
			}
		case s.Redundancy != nil && !haveInstance && k.Key == "vrrp_instance "+cmp.Or(s.Redundancy.Instance, ipvsmgr.DefaultInstance):
			haveInstance = true
			k.Value = kaRewrite(k.Value, kaVRRPMapped(), x.vrrpLines(s.Redundancy, k.Value), nil)
		case s.Redundancy != nil && s.Redundancy.SyncGroup != nil && !haveGroup && k.Key == "vrrp_sync_group "+s.Redundancy.SyncGroup.Name:
			haveGroup = true
			lines := x.syncGroupLines(s.Redundancy, k.Value)
			k.Value = kaRewrite(k.Value, kaLineWords(lines), lines, nil)
		}
		x.keptKey("", k)
	}
	if line := kaTimeoutsLine(s); !haveDefs && (line != "" || len(defs) > 0) {
		if line != "" {
			defs = append([]string{line}, defs...)
		}
		x.w.WriteString("global_defs {\n    " + strings.Join(defs, "\n    ") + "\n}\n")
	}
	if r := s.Redundancy; r != nil && !haveInstance {
		lines := x.vrrpLines(r, "")
		x.w.WriteString("vrrp_instance " + cmp.Or(r.Instance, ipvsmgr.DefaultInstance) + " {\n    " + strings.Join(lines, "\n    ") + "\n}\n")
	}
	if r := s.Redundancy; r != nil && r.SyncGroup != nil {
		_, members := x.syncMembers(r)
		x.w.WriteString(strings.Join(members, ""))
		if !haveGroup {
			lines := x.syncGroupLines(r, "")
			x.w.WriteString("vrrp_sync_group " + r.SyncGroup.Name + " {\n    " + strings.Join(lines, "\n    ") + "\n}\n")
		}
	}
	return nil
}

// kaLineWords are the keywords lines written at a block's top level say.
func kaLineWords(lines []string) map[string]bool {
	out := map[string]bool{}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(l, " ") && f[0] != "}" {
			out[f[0]] = true
		}
	}
	return out
}

func kaTimeoutsLine(s *ipvsmgr.Settings) string {
	var parts []string
	for _, o := range []struct {
		name string
		v    int
	}{{"tcp", s.TCPTimeout}, {"tcpfin", s.TCPFinTimeout}, {"udp", s.UDPTimeout}} {
		if o.v != 0 {
			parts = append(parts, o.name+" "+strconv.Itoa(o.v))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "lvs_timeouts " + strings.Join(parts, " ")
}

// kaSetTimeouts gives a kept global_defs the settings' lvs_timeouts: as
// written when it says the same, else the line rewritten.
func kaSetTimeouts(text string, s *ipvsmgr.Settings) string {
	lines := strings.Split(text, "\n")
	want := kaTimeoutsLine(s)
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "lvs_timeouts" {
			continue
		}
		var got ipvsmgr.Settings
		for j := 1; j+1 < len(f); j += 2 {
			if n, err := strconv.Atoi(f[j+1]); err == nil {
				switch f[j] {
				case "tcp":
					got.TCPTimeout = n
				case "tcpfin":
					got.TCPFinTimeout = n
				case "udp":
					got.UDPTimeout = n
				}
			}
		}
		if kaTimeoutsLine(&got) == want {
			return text
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if want == "" {
			return strings.Join(slices.Delete(lines, i, i+1), "\n")
		}
		lines[i] = indent + want
		return strings.Join(lines, "\n")
	}
	if want == "" || len(lines) < 2 {
		return text
	}
	return strings.Join(slices.Insert(lines, len(lines)-1, "   "+want), "\n")
}

func (x *kaExporter) group(b kaBlock) {
	fmt.Fprintf(x.w, "virtual_server_group %s {\n", b.group)
	for _, m := range b.members {
		svc := &x.st.Services[m]
		if svc.FWMark > 0 {
			fmt.Fprintf(x.w, "    fwmark %d\n", svc.FWMark)
		} else {
			fmt.Fprintf(x.w, "    %s %d\n", svc.Address, svc.Port)
		}
	}
	x.w.WriteString("}\n")
}

var kaMethods = map[string]string{"dr": "DR", "nat": "NAT", "tun": "TUN"}

func (x *kaExporter) virtualServer(b kaBlock) {
	svc := &x.st.Services[b.first]
	field := fmt.Sprintf("services[%d]", b.first)
	for _, m := range b.members {
		if n := x.st.Services[m].Name; n != "" {
			fmt.Fprintf(x.w, "# %s\n", n)
		}
	}
	w := x.w
	fmt.Fprintf(w, "%s {\n", b.header)
	if svc.Scheduler != "" {
		fmt.Fprintf(w, "    lb_algo %s\n", svc.Scheduler)
	}
	fwd := cmp.Or(svc.Forwarding, x.st.Settings.Network, "dr")
	fmt.Fprintf(w, "    lb_kind %s\n", kaMethods[fwd]+x.sharedTunnel(svc, fwd))
	if svc.Persistence > 0 {
		fmt.Fprintf(w, "    persistence_timeout %d\n", svc.Persistence)
	}
	if svc.PersistenceNetmask != "" {
		fmt.Fprintf(w, "    persistence_granularity %s\n", svc.PersistenceNetmask)
	}
	if svc.FWMark == 0 {
		fmt.Fprintf(w, "    protocol %s\n", strings.ToUpper(cmp.Or(svc.Protocol, "tcp")))
	}
	if svc.OnePacket {
		w.WriteString("    ops\n")
	}
	x.schedFlags(svc)
	if s := svc.SorryServer; s != nil {
		if s.Port != 0 {
			fmt.Fprintf(w, "    sorry_server %s %d\n", s.Address, s.Port)
		} else {
			fmt.Fprintf(w, "    sorry_server %s\n", s.Address)
		}
	}
	x.quorum(svc, field)
	for _, q := range []struct {
		name string
		argv ipvsmgr.Argv
	}{{"quorum_up", svc.QuorumUp}, {"quorum_down", svc.QuorumDown}} {
		if len(q.argv) == 0 {
			continue
		}
		text, ok := kaCommand(q.argv)
		if !ok {
			x.bad("%s.%s: %q: %s", field, q.name, q.argv, kaCommandQuoted)
			continue
		}
		fmt.Fprintf(x.w, "    %s %s\n", q.name, text)
	}
	if svc.SMTPAlert != nil {
		fmt.Fprintf(x.w, "    smtp_alert %s\n", kaBoolWord(*svc.SMTPAlert))
	}
	if !svc.IsEnabled() {
		x.bad("%s.enabled: keepalived has no disabled virtual_server", field)
	}
	for _, k := range x.kept.take(b.header) {
		x.keptKey("    ", k)
	}
	for j := range svc.Servers {
		x.realServer(svc, j, field, b.header)
	}
	w.WriteString("}\n")
}

// sharedTunnel is the `type ...` of lb_kind TUN: the tunnel of the servers
// that inherit the service's method (they share it, as the importer gives
// it to them).
func (x *kaExporter) sharedTunnel(svc *ipvsmgr.Service, fwd string) string {
	if fwd != "tun" {
		return ""
	}
	for j := range svc.Servers {
		if rs := &svc.Servers[j]; rs.Forwarding == "" {
			return kaTunnelWords(rs)
		}
	}
	return ""
}

func kaTunnelWords(rs *ipvsmgr.Server) string {
	if rs.Tunnel == "" && rs.TunnelChecksum == "" {
		return ""
	}
	s := " type " + cmp.Or(rs.Tunnel, "ipip")
	if rs.TunnelPort != 0 {
		s += " port " + strconv.Itoa(rs.TunnelPort)
	}
	if rs.TunnelChecksum != "" {
		s += " " + rs.TunnelChecksum
	}
	return s
}

func (x *kaExporter) schedFlags(svc *ipvsmgr.Service) {
	prefix := "flag-"
	if svc.Scheduler == "sh" || svc.Scheduler == "mh" {
		prefix = svc.Scheduler + "-"
	}
	for _, f := range svc.SchedulerFlags {
		switch {
		case f == "fallback" && prefix == "flag-":
			x.w.WriteString("    flag-1\n")
		case f == "port" && prefix == "flag-":
			x.w.WriteString("    flag-2\n")
		default:
			x.w.WriteString("    " + prefix + f + "\n")
		}
	}
}

// quorum writes the service's quorum (a number of servers) as keepalived's,
// a sum of weights: it can when every server has the same weight.
func (x *kaExporter) quorum(svc *ipvsmgr.Service, field string) {
	if svc.Quorum <= 1 {
		return
	}
	w := -1
	for j := range svc.Servers {
		sw := svc.Servers[j].EffectiveWeight()
		if w >= 0 && sw != w || sw <= 0 {
			x.bad("%s.quorum: %d servers, but keepalived's quorum is a sum of weights and the servers' weights differ", field, svc.Quorum)
			return
		}
		w = sw
	}
	fmt.Fprintf(x.w, "    quorum %d\n", svc.Quorum*w)
	if svc.Hysteresis > 0 {
		fmt.Fprintf(x.w, "    hysteresis %d\n", svc.Hysteresis*w)
	}
}

// keptKey writes a kept statement, or a kept block as it was written.
func (x *kaExporter) keptKey(indent string, k ipvsmgr.ImportedKey) {
	if kaKeptBlock(k) {
		// Each line indented alike: the importer's dedent gives the same
		// text back.
		for _, l := range strings.Split(k.Value, "\n") {
			x.w.WriteString(indent + l + "\n")
		}
		return
	}
	// The key is one word, unquoted when read (the value is the rest of
	// the line as written, its quotes kept).
	line := kaWord(k.Key)
	if k.Value != "" {
		line += " " + k.Value
	}
	x.w.WriteString(indent + line + "\n")
}

// rsHeader is the real_server line of rs: as it was read (its port as
// written, which the importer resets again with keepalived's warning), or
// its address and port.
func (x *kaExporter) rsHeader(vsHeader string, svc *ipvsmgr.Service, rs *ipvsmgr.Server) string {
	var match []string
	for _, h := range x.kept.rsHeader[vsHeader] {
		f := strings.Fields(h)
		if a, err := netip.ParseAddr(f[1]); err == nil && a.Unmap().String() == rs.Address {
			match = append(match, h)
		}
	}
	canonical := "real_server " + rs.Address
	if rs.Port != 0 {
		canonical += " " + strconv.Itoa(rs.Port)
	}
	// Of servers at one address, the one whose port reads as rs's (080 is
	// 80) is rs; else (the importer reset a DR/TUN port) by address alone.
	if same := slices.DeleteFunc(slices.Clone(match), func(h string) bool {
		f, port := strings.Fields(h), 0
		if len(f) > 2 {
			port, _ = kaPort(f[2])
		}
		return port != rs.Port
	}); len(same) == 1 {
		return same[0]
	}
	// By address alone only for a port the importer reset (to 0), and only
	// where the address is rs's alone in svc: a line read for another
	// server at it (another block of the same virtual_server line, say) is
	// not rs's.
	shared := slices.ContainsFunc(svc.Servers, func(o ipvsmgr.Server) bool { return o.Address == rs.Address && o.Port != rs.Port })
	if rs.Port == 0 && !shared && (len(match) == 1 || len(match) > 1 && !slices.Contains(match, canonical)) {
		return match[0]
	}
	return canonical
}

func (x *kaExporter) realServer(svc *ipvsmgr.Service, j int, field, vsHeader string) {
	rs := &svc.Servers[j]
	rf := fmt.Sprintf("%s.servers[%d]", field, j)
	w := x.w
	header := x.rsHeader(vsHeader, svc, rs)
	scope := vsHeader + " " + header
	if rs.Name != "" {
		fmt.Fprintf(w, "    # %s\n", rs.Name)
	}
	fmt.Fprintf(w, "    %s {\n", header)
	if rs.Weight != nil {
		fmt.Fprintf(w, "        weight %d\n", *rs.Weight)
	}
	if rs.Forwarding != "" {
		fmt.Fprintf(w, "        lvs_method %s%s\n", kaMethods[rs.Forwarding], kaTunnelWords(rs))
	}
	if rs.UpperThreshold != 0 {
		fmt.Fprintf(w, "        uthreshold %d\n", rs.UpperThreshold)
	}
	if rs.LowerThreshold != 0 {
		fmt.Fprintf(w, "        lthreshold %d\n", rs.LowerThreshold)
	}
	for _, q := range []struct {
		name string
		argv ipvsmgr.Argv
	}{{"notify_up", rs.NotifyUp}, {"notify_down", rs.NotifyDown}} {
		if len(q.argv) == 0 {
			continue
		}
		text, ok := kaCommand(q.argv)
		if !ok {
			x.bad("%s.%s: %q: %s", rf, q.name, q.argv, kaCommandQuoted)
			continue
		}
		fmt.Fprintf(w, "        %s %s\n", q.name, text)
	}
	if rs.SMTPAlert != nil {
		fmt.Fprintf(w, "        smtp_alert %s\n", kaBoolWord(*rs.SMTPAlert))
	}
	switch {
	case !rs.IsEnabled():
		x.bad("%s.enabled: keepalived has no disabled real_server", rf)
	case rs.Drained:
		x.bad("%s.drained: keepalived has no drained real_server (its weight 0 would lose the configured weight)", rf)
	case rs.Health != "" && rs.Health != "auto":
		x.bad("%s.health: %q: keepalived has no forced health", rf, rs.Health)
	}
	if svc.Check != nil || rs.Check != nil {
		c := ipvsmgr.MergedCheck(svc.Check, rs.Check)
		cf := field + ".check"
		if rs.Check != nil {
			cf = rf + ".check"
		}
		if c.OnFailure == "quiesce" {
			w.WriteString("        inhibit_on_failure\n")
		}
		x.checker(&c, cf, scope)
	}
	for _, k := range x.kept.take(scope) {
		x.keptKey("        ", k)
	}
	w.WriteString("    }\n")
}

var kaCheckerNames = map[string]string{"tcp": "TCP_CHECK", "http": "HTTP_GET", "https": "SSL_GET", "exec": "MISC_CHECK",
	"dns": "DNS_CHECK", "send_expect": "UDP_CHECK", "smtp": "SMTP_CHECK", "ping": "PING_CHECK", "file": "FILE_CHECK"}

// checker writes one checker block, its timing explicit: keepalived's
// defaults are not ipvsctl's.
func (x *kaExporter) checker(c *ipvsmgr.Check, field, rsScope string) {
	if c.Type == "none" || c.Type == "" {
		return
	}
	name, ok := kaCheckerNames[c.Type]
	if !ok {
		x.bad("%s.type: keepalived has no %s check", field, c.Type)
		return
	}
	if c.Type == "send_expect" && c.Protocol != "udp" {
		x.bad("%s.type: keepalived has no %s send_expect check (its UDP_CHECK is udp)", field, cmp.Or(c.Protocol, "tcp"))
		return
	}
	x.checkerProblems(c, field)
	w := x.w
	if c.Type == "file" {
		x.fileChecker(c, field, rsScope)
		return
	}
	fmt.Fprintf(w, "        %s {\n", name)
	in := "            "
	x.checkerTiming(c, in)
	x.checkerKeywords(c, name, rsScope, in)
	for _, k := range x.kept.take(rsScope + " " + name) {
		x.keptKey(in, k)
	}
	fmt.Fprintf(w, "        }\n")
}

// checkerTiming writes where the checker connects and its timing.
func (x *kaExporter) checkerTiming(c *ipvsmgr.Check, in string) {
	w := x.w
	if c.Address != "" {
		fmt.Fprintf(w, "%sconnect_ip %s\n", in, c.Address)
	}
	if c.Port != 0 {
		fmt.Fprintf(w, "%sconnect_port %d\n", in, c.Port)
	}
	fmt.Fprintf(w, "%sdelay_loop %s\n", in, kaSeconds(cmp.Or(c.Interval, ipvsmgr.DefaultCheckInterval)))
	timeout := kaSeconds(cmp.Or(c.Timeout, ipvsmgr.DefaultCheckTimeout))
	if c.Type == "exec" {
		fmt.Fprintf(w, "%smisc_timeout %s\n", in, timeout)
	} else {
		fmt.Fprintf(w, "%sconnect_timeout %s\n", in, timeout)
	}
	fmt.Fprintf(w, "%sretry %d\n", in, cmp.Or(c.Fall, ipvsmgr.DefaultCheckFall)-1)
	if c.FastInterval != 0 {
		fmt.Fprintf(w, "%sdelay_before_retry %s\n", in, kaSeconds(c.FastInterval))
	}
	if c.Warmup != nil {
		fmt.Fprintf(w, "%swarmup %s\n", in, kaSeconds(*c.Warmup))
	}
	if c.StartHealthy == nil || !*c.StartHealthy {
		fmt.Fprintf(w, "%salpha\n", in)
	}
}

// checkerKeywords writes the keywords of the checker's type.
func (x *kaExporter) checkerKeywords(c *ipvsmgr.Check, name, rsScope, in string) {
	w := x.w
	switch c.Type {
	case "http", "https":
		if c.Host != "" {
			fmt.Fprintf(w, "%svirtualhost %s\n", in, kaWord(c.Host))
		}
		fmt.Fprintf(w, "%surl {\n%s    path %s\n", in, in, kaWord(cmp.Or(c.Path, "/")))
		if len(c.ExpectStatus) > 0 {
			fmt.Fprintf(w, "%s    status_code %s\n", in, kaStatusList(c.ExpectStatus))
		}
		if c.ExpectBody != "" {
			fmt.Fprintf(w, "%s    regex %s\n", in, kaWord(c.ExpectBody))
		}
		for _, k := range x.kept.take(rsScope + " " + name + " url") {
			x.keptKey(in+"    ", k)
		}
		fmt.Fprintf(w, "%s}\n", in)
	case "exec":
		text, _ := kaCommand(c.Command) // refused in checkerProblems
		fmt.Fprintf(w, "%smisc_path %s\n", in, text)
		if c.DynamicWeight != nil && *c.DynamicWeight {
			fmt.Fprintf(w, "%smisc_dynamic\n", in)
		}
	case "dns":
		if c.QType != "" {
			fmt.Fprintf(w, "%stype %s\n", in, c.QType)
		}
		fmt.Fprintf(w, "%sname %s\n", in, kaWord(cmp.Or(c.Name, ".")))
	case "send_expect":
		fmt.Fprintf(w, "%spayload %s\n", in, hex.EncodeToString([]byte(ipvsmgr.DecodeEscapes(c.Send))))
		if c.Expect != "" {
			fmt.Fprintf(w, "%srequire_reply %s\n", in, hex.EncodeToString([]byte(ipvsmgr.DecodeEscapes(c.Expect))))
		}
	case "smtp":
		fmt.Fprintf(w, "%shelo_name %s\n", in, kaWord(cmp.Or(c.Name, "localhost")))
	}
}

// checkerProblems names what a check says that keepalived's checkers
// cannot.
func (x *kaExporter) checkerProblems(c *ipvsmgr.Check, field string) {
	if r := cmp.Or(c.Rise, ipvsmgr.DefaultCheckRise); r != 1 {
		x.bad("%s.rise: %d: keepalived puts a server back at its first passing check (rise 1)", field, r)
	}
	if c.DownInterval != 0 {
		x.bad("%s.down_interval: keepalived has no interval while a server is out", field)
	}
	if c.SlowStart != nil {
		x.bad("%s.slow_start: keepalived has no slow start", field)
	}
	if c.Method != "" && c.Method != "GET" {
		x.bad("%s.method: %q: keepalived's HTTP_GET sends GET", field, c.Method)
	}
	if c.TLSVerify != nil && *c.TLSVerify {
		x.bad("%s.tls_verify: keepalived's SSL_GET does not verify the certificate", field)
	}
	if c.SNI != "" {
		x.bad("%s.sni: keepalived's SSL_GET sends no SNI unless enable_sni, which ipvsctl does not map", field)
	}
	if c.RCode != "" {
		x.bad("%s.rcode: keepalived's DNS_CHECK passes on an answer, not a response code", field)
	}
	if _, ok := kaCommand(c.Command); c.Type == "exec" && !ok {
		x.bad("%s.command: %q: %s", field, c.Command, kaCommandQuoted)
	}
	if c.Type == "exec" && c.Expect != "" {
		x.bad("%s.expect: keepalived's MISC_CHECK reads the exit status, not the output", field)
	}
	if c.UseRegex != nil && *c.UseRegex {
		x.bad("%s.use_regex: keepalived's UDP_CHECK compares bytes", field)
	}
	if c.Type == "send_expect" && c.Expect == "*" {
		x.bad("%s.expect: \"*\": keepalived's UDP_CHECK has no any-reply match (leave expect empty)", field)
	}
}

// kaCommandQuoted is why kaCommand cannot write a command line.
const kaCommandQuoted = "a quote or a backslash in a word, which keepalived reads one way before 2.3.2 (Debian's 2.2.7) and another since"

func kaSeconds(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// kaWord writes s as one word of keepalived's syntax: quoted when it holds
// a blank (keepalived's: space, tab, \r, \f, \v), a brace, # or !.
func kaWord(s string) string {
	// A word starting with @ would start a conditional line where it is the
	// line's first (a group's member is written on its own line).
	if s != "" && !strings.ContainsAny(s, " \t\r\f\v{}#!\"") && !strings.HasPrefix(s, "@") {
		return s
	}
	return `"` + s + `"`
}

// kaStatusList writes status codes, runs of consecutive ones as ranges.
func kaStatusList(codes []int) string {
	var parts []string
	for i := 0; i < len(codes); {
		j := i
		for j+1 < len(codes) && codes[j+1] == codes[j]+1 {
			j++
		}
		if j-i >= 2 {
			parts = append(parts, fmt.Sprintf("%d-%d", codes[i], codes[j]))
		} else {
			for k := i; k <= j; k++ {
				parts = append(parts, strconv.Itoa(codes[k]))
			}
		}
		i = j + 1
	}
	return strings.Join(parts, " ")
}

// kaKeptBlock tells a kept block (its value its text, to its closing
// brace) from a statement (its value its words: the lexer splits a brace
// off any word, so none ends in one).
func kaKeptBlock(k ipvsmgr.ImportedKey) bool {
	return strings.HasSuffix(k.Value, "}")
}

// trackFileBlocks names the file of every file check: by the kept
// track_file that reads it (written with the globals), else by a
// track_file written here.
func (x *kaExporter) trackFileBlocks() {
	x.trackFiles = map[string]string{}
	for _, k := range x.kept.top {
		f := strings.Fields(k.Key)
		if len(f) != 2 || f[0] != "track_file" && f[0] != "vrrp_track_file" || !kaKeptBlock(k) {
			continue
		}
		for _, l := range strings.Split(k.Value, "\n") {
			if w := strings.Fields(l); len(w) >= 2 && w[0] == "file" {
				if p := strings.Join(w[1:], " "); x.trackFiles[p] == "" {
					x.trackFiles[p] = f[1]
				}
			}
		}
	}
	for i := range x.st.Services {
		svc := &x.st.Services[i]
		for j := range svc.Servers {
			c := ipvsmgr.MergedCheck(svc.Check, svc.Servers[j].Check)
			if c.Type != "file" || x.trackFiles[c.File] != "" {
				continue
			}
			name := fmt.Sprintf("ipvsctl_file_%d", len(x.newTracks)+1)
			x.trackFiles[c.File] = name
			x.newTracks = append(x.newTracks, name)
			fmt.Fprintf(x.w, "track_file %s {\n    file %s\n}\n", name, kaWord(c.File))
		}
	}
}

// fileChecker writes a file check as FILE_CHECK: keepalived acts on each
// change of the file, so only rise and fall 1 can be said.
func (x *kaExporter) fileChecker(c *ipvsmgr.Check, field, rsScope string) {
	if f := cmp.Or(c.Fall, ipvsmgr.DefaultCheckFall); f != 1 {
		x.bad("%s.fall: %d: keepalived's FILE_CHECK acts on one reading of the file (fall 1)", field, f)
	}
	w := x.w
	fmt.Fprintf(w, "        FILE_CHECK {\n            track_file %s\n", x.trackFiles[c.File])
	weight := 1
	if c.FileWeight != nil {
		weight = *c.FileWeight
	}
	rev := ""
	if c.FileReverse != nil && *c.FileReverse {
		rev = " reverse"
	}
	if weight == 0 {
		// FILE_CHECK's weight 0 means "the track_file's" (1 unless it
		// says): a track_file of weight 0 is needed.
		x.bad("%s.file_weight: 0: written to keepalived only on its track_file, which this export does not rewrite", field)
	}
	fmt.Fprintf(w, "            weight %d%s\n", weight, rev)
	for _, k := range x.kept.take(rsScope + " FILE_CHECK") {
		x.keptKey("            ", k)
	}
	w.WriteString("        }\n")
}
