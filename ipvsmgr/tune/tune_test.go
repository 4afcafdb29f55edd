package tune

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// director lays out a director's /proc and /sys as the kernel shows them
// (Debian 6.1 defaults, two CPUs, one NIC with one rx queue) under a
// temporary root, with overrides.
func director(t *testing.T, over map[string]string) DirHost {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"/proc/sys/net/ipv4/vs/conn_reuse_mode":           "1\n",
		"/proc/sys/net/ipv4/vs/expire_nodest_conn":        "0\n",
		"/proc/sys/net/ipv4/vs/expire_quiescent_template": "0\n",
		"/proc/sys/net/ipv4/vs/schedule_icmp":             "0\n",
		"/proc/sys/net/ipv4/vs/amemthresh":                "1024\n",
		"/proc/sys/net/ipv4/vs/drop_entry":                "0\n",
		"/proc/sys/net/ipv4/vs/conntrack":                 "0\n",
		"/proc/sys/net/ipv4/vs/sloppy_tcp":                "0\n",
		"/proc/sys/net/ipv4/ip_forward":                   "0\n",
		"/proc/sys/net/ipv6/conf/all/forwarding":          "0\n",
		"/proc/sys/net/ipv4/conf/all/rp_filter":           "0\n",
		"/proc/sys/net/ipv4/conf/default/rp_filter":       "1\n",
		"/proc/sys/net/core/rps_sock_flow_entries":        "0\n",
		"/proc/sys/kernel/osrelease":                      "6.1.0-28-amd64\n",
		"/sys/module/ip_vs/parameters/conn_tab_bits":      "12\n",
		"/sys/devices/system/cpu/online":                  "0-1\n",
		"/proc/meminfo":                                   "MemTotal:        8039400 kB\nMemFree:  100 kB\n",
		"/proc/net/ip_vs_conn":                            "Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData\n",
		"/proc/net/ip_vs_stats": "   Total Incoming Outgoing         Incoming         Outgoing\n   Conns  Packets  Packets            Bytes            Bytes\n" +
			"     3E8     2710        0           1E8480                0\n\n Conns/s   Pkts/s   Pkts/s          Bytes/s          Bytes/s\n" +
			"       0        0        0                0                0\n",
		"/sys/class/net/eth0/device/vendor":            "0x1af4\n",
		"/sys/class/net/eth0/queues/rx-0/rps_cpus":     "0\n",
		"/sys/class/net/eth0/queues/rx-0/rps_flow_cnt": "0\n",
		"/sys/class/net/veth1/queues/rx-0/rps_cpus":    "0\n", // no device: not a NIC
		"/proc/interrupts": "           CPU0       CPU1\n  0:         44          0   IO-APIC   2-edge      timer\n" +
			" 24:       9000          0   PCI-MSI 49152-edge      eth0-TxRx-0\n 25:        100          0   PCI-MSI 49153-edge      eth0\n",
		"/proc/irq/24/smp_affinity_list": "0\n",
		"/proc/irq/25/smp_affinity_list": "0\n",
	}
	for k, v := range over {
		files[k] = v
	}
	h := DirHost{Root: root}
	for p, c := range files {
		if c == "-" {
			continue // left out
		}
		if err := h.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// connTable is /proc/net/ip_vs_conn with n entries.
func connTable(n int) string {
	var b strings.Builder
	b.WriteString("Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData\n")
	for range n {
		b.WriteString("TCP C6120002 9C40 C6120064 0050 C612000B 0050 FIN_WAIT         98\n")
	}
	return b.String()
}

func TestReadDirector(t *testing.T) {
	h := director(t, map[string]string{
		"/proc/net/ip_vs_conn":        connTable(5),
		"/boot/config-6.1.0-28-amd64": "CONFIG_IP_VS=m\nCONFIG_IP_VS_MH_TAB_INDEX=13\n",
		"/etc/modprobe.d/ipvs.conf":   "# mine\noptions ip_vs conn_tab_bits=16\n",
		"/proc/net/ip_vs_stats": "   Total Incoming Outgoing         Incoming         Outgoing\n   Conns  Packets  Packets            Bytes            Bytes\n" +
			"     3E8     2710        0           1E8480                0\n\n Conns/s   Pkts/s   Pkts/s          Bytes/s          Bytes/s\n" +
			"     1F4      3E8        0                0                0\n",
	})
	r, err := Read(h)
	if err != nil {
		t.Fatal(err)
	}
	want := &Reading{
		IPVS: true, ConnTabBits: 12, ModprobeBits: 16, Conns: 5, ConnRate: 500, CPUs: 2, MemTotalKB: 8039400,
		MHTableSize: 8191, MHTableFrom: "/boot/config-6.1.0-28-amd64",
		Sysctls: map[string]string{
			"net.ipv4.vs.conn_reuse_mode": "1", "net.ipv4.vs.expire_nodest_conn": "0", "net.ipv4.vs.expire_quiescent_template": "0",
			"net.ipv4.vs.schedule_icmp": "0", "net.ipv4.vs.amemthresh": "1024", "net.ipv4.vs.drop_entry": "0",
			"net.ipv4.vs.conntrack": "0", "net.ipv4.vs.sloppy_tcp": "0", "net.ipv4.ip_forward": "0",
			"net.ipv6.conf.all.forwarding": "0", "net.ipv4.conf.all.rp_filter": "0", "net.ipv4.conf.default.rp_filter": "1",
			"net.core.rps_sock_flow_entries": "0",
		},
		NICs: []NIC{{Name: "eth0", RxQueues: []Queue{{Name: "rx-0", RPSCPUs: "0"}}, IRQCPUs: []string{"0", "0"}}},
	}
	if d := cmp.Diff(want, r); d != "" {
		t.Errorf("reading (-want +got):\n%s", d)
	}
}

func TestReadWithoutIPVS(t *testing.T) {
	h := director(t, map[string]string{
		"/proc/net/ip_vs_conn": "-", "/proc/net/ip_vs_stats": "-", "/sys/module/ip_vs/parameters/conn_tab_bits": "-",
		"/proc/sys/net/ipv4/vs/conn_reuse_mode": "-",
	})
	r, err := Read(h)
	if err != nil {
		t.Fatal(err)
	}
	if r.IPVS || r.ConnTabBits != 0 || r.MHTableSize != 4093 {
		t.Errorf("reading without ip_vs: IPVS %v, bits %d, mh %d", r.IPVS, r.ConnTabBits, r.MHTableSize)
	}
	fs := Check(r, &ipvsmgr.State{}, MeasuredLoad(r))
	got := find(t, fs, "ip_vs conn_tab_bits")
	if got.Status != Info || got.Current != "ip_vs not loaded" {
		t.Errorf("conn_tab_bits without ip_vs: %+v", got)
	}
	if f := find(t, fs, "net.ipv4.vs.conn_reuse_mode"); f.Status != Info || !strings.Contains(f.Current, "absent") {
		t.Errorf("conn_reuse_mode without ip_vs: %+v", f)
	}
}

func TestParseStatsRejectsGarbage(t *testing.T) {
	h := director(t, map[string]string{"/proc/net/ip_vs_stats": "nonsense\n"})
	if _, err := Read(h); err == nil || !strings.Contains(err.Error(), "ip_vs_stats") {
		t.Errorf("Read of a garbled ip_vs_stats: %v", err)
	}
}

func find(t *testing.T, fs []Finding, setting string) Finding {
	t.Helper()
	for _, f := range fs {
		if f.Setting == setting {
			return f
		}
	}
	t.Fatalf("no finding for %s in %v", setting, fs)
	return Finding{}
}

func state(t *testing.T, doc string) *ipvsmgr.State {
	t.Helper()
	st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestConnTabBitsFromLoad sizes the table from rate x lifetime, as the
// Kconfig help does (its own example: 200/s x 200 s -> 2^15).
func TestConnTabBitsFromLoad(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bits   int
		load   Load
		rec    string
		status Status
		inWhy  string
	}{
		{"idle director keeps the default", 12, Load{}, "12", OK, "0 entries now"},
		{"the Kconfig's example", 12, Load{ConnRate: 200, Lifetime: 200}, "15", Far, "40000"},
		{"the example on a table already sized", 15, Load{ConnRate: 200, Lifetime: 200}, "15", OK, ""},
		{"a little short", 14, Load{ConnRate: 200, Lifetime: 200}, "15", Change, "2.4 entries share a bucket"},
		{"entries now count when the rate says less", 12, Load{Conns: 70000}, "16", Far, "70000 entries now"},
		{"a million a second for 120 s is capped at the module's 20", 12, Load{ConnRate: 1e6, Lifetime: 120}, "20", Far, "120000000"},
		{"a larger table than needed is fine", 18, Load{Conns: 100}, "12", OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reading{ConnTabBits: tc.bits, Sysctls: map[string]string{}}
			f := connTabBits(r, tc.load)
			if f.Value != tc.rec || f.Status != tc.status || !strings.Contains(f.Why, tc.inWhy) {
				t.Errorf("got value %s status %s why %q; want %s %s containing %q", f.Value, f.Status, f.Why, tc.rec, tc.status, tc.inWhy)
			}
			if f.Status != OK && !strings.Contains(f.Why, "only when ip_vs is next loaded") {
				t.Errorf("a change of conn_tab_bits must say it needs a reload: %q", f.Why)
			}
		})
	}
}

