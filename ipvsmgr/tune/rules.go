package tune

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Status says how far a setting is from its recommendation.
type Status string

const (
	OK     Status = "ok"     // as recommended, or good enough
	Change Status = "change" // worth changing
	Far    Status = "far"    // far off: traffic suffers or breaks
	Info   Status = "info"   // nothing to recommend for this director
)

// Where a finding is written by Apply.
const (
	KindSysctl   = "sysctl"   // /etc/sysctl.d, and /proc/sys now
	KindModule   = "module"   // /etc/modprobe.d, at the next load of ip_vs
	KindManual   = "manual"   // not written: the operator's (RPS masks, IRQs, weights)
	KindReadOnly = "readonly" // a fact of the kernel build
)

// Finding is one setting: its value now, the recommended one, why, and the
// source of the rule.
type Finding struct {
	Setting     string `json:"setting"`
	Current     string `json:"current"`
	Recommended string `json:"recommended"`
	Status      Status `json:"status"`
	Why         string `json:"why"`
	Source      string `json:"source"`
	Kind        string `json:"kind"`
	// Value is what Apply writes (empty: nothing to write).
	Value string `json:"value,omitempty"`
	// Where is the file and line a finding read from a configuration
	// file came from ("/etc/nginx/nginx.conf:12"; empty for a sysctl).
	Where string `json:"where,omitempty"`
}

// Load is the connection load the table is sized for.
type Load struct {
	Conns    int     `json:"conns"`     // entries in the connection table now
	ConnRate float64 `json:"conn_rate"` // new connections a second
	Lifetime float64 `json:"lifetime"`  // seconds an entry stays in the table
	// From says where rate and lifetime come from.
	From string `json:"from"`
}

// Entries is how many connection entries the load keeps in the table:
// rate x lifetime, and at least what is there now.
func (l Load) Entries() int {
	return max(l.Conns, int(math.Ceil(l.ConnRate*l.Lifetime)))
}

// MeasuredLoad is the load the reading shows: IPVS's rate estimate and,
// by Little's law, an entry's lifetime as entries / rate.
func MeasuredLoad(r *Reading) Load {
	l := Load{Conns: r.Conns, ConnRate: r.ConnRate, From: "measured: /proc/net/ip_vs_conn entries, /proc/net/ip_vs_stats conns/s"}
	if r.ConnRate > 0 {
		l.Lifetime = float64(r.Conns) / r.ConnRate
	}
	return l
}

// Sources of the rules.
const (
	srcKconfig  = "net/netfilter/ipvs/Kconfig (IP_VS_TAB_BITS help)"
	srcMHConfig = "net/netfilter/ipvs/Kconfig (IP_VS_MH_TAB_INDEX help); Maglev paper (NSDI 2016) §3.4: M > 100 N"
	srcSysctl   = "Documentation/networking/ipvs-sysctl.rst"
	srcCore     = "net/netfilter/ipvs/ip_vs_core.c (ip_vs_in_icmp: no entry and schedule_icmp=0 -> NF_ACCEPT)"
	srcIPSysctl = "Documentation/networking/ip-sysctl.rst"
	srcScaling  = "Documentation/networking/scaling.rst (RPS, RFS, IRQ affinity)"
	srcDefense  = "Documentation/networking/ipvs-sysctl.rst (amemthresh, drop_entry); LVS defense strategies"
)

// uses is what the desired state asks of the director.
type uses struct {
	dr, tun, nat, nat6 bool
	persistence        bool
	mh                 []mhService
	checked            bool // some real server has a check that removes it
	redundancy         bool
	bgp                bool // settings.bgp: N directors behind ECMP, mh
}

type mhService struct {
	name    string
	dests   int
	weights int
}

func usesOf(st *ipvsmgr.State) uses {
	var u uses
	if st == nil {
		return u
	}
	u.redundancy = st.Settings.Redundancy != nil
	u.bgp = st.Settings.BGP != nil
	for _, s := range st.Services {
		if !s.IsEnabled() {
			continue
		}
		if s.Persistence > 0 {
			u.persistence = true
		}
		if s.Check != nil && s.Check.Type != "none" && s.Check.OnFailure != "quiesce" {
			u.checked = true
		}
		mh := mhService{name: serviceName(s)}
		for _, rs := range s.Servers {
			if !rs.IsEnabled() {
				continue
			}
			if rs.Check != nil && rs.Check.Type != "" && rs.Check.Type != "none" && rs.Check.OnFailure != "quiesce" {
				u.checked = true
			}
			switch forwarding(st, &s, &rs) {
			case "nat":
				u.nat = true
				if strings.Contains(rs.Address, ":") {
					u.nat6 = true
				}
			case "tun":
				u.tun = true
			default:
				u.dr = true
			}
			mh.dests++
			mh.weights += rs.EffectiveWeight()
		}
		if s.Scheduler == "mh" {
			u.mh = append(u.mh, mh)
		}
	}
	return u
}

