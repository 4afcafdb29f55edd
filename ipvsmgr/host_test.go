package ipvsmgr_test

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

var (
	vip100 = ipvsmgr.VIP{Interface: "eth0", Addr: netip.MustParseAddr("198.18.0.100")}
	vip101 = ipvsmgr.VIP{Interface: "eth0", Addr: netip.MustParseAddr("198.18.0.101")}
)

const (
	natDoc = `{"settings":{"network":"nat"},"services":[{"name":"web","address":"198.18.0.100","port":80,"interface":"eth0",
	 "scheduler":"wlc","servers":[{"address":"198.18.1.11"}]}]}`
	markDoc = `{"services":[{"name":"fw","fwmark":7,"address":"198.18.0.101","interface":"eth0","scheduler":"mh",
	 "match":[{"protocol":"tcp","ports":[80,443]}],"servers":[{"address":"198.18.0.11"}]},
	 {"name":"fw6","fwmark":8,"address":"2001:db8::101","scheduler":"rr",
	 "match":[{"protocol":"udp","ports":[53]}],"servers":[{"address":"2001:db8::11"}]}]}`
)

func ops(hos []ipvsmgr.HostOp) []string {
	out := []string{}
	for _, op := range hos {
		out = append(out, op.String())
	}
	return out
}