func TestMeasuredLoadLittlesLaw(t *testing.T) {
	l := MeasuredLoad(&Reading{Conns: 3000, ConnRate: 100})
	if l.Lifetime != 30 || l.Entries() != 3000 {
		t.Errorf("3000 entries at 100/s: lifetime %v, entries %d", l.Lifetime, l.Entries())
	}
}

const drState = `{"services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler":"wlc",
  "servers":[{"address":"198.18.0.11"},{"address":"198.18.0.12"}]}]}`

const natState = `{"settings":{"network":"nat"},"services":[{"name":"web-nat","address":"198.18.0.110","port":80,"scheduler":"rr",
  "persistence":300,"servers":[{"address":"198.18.1.11"}]}]}`

const mhState = `{"services":[
 {"name":"small","fwmark":5,"scheduler":"mh","servers":[{"address":"198.18.0.11","weight":10},{"address":"198.18.0.12","weight":20}]},
 {"name":"heavy","address":"198.18.0.100","port":443,"scheduler":"mh","servers":[
   {"address":"198.18.0.11","weight":3000},{"address":"198.18.0.12","weight":2000}]},
 {"name":"huge","address":"198.18.0.100","port":80,"scheduler":"mh","servers":[
   {"address":"198.18.0.11","weight":30000},{"address":"198.18.0.12","weight":30000}]}]}`