func serviceName(s ipvsmgr.Service) string {
	if s.Name != "" {
		return s.Name
	}
	if s.FWMark > 0 {
		return "fwmark:" + strconv.FormatUint(uint64(s.FWMark), 10)
	}
	return fmt.Sprintf("%s:%s:%d", s.Protocol, s.Address, s.Port)
}

// forwarding is a real server's method: its own, its service's, the
// settings' default, else dr.
func forwarding(st *ipvsmgr.State, s *ipvsmgr.Service, rs *ipvsmgr.Server) string {
	for _, f := range []string{rs.Forwarding, s.Forwarding, st.Settings.Network} {
		if f != "" {
			return strings.ToLower(f)
		}
	}
	return "dr"
}

// Check compares the reading with what the desired state and the load call
// for, one finding per setting, in a fixed order.
func Check(r *Reading, st *ipvsmgr.State, load Load) []Finding {
	u := usesOf(st)
	var out []Finding
	out = append(out, connTabBits(r, load))
	out = append(out, vsSysctls(r, u, load)...)
	out = append(out, forwardSysctls(r, u)...)
	out = append(out, mhTables(r, u)...)
	out = append(out, nicSpreading(r)...)
	return out
}

// Summary counts the findings by status, as a line.
func Summary(fs []Finding) string {
	n := map[Status]int{}
	for _, f := range fs {
		n[f.Status]++
	}
	return fmt.Sprintf("%d settings: %d ok, %d to change, %d far off, %d informational", len(fs), n[OK], n[Change], n[Far], n[Info])
}

// FarOff reports whether some finding is far off.
func FarOff(fs []Finding) bool {
	for _, f := range fs {
		if f.Status == Far {
			return true
		}
	}
	return false
}

func connTabBits(r *Reading, load Load) Finding {
	entries := load.Entries()
	// The nearest power of two: "not far less than" rate x lifetime, as the
	// Kconfig's example (40,000 entries -> 2^15) has it; never below the
	// default 12, within the module's range 8..20.
	rec := 12
	if entries > 0 {
		rec = max(rec, min(20, int(math.Round(math.Log2(float64(entries))))))
	}
	f := Finding{
		Setting: "ip_vs conn_tab_bits", Kind: KindModule, Source: srcKconfig,
		Recommended: fmt.Sprintf("%d (%d buckets)", rec, 1<<rec), Value: strconv.Itoa(rec),
	}
	load.From = strings.TrimSpace(load.From)
	sizing := fmt.Sprintf("%d entries now; %.0f conns/s x %.0f s lifetime = %d (%s); the hash table should not be far smaller than that: %d buckets take %s, each entry about 128 bytes (%s at this load)",
		load.Conns, load.ConnRate, load.Lifetime, int(math.Ceil(load.ConnRate*load.Lifetime)), load.From, 1<<rec, bytesText(8<<rec), bytesText(int64(entries)*128))
	reload := "; written to /etc/modprobe.d/ipvsctl.conf, it takes effect only when ip_vs is next loaded: a reboot, or stop ipvsctl, `ipvsadm -C`, `modprobe -r` every ip_vs module and start ipvsctl again (every connection is dropped)"
	cur := r.ConnTabBits
	if cur == 0 {
		f.Current = "ip_vs not loaded"
		f.Status = Info
		f.Why = sizing + reload
		return f
	}
	f.Current = fmt.Sprintf("%d (%d buckets)", cur, 1<<cur)
	if r.ModprobeBits != 0 && r.ModprobeBits != cur {
		f.Current += fmt.Sprintf("; %d at the next load (modprobe.d)", r.ModprobeBits)
	}
	switch short := rec - cur; {
	case short <= 0:
		f.Status = OK
		f.Why = sizing
	case short <= 2:
		f.Status = Change
		f.Why = fmt.Sprintf("%s; now %.1f entries share a bucket on average%s", sizing, float64(entries)/float64(int(1)<<cur), reload)
	default:
		f.Status = Far
		f.Why = fmt.Sprintf("%s; now %.1f entries share a bucket on average, each lookup walks that chain%s", sizing, float64(entries)/float64(int(1)<<cur), reload)
	}
	if r.ModprobeBits >= rec && f.Status != OK {
		f.Why += fmt.Sprintf(" (modprobe.d already sets %d)", r.ModprobeBits)
	}
	return f
}