// TestPlanHost is the pure decision: what the host has, the ledger and the
// desired state in, the commands out.
func TestPlanHost(t *testing.T) {
	nat := mustCompile(t, natDoc)
	marks := mustCompile(t, markDoc)
	empty := mustCompile(t, `{"services":[]}`)
	all := map[string]bool{"ip_vs": true, "ip_vs_wlc": true, "ip_vs_mh": true, "ip_vs_rr": true}
	rule7 := marks.Marks[0].ID()
	for _, tc := range []struct {
		name string
		in   ipvsmgr.HostPlanInput
		want []string
	}{{
		name: "a NAT service on a bare host: modules, forwarding, then its VIP",
		in:   ipvsmgr.HostPlanInput{Desired: nat, Seen: &ipvsmgr.HostState{}, Ledger: &ipvsmgr.Ledger{}, Marks: true},
		want: []string{"modprobe ip_vs", "modprobe ip_vs_wlc", "sysctl net.ipv4.ip_forward=1", "ip addr add 198.18.0.100 dev eth0"},
	}, {
		name: "a NAT service on a host that has all it needs: nothing",
		in: ipvsmgr.HostPlanInput{Desired: nat, Ledger: &ipvsmgr.Ledger{VIPs: []ipvsmgr.VIP{vip100}}, Marks: true,
			Seen: &ipvsmgr.HostState{Modules: all, Sysctls: map[string]string{"net.ipv4.ip_forward": "1"}, Up: map[ipvsmgr.VIP]bool{vip100: true}}},
		want: []string{},
	}, {
		name: "fwmark services: rules per family, a stale rule deleted after the adds, a duplicate trimmed",
		in: ipvsmgr.HostPlanInput{Desired: marks, Ledger: &ipvsmgr.Ledger{Marks: true}, Marks: true,
			Seen: &ipvsmgr.HostState{Modules: all, Up: map[ipvsmgr.VIP]bool{vip101: true},
				Marks: []string{rule7, "ipvsctl:9:tcp:80:198.18.0.99", rule7}, MarkChain: [2]bool{true, false}}},
		want: []string{
			"ip6tables -t mangle -A IPVSCTL-FWMARK -d 2001:db8::101/128 -p udp -m multiport --dports 53 -m comment --comment ipvsctl:8:udp:53:2001:db8::101 -j MARK --set-mark 8",
			"iptables -t mangle -D IPVSCTL-FWMARK (duplicates of rule " + rule7 + ")",
			"iptables -t mangle -D IPVSCTL-FWMARK (rule ipvsctl:9:tcp:80:198.18.0.99)",
		},
	}, {
		name: "the last service gone: its VIP (ipvsctl's) and the rules go, an address of someone else's stays",
		in: ipvsmgr.HostPlanInput{Desired: empty, Ledger: &ipvsmgr.Ledger{VIPs: []ipvsmgr.VIP{vip101}, Marks: true}, Marks: true,
			Seen: &ipvsmgr.HostState{Up: map[ipvsmgr.VIP]bool{vip100: true, vip101: true}, Marks: []string{rule7}, MarkChain: [2]bool{true, true}}},
		want: []string{
			"iptables -t mangle -D IPVSCTL-FWMARK (rule " + rule7 + ")",
			"iptables -t mangle -X IPVSCTL-FWMARK", "ip6tables -t mangle -X IPVSCTL-FWMARK",
			"ip addr del 198.18.0.101 dev eth0",
		},
	}, {
		name: "a write's partial plan keeps the VIPs of the services it did not touch",
		in: ipvsmgr.HostPlanInput{Desired: empty, Ledger: &ipvsmgr.Ledger{VIPs: []ipvsmgr.VIP{vip100, vip101}}, Keep: []ipvsmgr.VIP{vip100},
			Seen: &ipvsmgr.HostState{Up: map[ipvsmgr.VIP]bool{vip100: true, vip101: true}}},
		want: []string{"ip addr del 198.18.0.101 dev eth0"},
	}, {
		name: "a VIP that could not be looked up is tried (its failure says why)",
		in: ipvsmgr.HostPlanInput{Desired: nat, Ledger: &ipvsmgr.Ledger{}, Marks: true,
			Seen: &ipvsmgr.HostState{Modules: all, Sysctls: map[string]string{"net.ipv4.ip_forward": "1"}, VIPErr: map[ipvsmgr.VIP]string{vip100: "netlink: busy"}}},
		want: []string{"ip addr add 198.18.0.100 dev eth0"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ops(ipvsmgr.PlanHost(tc.in))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestHostTransitionsInRandomOrder replays states on the recording fake in
// random order: each reconcile leaves the host with what its state needs,
// and a second one changes nothing.
func TestHostTransitionsInRandomOrder(t *testing.T) {
	states := []string{`{"services":[]}`, natDoc, markDoc, twoServers,
		`{"services":[{"address":"2001:db8::1","port":53,"protocol":"udp","forwarding":"nat","scheduler":"sh","servers":[{"address":"2001:db8::11"}]}]}`}
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 20 {
		g := newRig(t)
		g.host.NoModules()
		order := rng.Perm(len(states))
		for _, i := range order {
			d := mustCompile(t, states[i])
			res, err := g.r.Reconcile(context.Background(), d)
			if err != nil || len(res.Failures) > 0 {
				t.Fatalf("round %d state %d: %v %v", round, i, err, res.Failures)
			}
			g.host.Ops()
			if again, _ := g.r.Reconcile(context.Background(), d); len(again.Changes) > 0 {
				t.Fatalf("round %d state %d: second reconcile changed %v", round, i, again.Changes)
			}
			if hops := g.host.Ops(); len(hops) > 0 {
				t.Fatalf("round %d state %d: second reconcile changed the host %v", round, i, hops)
			}
			seen, _ := g.host.Observe(context.Background(), ipvsmgr.HostQuery{VIPs: []ipvsmgr.VIP{vip100, vip101}, Marks: true})
			var up []string
			for _, v := range []ipvsmgr.VIP{vip100, vip101} {
				if seen.Up[v] {
					up = append(up, v.Addr.String())
				}
			}
			var want []string
			for _, v := range d.VIPs {
				if v.Interface == "eth0" {
					want = append(want, v.Addr.String())
				}
			}
			slices.Sort(want)
			if !slices.Equal(up, want) {
				t.Fatalf("round %d state %d: VIPs up %v, want %v", round, i, up, want)
			}
			var rules []string
			for _, r := range d.Marks {
				rules = append(rules, r.ID())
			}
			if !slices.Equal(seen.Marks, rules) {
				t.Fatalf("round %d state %d: mangle rules %v, want %v", round, i, seen.Marks, rules)
			}
			if strings.Contains(states[i], `"nat"`) && g.host.Sysctl("net.ipv4.ip_forward") != "1" && g.host.Sysctl("net.ipv6.conf.all.forwarding") != "1" {
				t.Fatalf("round %d state %d: NAT without forwarding", round, i)
			}
		}
	}
}

// TestWriteOfANATServiceSetsForwarding: the daemon's write path plans only
// the service a write changed, against the table it knows; the service
// still gets its forwarding (the bug: it did only when the daemon opened the
// kernel).
func TestWriteOfANATServiceSetsForwarding(t *testing.T) {
	g := newRig(t)
	res, _ := g.reconcile(t, twoServers)
	if g.host.Sysctl("net.ipv4.ip_forward") != "" {
		t.Fatal("forwarding set for a DR state")
	}
	both := strings.Replace(twoServers, `]}]}`, `]},{"name":"nat","address":"198.18.0.100","port":8080,"forwarding":"nat","servers":[{"address":"198.18.1.11"}]}]}`, 1)
	d := mustCompile(t, both)
	key := d.Table.Services[1].Key
	g.host.Ops()
	got, err := g.r.ReconcileOn(context.Background(), d, res.Table, []ipvsmgr.ServiceKey{key})
	if err != nil || len(got.Failures) > 0 {
		t.Fatal(err, got.Failures)
	}
	if diff := cmp.Diff([]string{"sysctl net.ipv4.ip_forward=1"}, g.host.Ops()); diff != "" {
		t.Fatalf("host ops (-want +got):\n%s", diff)
	}
	if !slices.Contains(got.Changes, "sysctl net.ipv4.ip_forward=1") {
		t.Fatalf("the write's changes do not say so: %v", got.Changes)
	}
}

// TestHostFailuresAreListed: a host change that fails is a failure naming
// it, the others still happen, and the ledger keeps what it could not undo.
func TestHostFailuresAreListed(t *testing.T) {
	g := newRig(t)
	g.host.FailAdds(1)
	res, _ := g.reconcile(t, natDoc)
	if len(res.Failures) != 1 || res.Failures[0].Change != "add VIP 198.18.0.100 on eth0" || !strings.Contains(res.Failures[0].Err, "file exists") {
		t.Fatalf("failures = %+v", res.Failures)
	}
	if g.host.Sysctl("net.ipv4.ip_forward") != "1" {
		t.Fatal("forwarding not set beside the failed VIP")
	}
	if res, _ = g.reconcile(t, natDoc); len(res.Failures) != 0 || !g.up(vip100) {
		t.Fatalf("the next reconcile did not add the VIP: %+v", res.Failures)
	}
}

var _ ipvsmgr.Host = (*fakekernel.Host)(nil)
