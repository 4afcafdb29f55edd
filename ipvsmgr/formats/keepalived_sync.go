package formats

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// keepalived's vrrp_sync_group moves its instances together. ipvsctl runs
// one instance, whose VIPs may sit on several interfaces, so the group
// whose `group { }` names the mapped instance becomes
// settings.redundancy.sync_group (its programs and mail), and each other
// member that agrees with the mapped instance on all but its interface,
// addresses and tracked interfaces is merged into it: its addresses carried
// on its interface, which is tracked (an instance's interface going down
// faults its whole group). A member that cannot merge is named and kept.

// kaMemberOwn are a member's keywords that may differ from the mapped
// instance's when it merges: the rest must be written alike.
var kaMemberOwn = words("interface virtual_ipaddress virtual_ipaddress_excluded track_interface state")

// kaNotifyWords are keepalived's notify lines and mail switch: vi's alone
// still run (and mail) once for both.
var kaNotifyWords = words("notify_master notify_backup notify_fault notify_stop notify smtp_alert")

// syncGroups maps the first vrrp_sync_group naming vi (nil: none is run)
// onto r, merges the members it can, and names in a warning every other
// group and member; it returns the instances it named.
func (k *kaImporter) syncGroups(top []*kaNode, vi *kaNode, r *ipvsmgr.Redundancy, others []*kaNode) map[string]bool {
	handled := map[string]bool{}
	for _, g := range top {
		if !g.block || g.word(0) != "vrrp_sync_group" {
			continue
		}
		members := kaGroupMembers(g)
		switch {
		case g.word(2) != "":
			// keepalived 2.2.7: "vrrp_sync_group must have a name - skipping".
			k.warnf(g.line, "vrrp_sync_group %s: a name of more than one word, which keepalived skips: kept as written, not run", strings.Join(kaWords(g)[1:], " "))
		case vi == nil || !slices.Contains(members, vi.word(1)):
			k.warnf(g.line, "vrrp_sync_group %s: names no instance ipvsctl runs: kept as written, not run", g.word(1))
		case r.SyncGroup != nil:
			k.warnf(g.line, "vrrp_sync_group %s: vrrp_instance %s is in sync group %s already: kept as written, not run", g.word(1), vi.word(1), r.SyncGroup.Name)
		default:
			k.syncGroup(g, members, vi, r, others, handled)
		}
	}
	return handled
}

func kaGroupMembers(g *kaNode) []string {
	var out []string
	for _, c := range g.children {
		if c.word(0) == "group" {
			for _, m := range c.children {
				out = append(out, kaWords(m)...)
			}
		}
	}
	return out
}

// syncGroup maps g, which names vi among members.
func (k *kaImporter) syncGroup(g *kaNode, members []string, vi *kaNode, r *ipvsmgr.Redundancy, others []*kaNode, handled map[string]bool) {
	name := g.word(1)
	sg := &ipvsmgr.SyncGroup{Name: name}
	mapped := map[string]bool{"group": true}
	for _, c := range g.children {
		kw := c.word(0)
		switch kw {
		case "notify_master", "notify_backup", "notify_fault", "notify_stop", "notify":
			if k.notifyProgram(c, &sg.VRRPNotify) {
				mapped[kw] = true
			} else {
				k.warnf(c.line, "vrrp_sync_group %s: %s %s: a user to run it as, or no program: not run as root by mistake - kept, not mapped", name, kw, c.rest())
			}
		case "smtp_alert":
			if b, ok := kaTrue(c); ok {
				sg.SMTPAlert, mapped[kw] = &b, true
			} else {
				k.warnf(c.line, "vrrp_sync_group %s: smtp_alert %s: want yes or no - kept, not mapped", name, c.rest())
			}
		case "track_interface":
			// A group's tracked interface faults all its instances: the
			// one instance's tracked interfaces.
			if slices.ContainsFunc(c.children, func(t *kaNode) bool { return len(t.words) > 1 }) {
				k.warnf(c.line, "vrrp_sync_group %s: track_interface with a weight: ipvsctl's tracked interfaces put the director in fault, with no weight - kept, not mapped", name)
				continue
			}
			for _, t := range c.children {
				r.TrackInterfaces = kaAddOnce(r.TrackInterfaces, t.word(0))
			}
			mapped[kw] = true
		case "group":
		default:
			k.warnf(c.line, "vrrp_sync_group %s: %s has no equivalent in ipvsctl - kept as written, not acted on", name, kw)
		}
	}
	r.SyncGroup = sg
	k.lines["settings.redundancy.sync_group"] = g.line
	var left []string // the members kept, not run
	for _, m := range members {
		if m == "" {
			k.warnf(g.line, "vrrp_sync_group %s: group names an empty word, which is no instance (keepalived ignores it) - dropped", name)
			continue
		}
		if m == vi.word(1) || handled[m] {
			continue
		}
		handled[m] = true
		i := slices.IndexFunc(others, func(n *kaNode) bool { return n.word(1) == m })
		if i < 0 {
			k.warnf(g.line, "vrrp_sync_group %s: group names %s, which is no vrrp_instance ipvsctl could run - kept", name, m)
			left = append(left, m)
			continue
		}
		if why := k.mergeMember(others[i], vi, r); why != "" {
			k.warnf(others[i].line, "vrrp_sync_group %s: vrrp_instance %s: %s, so it cannot move as one with %s in ipvsctl's one instance - kept as written, not run",
				name, m, why, vi.word(1))
			left = append(left, m)
			continue
		}
		k.warnf(others[i].line, "vrrp_sync_group %s: vrrp_instance %s merged into %s: its addresses carried on its interface, which is tracked",
			name, m, vi.word(1))
		k.st.Imported = slices.DeleteFunc(k.st.Imported, func(key ipvsmgr.ImportedKey) bool {
			return key.Line == others[i].line && key.Scope == "" && key.Key == others[i].header()
		})
	}
	var lines []string
	if len(left) > 0 {
		lines = append(append([]string{"group {"}, kaMemberLines(left)...), "}")
	}
	for i := range k.st.Imported {
		if key := &k.st.Imported[i]; key.Line == g.line && key.Scope == "" && key.Key == g.header() {
			key.Value = kaRewrite(key.Value, mapped, lines, nil)
		}
	}
}