// sysctl builds a finding for a sysctl with a concrete recommendation,
// good(current) saying whether the value now is good enough.
func sysctl(r *Reading, name, rec string, bad Status, why, src string, good func(string) bool) Finding {
	f := Finding{Setting: name, Recommended: rec, Kind: KindSysctl, Value: rec, Source: src, Why: why}
	cur, ok := r.Sysctls[name]
	switch {
	case !ok:
		f.Current, f.Status = "absent", Info
		if strings.HasPrefix(name, "net.ipv4.vs.") && !r.IPVS {
			f.Current = "absent (ip_vs not loaded)"
		}
	case good(cur):
		f.Current, f.Status = cur, OK
	default:
		f.Current, f.Status = cur, bad
	}
	return f
}

func equals(v string) func(string) bool { return func(s string) bool { return s == v } }

// vsSysctls judges the net.ipv4.vs sysctls for the services in use and the load.
func vsSysctls(r *Reading, u uses, load Load) []Finding {
	out := vsConnSysctls(r, u)
	if len(u.mh) > 0 || u.redundancy {
		out = append(out, sysctl(r, "net.ipv4.vs.schedule_icmp", "1", Change,
			"mh or a director pair: an ICMP error (fragmentation needed) for a flow this director has no entry for (another director's, or one before a failover) is otherwise taken by the director itself instead of reaching the real server, breaking path MTU discovery",
			srcCore, equals("1")))
	} else {
		out = append(out, eitherSysctl(r, "net.ipv4.vs.schedule_icmp", "one director without mh: every flow's entry is here, so ICMP errors find it", srcCore))
	}
	out = append(out, vsDefenseSysctls(r, load)...)
	if r.FTPHelper {
		out = append(out, sysctl(r, "net.ipv4.vs.conntrack", "1", Change,
			"ip_vs_ftp is loaded: its connections keep conntrack entries whatever this says, and stateful rules may depend on them",
			srcSysctl, func(string) bool { return true }))
	} else {
		out = append(out, sysctl(r, "net.ipv4.vs.conntrack", "0", Change,
			"off unless stateful firewall rules (-m conntrack/state) must see IPVS traffic: a conntrack entry per IPVS connection costs CPU and memory (ipvsctl's own fwmark rules need none)",
			srcSysctl, equals("0")))
	}
	return out
}

// eitherSysctl is the finding of a sysctl the services in use do not care about.
func eitherSysctl(r *Reading, name, why, src string) Finding {
	f := sysctl(r, name, "", Info, why, src, func(string) bool { return true })
	f.Recommended, f.Value = "either", ""
	if f.Status == OK {
		f.Status = Info
	}
	return f
}

// vsConnSysctls judges what becomes of a connection whose port is reused,
// whose real server is gone, or whose persistence template outlives a drain.
func vsConnSysctls(r *Reading, u uses) []Finding {
	var out []Finding
	// conn_reuse_mode: bit 2 covers FIN_WAIT, the last state a DR/TUN
	// director sees; bit 1 TIME_WAIT, which only NAT sees.
	if u.dr || u.tun {
		out = append(out, sysctl(r, "net.ipv4.vs.conn_reuse_mode", "2", Change,
			"DR/TUN in use: the director sees a connection no further than FIN_WAIT, so a client reusing the port of a finished connection is sent to the same real server (even a drained one) unless bit 2 is set; it also helps when real servers are added to a busy cluster",
			srcSysctl, func(s string) bool { n, err := strconv.Atoi(s); return err == nil && n&2 != 0 }))
	} else {
		out = append(out, sysctl(r, "net.ipv4.vs.conn_reuse_mode", "1", Change,
			"NAT only: bit 1 reschedules a new connection on a reused port when the old one is in TIME_WAIT, so drained and removed real servers stop getting reused ports",
			srcSysctl, func(s string) bool { n, err := strconv.Atoi(s); return err == nil && n != 0 }))
	}
	why := "a real server removed by its health check (on_failure remove) or by an edit: with 0 its connections hang until they time out, packets silently dropped; with 1 the client is told at once and reconnects to a live one"
	if !u.checked {
		why = "real servers removed by an edit or a health check: with 0 their clients' packets are silently dropped until the entries time out; with 1 they are told at once and reconnect"
	}
	if u.bgp {
		// BGP mode quiesces failed servers (never removes them), and its
		// reconcile deletes and at once re-adds the servers ahead of an
		// added one to keep mh's canonical order (ipvsmgr canonicalDests):
		// in between ip_vs_in_hook expires, with 1, any connection of theirs
		// a packet arrives for.
		out = append(out, sysctl(r, "net.ipv4.vs.expire_nodest_conn", "0", Change,
			"BGP mode: checks quiesce real servers instead of removing them, and a real server added later makes the reconcile delete and re-add the ones ahead of its place in the kernel's list (the mh order every director shares); with 1 a packet of their connections arriving in the microseconds between ends the connection, with 0 it is dropped and the connection goes on",
			srcSysctl, equals("0")))
	} else {
		out = append(out, sysctl(r, "net.ipv4.vs.expire_nodest_conn", "1", Change, why, srcSysctl, equals("1")))
	}
	if u.persistence {
		out = append(out, sysctl(r, "net.ipv4.vs.expire_quiescent_template", "1", Change,
			"persistent services: a drained (weight 0) real server keeps getting its persistent clients' new connections while their templates live, unless they expire when it is quiescent",
			srcSysctl, equals("1")))
	} else {
		out = append(out, eitherSysctl(r, "net.ipv4.vs.expire_quiescent_template", "no persistent service: templates are not used", srcSysctl))
	}
	return out
}