// bgpState is a BGP-mode director's: expire_nodest_conn must stay 0 (the
// reconcile's canonical-order re-adds).
const bgpState = `{"settings":{"network":"dr","bgp":{"asn":65001,"peers":[{"address":"198.18.0.254","asn":65000}]}},
 "services":[{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.1.11"}]}]}`

// TestRulesByForwarding: each setting's status and recommendation for a DR,
// a NAT and an mh director read from the same default kernel.
func TestRulesByForwarding(t *testing.T) {
	r, err := Read(director(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		rec, cur string
		status   Status
	}
	for _, tc := range []struct {
		name string
		doc  string
		want map[string]row
		none []string // settings that must not be listed
	}{
		{"dr", drState, map[string]row{
			"net.ipv4.vs.conn_reuse_mode":           {"2", "1", Change},
			"net.ipv4.vs.expire_nodest_conn":        {"1", "0", Change},
			"net.ipv4.vs.expire_quiescent_template": {"either", "0", Info},
			"net.ipv4.vs.schedule_icmp":             {"either", "0", Info},
			"net.ipv4.vs.amemthresh":                {"1024", "1024", OK},
			"net.ipv4.vs.drop_entry":                {"1", "0", Change},
			"net.ipv4.vs.conntrack":                 {"0", "0", OK},
			"net.ipv4.ip_forward":                   {"either", "0", Info},
			"rps_cpus of eth0":                      {"3 on every rx queue: echo 3 > /sys/class/net/eth0/queues/rx-*/rps_cpus", "0 of 1 rx queues spread (masks 0)", Change},
			"IRQ affinity of eth0":                  {"one queue's interrupt per CPU (irqbalance, or /proc/irq/N/smp_affinity_list)", "2 interrupts on 1 distinct CPU sets (0 0)", Change},
			"net.core.rps_sock_flow_entries":        {"32768", "0", Change},
		}, []string{"net.ipv4.conf.all.rp_filter", "rps_cpus of veth1"}},
		{"nat with persistence", natState, map[string]row{
			"net.ipv4.vs.conn_reuse_mode":           {"1", "1", OK},
			"net.ipv4.vs.expire_quiescent_template": {"1", "0", Change},
			"net.ipv4.ip_forward":                   {"1", "0", Far},
			"net.ipv4.conf.all.rp_filter":           {"2", "0", OK},
			"net.ipv4.conf.default.rp_filter":       {"2", "1", Change},
		}, []string{"net.ipv6.conf.all.forwarding"}},
		{"mh", mhState, map[string]row{
			"net.ipv4.vs.schedule_icmp": {"1", "0", Change},
			"mh table of small":         {"weights sum <= 4093 and real servers <= 40", "2 real servers, weights sum 30, table 4093 slots", OK},
			"mh table of heavy":         {"weights sum <= 4093 and real servers <= 40", "2 real servers, weights sum 5000, table 4093 slots", Change},
			"mh table of huge":          {"weights sum <= 4093 and real servers <= 40", "2 real servers, weights sum 60000, table 4093 slots", Far},
		}, nil},
		{"bgp", bgpState, map[string]row{
			"net.ipv4.vs.expire_nodest_conn": {"0", "0", OK},
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := Check(r, state(t, tc.doc), MeasuredLoad(r))
			for setting, w := range tc.want {
				f := find(t, fs, setting)
				if got := (row{f.Recommended, f.Current, f.Status}); got != w {
					t.Errorf("%s: got %+v, want %+v (why %q)", setting, got, w, f.Why)
				}
				if f.Source == "" || f.Why == "" {
					t.Errorf("%s: no source or reason: %+v", setting, f)
				}
			}
			for _, s := range tc.none {
				for _, f := range fs {
					if f.Setting == s {
						t.Errorf("%s listed for %s: %+v", s, tc.name, f)
					}
				}
			}
		})
	}
}

func TestConnReuseModeAcceptsTheBitItNeeds(t *testing.T) {
	for _, tc := range []struct {
		cur  string
		doc  string
		want Status
	}{
		{"2", drState, OK}, {"3", drState, OK}, {"1", drState, Change}, {"0", drState, Change},
		{"1", natState, OK}, {"3", natState, OK}, {"0", natState, Change},
	} {
		r := &Reading{Sysctls: map[string]string{"net.ipv4.vs.conn_reuse_mode": tc.cur}}
		f := find(t, Check(r, state(t, tc.doc), Load{}), "net.ipv4.vs.conn_reuse_mode")
		if f.Status != tc.want {
			t.Errorf("conn_reuse_mode=%s for %.30s: %s, want %s", tc.cur, tc.doc, f.Status, tc.want)
		}
	}
}

func TestAmemthreshFollowsTheLoad(t *testing.T) {
	r := &Reading{MemTotalKB: 8 << 20, Sysctls: map[string]string{"net.ipv4.vs.amemthresh": "1024"}}
	// 1,000,000 entries x 128 B x 2 = 256 MB = 62500 pages.
	f := find(t, Check(r, &ipvsmgr.State{}, Load{Conns: 1_000_000}), "net.ipv4.vs.amemthresh")
	if f.Value != "62500" || f.Status != Change {
		t.Errorf("amemthresh at a million entries: %+v", f)
	}
	// Never more than 1/16 of memory: 512 MB of RAM -> 8192 pages.
	r.MemTotalKB = 512 << 10
	f = find(t, Check(r, &ipvsmgr.State{}, Load{Conns: 1_000_000}), "net.ipv4.vs.amemthresh")
	if f.Value != "8192" {
		t.Errorf("amemthresh capped at 1/16 of 512 MB: %+v", f)
	}
}

func TestConntrackOnForFTP(t *testing.T) {
	r := &Reading{FTPHelper: true, Sysctls: map[string]string{"net.ipv4.vs.conntrack": "0"}}
	f := find(t, Check(r, &ipvsmgr.State{}, Load{}), "net.ipv4.vs.conntrack")
	if f.Status != OK || !strings.Contains(f.Why, "ip_vs_ftp") {
		t.Errorf("conntrack with the FTP helper: %+v", f)
	}
}

func TestSpreadNICIsOK(t *testing.T) {
	r := &Reading{CPUs: 4, Sysctls: map[string]string{"net.core.rps_sock_flow_entries": "32768"}, NICs: []NIC{
		{Name: "eth0", RxQueues: []Queue{{Name: "rx-0", RPSCPUs: "f"}}},
		{Name: "eth1", RxQueues: []Queue{{Name: "rx-0"}, {Name: "rx-1"}, {Name: "rx-2"}, {Name: "rx-3"}}, IRQCPUs: []string{"0", "1", "2", "3"}},
	}}
	fs := Check(r, &ipvsmgr.State{}, Load{})
	for _, s := range []string{"rps_cpus of eth0", "IRQ affinity of eth1", "net.core.rps_sock_flow_entries"} {
		if f := find(t, fs, s); f.Status != OK {
			t.Errorf("%s: %+v", s, f)
		}
	}
	for _, f := range fs {
		if f.Setting == "rps_cpus of eth1" {
			t.Errorf("a NIC with a queue per CPU needs no RPS: %+v", f)
		}
	}
	if got := cpuMask(40); got != "ff,ffffffff" {
		t.Errorf("cpuMask(40) = %s", got)
	}
	if got := maskCPUs("ff,ffffffff"); got != 40 {
		t.Errorf("maskCPUs = %d", got)
	}
}

func TestSummary(t *testing.T) {
	fs := []Finding{{Status: OK}, {Status: Change}, {Status: Far}, {Status: Change}, {Status: Info}}
	if got := Summary(fs); got != "5 settings: 1 ok, 2 to change, 1 far off, 1 informational" {
		t.Errorf("Summary: %s", got)
	}
	if !FarOff(fs) || FarOff(fs[:2]) {
		t.Error("FarOff")
	}
}

// TestApplyUndo applies the DR director's findings to a temporary root:
// the files written, the sysctls set and read back, a second apply changing
// nothing, and undo restoring the files and values as they were.
func TestApplyUndo(t *testing.T) {
	h := director(t, map[string]string{
		"/etc/sysctl.d/90-ipvsctl.conf": "-",
		"/etc/modprobe.d/ipvsctl.conf":  "# the operator's\noptions ip_vs conn_tab_bits=13\n",
	})
	undo := "/var/lib/ipvsctl/tune-undo.json"
	r, err := Read(h)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(h, Check(r, state(t, drState), Load{ConnRate: 200, Lifetime: 200}))
	if err != nil {
		t.Fatal(err)
	}
	wantDiff := `/etc/sysctl.d/90-ipvsctl.conf (new file)
+ # Written by ` + "`ipvsctl tune apply`; `ipvsctl tune undo`" + ` restores what was here before.
+ net.ipv4.vs.conn_reuse_mode = 2
+ net.ipv4.vs.expire_nodest_conn = 1
+ net.ipv4.vs.amemthresh = 2500
+ net.ipv4.vs.drop_entry = 1
+ net.core.rps_sock_flow_entries = 32768
/etc/modprobe.d/ipvsctl.conf
- # the operator's
- options ip_vs conn_tab_bits=13
+ # Written by ` + "`ipvsctl tune apply`; `ipvsctl tune undo`" + ` restores what was here before.
+ options ip_vs conn_tab_bits=15
sysctl net.ipv4.vs.conn_reuse_mode: 1 -> 2 (now)
sysctl net.ipv4.vs.expire_nodest_conn: 0 -> 1 (now)
sysctl net.ipv4.vs.amemthresh: 1024 -> 2500 (now)
sysctl net.ipv4.vs.drop_entry: 0 -> 1 (now)
sysctl net.core.rps_sock_flow_entries: 0 -> 32768 (now)
note: conn_tab_bits takes effect only when ip_vs is next loaded: reboot, or stop ipvsctl, run ` + "`ipvsadm -C`, `modprobe -r`" + ` every ip_vs module and start ipvsctl again (that drops every connection)
`
	if d := cmp.Diff(wantDiff, p.Diff()); d != "" {
		t.Fatalf("diff (-want +got):\n%s", d)
	}
	if err := Apply(h, p, undo, time.Unix(1e9, 0)); err != nil {
		t.Fatal(err)
	}
	r2, err := Read(h)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"net.ipv4.vs.conn_reuse_mode": "2", "net.ipv4.vs.amemthresh": "2500", "net.core.rps_sock_flow_entries": "32768"} {
		if r2.Sysctls[name] != want {
			t.Errorf("after apply %s = %q, want %s", name, r2.Sysctls[name], want)
		}
	}
	if r2.ModprobeBits != 15 {
		t.Errorf("after apply modprobe.d sets %d bits", r2.ModprobeBits)
	}
	// Applied again: the sysctls are fine now and the file keeps them.
	p2, err := NewPlan(h, Check(r2, state(t, drState), Load{ConnRate: 200, Lifetime: 200}))
	if err != nil {
		t.Fatal(err)
	}
	if !p2.Empty() {
		t.Errorf("a second apply would change:\n%s", p2.Diff())
	}

	if _, err := Undo(h, undo); err != nil {
		t.Fatal(err)
	}
	r3, err := Read(h)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(r.Sysctls, r3.Sysctls); d != "" {
		t.Errorf("sysctls after undo (-before +after):\n%s", d)
	}
	if _, err := os.Stat(filepath.Join(h.Root, SysctlFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after undo: %v (it did not exist before)", SysctlFile, err)
	}
	if b, _ := h.ReadFile(ModprobeFile); string(b) != "# the operator's\noptions ip_vs conn_tab_bits=13\n" {
		t.Errorf("%s after undo: %q", ModprobeFile, b)
	}
	if _, err := Undo(h, undo); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a second undo: %v, want nothing to undo", err)
	}
}

// A kernel that does not take a value is an error naming it.
func TestApplyReadsBack(t *testing.T) {
	h := director(t, nil)
	p := &Plan{Live: []LiveChange{{Name: "net.ipv4.vs.drop_entry", From: "0", To: "1"}}}
	// A directory where the sysctl's file is: the write fails.
	os.Remove(filepath.Join(h.Root, SysctlPath("net.ipv4.vs.drop_entry")))
	os.Mkdir(filepath.Join(h.Root, SysctlPath("net.ipv4.vs.drop_entry")), 0o755)
	err := Apply(h, p, "/undo.json", time.Now())
	if err == nil || !strings.Contains(err.Error(), "set sysctl net.ipv4.vs.drop_entry=1") {
		t.Errorf("Apply to an unwritable sysctl: %v", err)
	}
}