// mergeMember merges member m into the mapped instance vi (r), or says why
// it cannot: a keyword written otherwise than in vi (its VRID, priority,
// advert interval, authentication...), an address no service has.
func (k *kaImporter) mergeMember(m, vi *kaNode, r *ipvsmgr.Redundancy) string {
	said := func(n *kaNode, kw string) string {
		var out []string
		for _, c := range n.children {
			if c.word(0) == kw {
				out = append(out, strings.Join(strings.Fields(c.text())[1:], " "))
			}
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, "; ")
	}
	for _, n := range []*kaNode{m, vi} {
		for _, c := range n.children {
			kw := c.word(0)
			if !kaMemberOwn()[kw] && said(m, kw) != said(vi, kw) && !(kaNotifyWords()[kw] && said(m, kw) == "none") {
				return fmt.Sprintf("%s %s, not %s's %s", kw, said(m, kw), vi.word(1), said(vi, kw))
			}
		}
	}
	iface := ""
	var vips, tracked []*kaNode
	for _, c := range m.children {
		switch c.word(0) {
		case "interface":
			iface = c.word(1)
		case "virtual_ipaddress", "virtual_ipaddress_excluded":
			vips = append(vips, c.children...)
		case "track_interface":
			tracked = append(tracked, c.children...)
		}
	}
	for _, v := range vips {
		if !kaServiceAt(v, k.st.Services, false) {
			return fmt.Sprintf("virtual_ipaddress %s is no virtual_server's address", v.word(0))
		}
	}
	for _, t := range tracked {
		if len(t.words) > 1 {
			return fmt.Sprintf("track_interface %s has a weight", t.word(0))
		}
	}
	for _, v := range vips {
		k.vip(m, v, &ipvsmgr.Redundancy{Interface: iface})
	}
	if iface != r.Interface {
		r.TrackInterfaces = kaAddOnce(r.TrackInterfaces, iface)
	}
	for _, t := range tracked {
		r.TrackInterfaces = kaAddOnce(r.TrackInterfaces, t.word(0))
	}
	return ""
}

func kaAddOnce(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// kaMemberLines are a group block's members, one per line, each one word
// (a member read from a quoted word keeps its quotes).
func kaMemberLines(members []string) []string {
	out := make([]string, len(members))
	for i, m := range members {
		out[i] = "    " + kaWord(m)
	}
	return out
}

// syncMembers are the instances of the sync group besides the instance,
// as keepalived needs them: one per other interface that carries VIPs,
// named INSTANCE_INTERFACE, alike but for its interface and addresses and
// with no programs of its own (the instance's and the group's run once).
// keepalived moves them with the instance; the import merges them back.
func (x *kaExporter) syncMembers(r *ipvsmgr.Redundancy) (names []string, blocks []string) {
	for _, svc := range x.st.Services {
		if svc.Interface == "" || svc.Address == "" || svc.Interface == r.Interface {
			continue
		}
		name := cmp.Or(r.Instance, ipvsmgr.DefaultInstance) + "_" + svc.Interface
		if slices.Contains(names, name) {
			continue
		}
		m := *r
		m.Interface, m.Instance, m.TrackInterfaces, m.SMTPAlert = svc.Interface, name, nil, nil
		m.VRRPNotify = ipvsmgr.VRRPNotify{}
		var lines []string
		for _, l := range x.vrrpLines(&m, "") {
			lines = append(lines, "    "+l)
		}
		names = append(names, name)
		blocks = append(blocks, "vrrp_instance "+name+" {\n"+strings.Join(lines, "\n")+"\n}\n")
	}
	return names, blocks
}

// syncGroupLines are settings.redundancy.sync_group as a vrrp_sync_group
// says it: the instance and the members kept (in the kept block's group).
func (x *kaExporter) syncGroupLines(r *ipvsmgr.Redundancy, kept string) []string {
	g := r.SyncGroup
	names, _ := x.syncMembers(r)
	members := append([]string{cmp.Or(r.Instance, ipvsmgr.DefaultInstance)}, names...)
	if nodes, err := parseKeepalivedTree([]byte(kept), nil); err == nil && len(nodes) == 1 {
		for _, m := range kaGroupMembers(nodes[0]) {
			members = kaAddOnce(members, m)
		}
	}
	out := append(append([]string{"group {"}, kaMemberLines(members)...), "}")
	out = append(out, x.notifyLines("settings.redundancy.sync_group", g.VRRPNotify)...)
	if g.SMTPAlert != nil {
		out = append(out, "smtp_alert "+kaBoolWord(*g.SMTPAlert))
	}
	return out
}