// vsDefenseSysctls judges the SYN-flood defenses: the memory threshold they
// start at, sized for the load, and drop_entry.
func vsDefenseSysctls(r *Reading, load Load) []Finding {
	// amemthresh in pages: the defense starts when free memory falls below
	// it; keep room for the table at this load twice over, at least the
	// default 1024 pages, at most 1/16 of memory.
	pages := int64(1024)
	if e := int64(load.Entries()); e > 0 {
		pages = max(pages, (e*128*2+4095)/4096)
	}
	if r.MemTotalKB > 0 {
		pages = min(pages, r.MemTotalKB/4/16)
	}
	rec := strconv.FormatInt(pages, 10)
	return []Finding{
		sysctl(r, "net.ipv4.vs.amemthresh", rec, Change,
			fmt.Sprintf("the SYN-flood defenses (drop_entry) start when available memory falls below this many pages: room for the connection table at this load twice over (%s), at least the default 1024", bytesText(pages*4096)),
			srcDefense, func(s string) bool { n, err := strconv.ParseInt(s, 10, 64); return err == nil && n >= pages }),
		sysctl(r, "net.ipv4.vs.drop_entry", "1", Change,
			"automatic: when memory is short, drop random SYN-RECV entries (1/32 of the table a second), the ones a SYN flood makes; 0 leaves the table to fill",
			srcDefense, func(s string) bool { return s == "1" || s == "2" || s == "3" }),
	}
}

func forwardSysctls(r *Reading, u uses) []Finding {
	var out []Finding
	if u.nat {
		out = append(out, sysctl(r, "net.ipv4.ip_forward", "1", Far,
			"NAT in use: the real servers' replies are routed back to the clients through the director",
			srcIPSysctl, equals("1")))
		if u.nat6 {
			out = append(out, sysctl(r, "net.ipv6.conf.all.forwarding", "1", Far,
				"IPv6 NAT in use: the real servers' replies are routed through the director", srcIPSysctl, equals("1")))
		}
		loose := func(s string) bool { return s == "0" || s == "2" }
		for _, n := range []string{"net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter"} {
			out = append(out, sysctl(r, n, "2", Change,
				"NAT in use: strict reverse-path filtering (1) drops packets whose reverse route is another interface, as on a director whose VIPs and real servers sit on different ones; loose (2) still drops unroutable sources",
				srcIPSysctl, loose))
		}
	} else {
		f := sysctl(r, "net.ipv4.ip_forward", "", Info, "no NAT service: DR and TUN real servers answer the clients themselves", srcIPSysctl, func(string) bool { return true })
		f.Recommended, f.Value = "either", ""
		if f.Status == OK {
			f.Status = Info
		}
		out = append(out, f)
	}
	return out
}

