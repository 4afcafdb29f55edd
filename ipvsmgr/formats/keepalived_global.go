package formats

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// global_defs settings that have an equivalent: lvs_timeouts (the IPVS
// connection timeouts) and lvs_sync_daemon (the connection sync daemon,
// run with the vrrp_instance it names: ipvsctl's redundancy, its VRID and
// interface taken from that instance), read as global_parser.c reads them.
// The block itself is kept whole, as written.

func (k *kaImporter) globalDefs(n *kaNode) error {
	k.keep("", n)
	for _, c := range n.children {
		switch c.word(0) {
		case "lvs_timeouts":
			if err := k.lvsTimeouts(c); err != nil {
				return err
			}
		}
	}
	return nil
}

func (k *kaImporter) lvsTimeouts(c *kaNode) error {
	if len(c.words) < 3 {
		k.warnf(c.line, "lvs_timeouts requires at least one option")
		return nil
	}
	for i := 1; i < len(c.words); i++ {
		opt := c.word(i)
		dst := map[string]*int{"tcp": &k.st.Settings.TCPTimeout, "tcpfin": &k.st.Settings.TCPFinTimeout, "udp": &k.st.Settings.UDPTimeout}[opt]
		if dst == nil {
			k.warnf(c.line, "Unknown option %s specified for lvs_timeouts", opt)
			continue
		}
		if i == len(c.words)-1 {
			k.warnf(c.line, "No value specified for lvs_timeout %s - ignoring", opt)
			continue
		}
		i++
		v, err := strconv.Atoi(c.word(i))
		if err != nil || v < 0 || v > 86400*31 {
			k.warnf(c.line, "Invalid lvs_timeout %s (%s) - ignoring", opt, c.word(i))
			continue
		}
		*dst = v
		k.lines["settings."+map[string]string{"tcp": "tcp_timeout", "tcpfin": "tcpfin_timeout", "udp": "udp_timeout"}[opt]] = c.line
	}
	return nil
}

// lvsSyncDaemon maps `lvs_sync_daemon IFACE [inst] INSTANCE [id N] ...`
// onto settings.redundancy when the instance is there to give its VRID and
// interface; otherwise it stays only in the kept global_defs, with a
// warning.
func (k *kaImporter) lvsSyncDaemon(c *kaNode, top []*kaNode) {
	if len(c.words) < 2 {
		k.warnf(c.line, "lvs_sync_daemon requires interface")
		return
	}
	iface, inst, syncID := c.word(1), "", -1
	for i := 2; i < len(c.words); i++ {
		switch w := c.word(i); {
		case w == "inst" || w == "id" || w == "maxlen" || w == "port" || w == "ttl" || w == "group":
			if i+1 < len(c.words) {
				i++
				if w == "inst" {
					inst = c.word(i)
				}
				if n, err := strconv.Atoi(c.word(i)); w == "id" && err == nil && n >= 0 && n <= 255 {
					syncID = n
				}
			}
		case i == 2:
			inst = w
		case i == 3:
			if n, err := strconv.Atoi(w); err == nil && n >= 0 && n <= 255 {
				syncID = n
			}
		}
	}
	red := k.st.Settings.Redundancy
	if red == nil || cmp.Or(red.Instance, ipvsmgr.DefaultInstance) != inst {
		if slices.ContainsFunc(top, func(n *kaNode) bool { return n.block && n.word(0) == "vrrp_instance" && n.word(1) == inst }) {
			k.warnf(c.line, "lvs_sync_daemon %s: vrrp_instance %s is not the one ipvsctl runs - kept, not mapped", iface, inst)
		} else {
			k.warnf(c.line, "lvs_sync_daemon %s: no vrrp_instance %q to run it with - kept, not mapped", iface, inst)
		}
		return
	}
	red.SyncDaemon = true
	if iface != red.Interface {
		red.SyncInterface = iface
	}
	if syncID < 0 {
		syncID = red.VRID // keepalived's default
	}
	red.SyncID = syncID
	k.unkeep(k.defs, map[string]bool{"lvs_sync_daemon": true}, nil)
}
