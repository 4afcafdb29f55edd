package bgp

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func TestDecide(t *testing.T) {
	vip1, vip2 := netip.MustParseAddr("198.18.0.100"), netip.MustParseAddr("2001:db8::100")
	svcs := []Service{
		{Name: "web", VIP: vip1, Quorum: 2, Up: 2},
		{Name: "tls", VIP: vip1, Quorum: 1, Up: 1},
		{Name: "v6", VIP: vip2, Quorum: 1, Up: 3},
	}
	ok := Director{IPVS: true}
	p1, p2 := netip.MustParsePrefix("198.18.0.100/32"), netip.MustParsePrefix("2001:db8::100/128")
	for _, tc := range []struct {
		name string
		dir  Director
		svcs []Service
		want []Decision
	}{
		{"all served", ok, svcs, []Decision{{Prefix: p1, Announce: true}, {Prefix: p2, Announce: true}}},
		{"no ipvs", Director{}, svcs, []Decision{{Prefix: p1, Reason: "kernel IPVS is not available"}, {Prefix: p2, Reason: "kernel IPVS is not available"}}},
		{"reconcile failed", Director{IPVS: true, ReconcileErr: "netlink: EPERM"}, svcs[2:], []Decision{{Prefix: p2, Reason: "the last reconcile failed: netlink: EPERM"}}},
		{"changes failed", Director{IPVS: true, Failures: 2}, svcs[2:], []Decision{{Prefix: p2, Reason: "the last reconcile could not make 2 changes"}}},
		{"drained", Director{IPVS: true, Drained: true}, svcs[2:], []Decision{{Prefix: p2, Reason: "the director is drained"}}},
		{"one service of a VIP below quorum withdraws the VIP only", ok,
			[]Service{{Name: "web", VIP: vip1, Quorum: 2, Up: 1}, svcs[1], svcs[2]},
			[]Decision{{Prefix: p1, Reason: "below quorum: web has 1 of 2 real servers up"}, {Prefix: p2, Announce: true}}},
		{"quorum 0 means 1", ok, []Service{{Name: "v6", VIP: vip2, Up: 0}}, []Decision{{Prefix: p2, Reason: "below quorum: v6 has 0 of 1 real servers up"}}},
		{"no services", ok, nil, []Decision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(tc.dir, tc.svcs), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServicesFromDesired reads quorum and up counts from a compiled state
// with health laid over it: a quiesced (down) server does not count, nor a
// sorry server.
func TestServicesFromDesired(t *testing.T) {
	doc := `{"settings": {"bgp": {"asn": 65001, "peers": [{"address": "198.18.0.1", "asn": 65000}]}},
	  "services": [{"name": "web", "protocol": "tcp", "address": "198.18.0.100", "port": 80, "quorum": 2,
	    "check": {"type": "tcp"}, "sorry_server": {"address": "198.18.1.99"},
	    "servers": [{"address": "198.18.1.12"}, {"address": "198.18.1.11"}, {"address": "198.18.1.13"}]}]}`
	st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ipvsmgr.Compile(st)
	if err != nil {
		t.Fatal(err)
	}
	vs := d.Table.Services[0]
	if vs.Scheduler != "mh" || vs.Flags&ipvsmgr.FlagSched2 == 0 {
		t.Errorf("BGP mode scheduler = %s flags %#x, want mh with port", vs.Scheduler, vs.Flags)
	}
	var order []string
	for _, dst := range vs.Dests {
		order = append(order, dst.Key.Addr.String())
	}
	if diff := cmp.Diff([]string{"198.18.1.11", "198.18.1.12", "198.18.1.13"}, order); diff != "" {
		t.Errorf("real servers not in canonical order (-want +got):\n%s", diff)
	}
	if len(d.VIPs) != 1 || d.VIPs[0].Interface != "lo" {
		t.Errorf("VIPs = %v, want the VIP on lo", d.VIPs)
	}
	up := ipvsmgr.HealthUp
	view := &ipvsmgr.HealthView{Servers: map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{}}
	for i, c := range d.Checks {
		if c.OnFailure != "quiesce" {
			t.Errorf("check %d on_failure = %q, want quiesce in BGP mode", i, c.OnFailure)
		}
		state := up
		if c.Ref.Server.Addr.String() != "198.18.1.11" {
			state = ipvsmgr.HealthDown
		}
		view.Servers[c.Ref] = ipvsmgr.ServerHealth{State: state}
	}
	eff := ipvsmgr.ApplyHealth(d.Table, d, view)
	if n := len(eff.Services[0].Dests); n != 4 {
		t.Errorf("effective table has %d destinations, want 3 (two quiesced, not removed) + the sorry server", n)
	}
	got := Services(d, eff)
	want := []Service{{Name: "web", VIP: netip.MustParseAddr("198.18.0.100"), Quorum: 2, Up: 1}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("Services (-want +got):\n%s", diff)
	}
	ds := Decide(Director{IPVS: true}, got)
	if len(ds) != 1 || ds[0].Announce {
		t.Errorf("Decide = %+v, want the VIP withdrawn below quorum", ds)
	}
}