func mhTables(r *Reading, u uses) []Finding {
	var out []Finding
	m := r.MHTableSize
	for _, s := range u.mh {
		f := Finding{Setting: "mh table of " + s.name, Kind: KindManual, Source: srcMHConfig,
			Current:     fmt.Sprintf("%d real servers, weights sum %d, table %d slots", s.dests, s.weights, m),
			Recommended: fmt.Sprintf("weights sum <= %d and real servers <= %d", m, m/100)}
		switch {
		case s.dests > m || s.weights > 8*m:
			f.Status = Far
			f.Why = fmt.Sprintf("the table (%d slots, from %s) cannot give each real server its share: the kernel scales the weights down and the split strays far from them", m, r.MHTableFrom)
		case s.weights > m || s.dests*100 > m:
			f.Status = Change
			f.Why = fmt.Sprintf("with %d slots (from %s) the split deviates from the weights by more than about 1%%: lower the weights (keep their ratios) or use fewer real servers per service, or a kernel built with a larger CONFIG_IP_VS_MH_TAB_INDEX", m, r.MHTableFrom)
		default:
			f.Status = OK
			f.Why = fmt.Sprintf("the table (%d slots, from %s) fits every real server times its weight", m, r.MHTableFrom)
		}
		out = append(out, f)
	}
	return out
}

func nicSpreading(r *Reading) []Finding {
	var out []Finding
	if r.CPUs <= 1 {
		return nil // one CPU: nothing to spread over
	}
	all := cpuMask(r.CPUs)
	for _, n := range r.NICs {
		if len(n.RxQueues) == 0 {
			continue
		}
		if len(n.RxQueues) < r.CPUs {
			spread := 0
			for _, q := range n.RxQueues {
				if maskCPUs(q.RPSCPUs) > 1 {
					spread++
				}
			}
			f := Finding{Setting: "rps_cpus of " + n.Name, Kind: KindManual, Source: srcScaling,
				Current:     fmt.Sprintf("%d of %d rx queues spread (masks %s)", spread, len(n.RxQueues), masks(n.RxQueues)),
				Recommended: fmt.Sprintf("%s on every rx queue: echo %s > /sys/class/net/%s/queues/rx-*/rps_cpus", all, all, n.Name)}
			if spread == len(n.RxQueues) {
				f.Status, f.Why = OK, "receive packet steering spreads the NIC's packets (and IPVS's work on them) over the CPUs"
			} else {
				f.Status = Change
				f.Why = fmt.Sprintf("%d rx queues for %d CPUs: without RPS the packets of a queue, IPVS's lookups included, are all handled on the CPU its interrupt lands on", len(n.RxQueues), r.CPUs)
			}
			out = append(out, f)
		}
		if len(n.IRQCPUs) > 1 {
			distinct := map[string]bool{}
			for _, c := range n.IRQCPUs {
				distinct[c] = true
			}
			f := Finding{Setting: "IRQ affinity of " + n.Name, Kind: KindManual, Source: srcScaling,
				Current:     fmt.Sprintf("%d interrupts on %d distinct CPU sets (%s)", len(n.IRQCPUs), len(distinct), strings.Join(n.IRQCPUs, " ")),
				Recommended: "one queue's interrupt per CPU (irqbalance, or /proc/irq/N/smp_affinity_list)"}
			if len(distinct) > 1 || strings.ContainsAny(n.IRQCPUs[0], "-,") {
				f.Status, f.Why = OK, "the queues' interrupts are spread over the CPUs"
			} else {
				f.Status, f.Why = Change, "every queue's interrupt goes to the same CPU: that CPU does all the receive work"
			}
			out = append(out, f)
		}
	}
	if len(r.NICs) > 0 {
		rec := 32768
		out = append(out, sysctl(r, "net.core.rps_sock_flow_entries", strconv.Itoa(rec), Change,
			"receive flow steering: packets of a flow go to the CPU where it is handled; 32768 suits a moderately loaded server, and each rx queue's rps_flow_cnt should be this divided by the number of queues",
			srcScaling, func(s string) bool { n, err := strconv.Atoi(s); return err == nil && n >= rec }))
	}
	return out
}

func masks(qs []Queue) string {
	seen := map[string]bool{}
	var out []string
	for _, q := range qs {
		if !seen[q.RPSCPUs] {
			seen[q.RPSCPUs] = true
			out = append(out, q.RPSCPUs)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// cpuMask is the hex mask of CPUs 0..n-1, as rps_cpus takes it.
func cpuMask(n int) string {
	var groups []string
	for n > 0 {
		w := min(n, 32)
		groups = append([]string{fmt.Sprintf("%x", uint64(1)<<w-1)}, groups...)
		n -= w
	}
	return strings.Join(groups, ",")
}

// maskCPUs counts the CPUs a hex mask ("00000003", "ff,ffffffff") holds.
func maskCPUs(m string) int {
	n := 0
	for g := range strings.SplitSeq(m, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(g), 16, 64)
		if err == nil {
			n += bits.OnesCount64(v)
		}
	}
	return n
}

func bytesText(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
