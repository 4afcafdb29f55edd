package ipvsmgr_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

const checkedServers = `{"services":[{"name":"web","address":"198.18.0.100","port":80,
 "check":{"type":"http","on_failure":"quiesce"},
 "sorry_server":{"address":"198.18.0.50"},
 "servers":[{"name":"r1","address":"198.18.0.11","weight":4},
            {"name":"r2","address":"198.18.0.12","check":{"on_failure":"remove"}},
            {"name":"r3","address":"198.18.0.13","check":{"start_healthy":true}},
            {"name":"r4","address":"198.18.0.14","health":"down"}]},
 {"name":"plain","address":"198.18.0.101","port":80,"servers":[{"address":"198.18.0.11"}]}]}`

func ref(svc, rs string) ipvsmgr.ServerRef {
	ap := netip.MustParseAddrPort(svc)
	rp := netip.MustParseAddrPort(rs)
	return ipvsmgr.ServerRef{
		Service: ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: ap.Addr(), Port: ap.Port()},
		Server:  ipvsmgr.DestKey{Addr: rp.Addr(), Port: rp.Port()},
	}
}

func (g *rig) reconcileWith(t *testing.T, doc string, view *ipvsmgr.HealthView) []string {
	t.Helper()
	d := mustCompile(t, doc)
	d.Health = view
	if _, err := g.r.Reconcile(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return g.k.Ops()
}

func TestHealthOverlay(t *testing.T) {
	up := ipvsmgr.ServerHealth{State: ipvsmgr.HealthUp}
	down := ipvsmgr.ServerHealth{State: ipvsmgr.HealthDown}
	r1, r2, r3, r4 := ref("198.18.0.100:80", "198.18.0.11:80"), ref("198.18.0.100:80", "198.18.0.12:80"), ref("198.18.0.100:80", "198.18.0.13:80"), ref("198.18.0.100:80", "198.18.0.14:80")
	steps := []struct {
		name string
		view *ipvsmgr.HealthView
		want []string
	}{
		{"nothing checked yet: only start_healthy is in, and r4 forced down is quiesced", &ipvsmgr.HealthView{}, []string{
			"ipvsadm -A -t 198.18.0.100:80 -s wlc",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.13:80 -g -w 1",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.14:80 -g -w 0",
			"ipvsadm -A -t 198.18.0.101:80 -s wlc",
			"ipvsadm -a -t 198.18.0.101:80 -r 198.18.0.11:80 -g -w 1",
		}},
		{"r3 fails its first check: out of quorum, the sorry server comes", &ipvsmgr.HealthView{Servers: map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{r3: down}}, []string{
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.13:80 -g -w 0",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.50:80 -g -w 1",
		}},
		{"r1 and r2 up (r1 ramping), r4 up but forced down: the sorry server goes", &ipvsmgr.HealthView{Servers: map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{
			r1: {State: ipvsmgr.HealthUp, Weight: 2, WeightSet: true}, r2: up, r3: down, r4: up}}, []string{
			"ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.50:80",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 2",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 1",
		}},
		{"r2 down is removed (its on_failure), r1 down is quiesced", &ipvsmgr.HealthView{Servers: map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{
			r1: down, r2: down, r3: up}}, []string{
			"ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.12:80",
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 0",
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.13:80 -g -w 1",
		}},
		{"no checks running (no daemon): as configured, but forced health still holds", &ipvsmgr.HealthView{NoChecks: true}, []string{
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 4",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 1",
		}},
		{"no view at all: today's behaviour, the desired table as it is", nil, []string{
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.14:80 -g -w 1",
		}},
	}
	g := newRig(t)
	for _, s := range steps {
		if diff := cmp.Diff(s.want, g.reconcileWith(t, checkedServers, s.view)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}
	// The same views give the same tables: applying twice changes nothing.
	if ops := g.reconcileWith(t, checkedServers, nil); len(ops) != 0 {
		t.Errorf("second reconcile: %q", ops)
	}
}

// A document without checks plans exactly as before, whatever view is given.
func TestHealthOverlayWithoutChecks(t *testing.T) {
	d := mustCompile(t, twoServers)
	if len(d.Checks) != 0 || len(d.Sorry) != 0 {
		t.Fatalf("checks compiled from a document without any: %+v %+v", d.Checks, d.Sorry)
	}
	got := ipvsmgr.ApplyHealth(d.Table, d, &ipvsmgr.HealthView{})
	if got != d.Table {
		t.Error("the table was rebuilt for a document without checks")
	}
}

// In BGP mode every director must add a service's real servers in the
// same order: mh builds its Maglev table walking the kernel's list, and
// IPVS puts each new destination at its head. A server not checked yet is
// in at weight 0 (not out until its first pass, which would add the
// servers in the order their checks happen to pass on each director), and
// its first pass only sets its weight.
func TestBGPServersHoldTheirPlaceBeforeTheirFirstCheck(t *testing.T) {
	const doc = `{"settings": {"network": "dr", "bgp": {"asn": 65001, "peers": [{"address": "198.18.0.254", "asn": 65000}]}},
	  "services": [{"name": "web", "address": "198.18.0.100", "port": 80, "check": {"type": "http"},
	    "servers": [{"address": "198.18.0.13"}, {"address": "198.18.0.11"}, {"address": "198.18.0.12"}]}]}`
	up := ipvsmgr.ServerHealth{State: ipvsmgr.HealthUp}
	r1, r2, r3 := ref("198.18.0.100:80", "198.18.0.11:80"), ref("198.18.0.100:80", "198.18.0.12:80"), ref("198.18.0.100:80", "198.18.0.13:80")
	steps := []struct {
		name string
		view *ipvsmgr.HealthView
		want []string
	}{
		{"nothing checked yet: all three in at weight 0, in the canonical order", &ipvsmgr.HealthView{}, []string{
			"ipvsadm -A -t 198.18.0.100:80 -s mh -b mh-port",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 0",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 0",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.13:80 -g -w 0",
		}},
		{"r3 passes first: its weight is set, nothing is added", &ipvsmgr.HealthView{Servers: map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{r3: up}}, []string{
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.13:80 -g -w 1",
		}},
		{"then r1 and r2", &ipvsmgr.HealthView{Servers: map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{r1: up, r2: up, r3: up}}, []string{
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1",
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 1",
		}},
		{"r2 fails: quiesced in its place", &ipvsmgr.HealthView{Servers: map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{r1: up, r2: {State: ipvsmgr.HealthDown}, r3: up}}, []string{
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 0",
		}},
	}
	g := newRig(t)
	for _, s := range steps {
		if diff := cmp.Diff(s.want, g.reconcileWith(t, doc, s.view)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}
}

// A sorry server at a real server's address (keepalived's
// s_svr_duplicates_rs) is one destination: while that server is in, the
// kernel has it as the server; once it is out (removed, or quiesced at
// weight 0) and the quorum is lost, the sorry server takes its place at its
// own weight; the kernel never gets the address twice.
func TestSorryServerIsARealServer(t *testing.T) {
	const doc = `{"services":[{"name":"web","address":"198.18.0.100","port":80,
 "check":{"type":"http","on_failure":"remove"}, "quorum":2,
 "sorry_server":{"address":"198.18.0.12"},
 "servers":[{"name":"r1","address":"198.18.0.11","weight":3},
            {"name":"r2","address":"198.18.0.12","weight":5},
            {"name":"r3","address":"198.18.0.13","weight":5,"check":{"on_failure":"quiesce"}}]}]}`
	up := ipvsmgr.ServerHealth{State: ipvsmgr.HealthUp}
	down := ipvsmgr.ServerHealth{State: ipvsmgr.HealthDown}
	r1, r2, r3 := ref("198.18.0.100:80", "198.18.0.11:80"), ref("198.18.0.100:80", "198.18.0.12:80"), ref("198.18.0.100:80", "198.18.0.13:80")
	steps := []struct {
		name string
		view map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth
		want []string
	}{
		{"all up", map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{r1: up, r2: up, r3: up}, []string{
			"ipvsadm -A -t 198.18.0.100:80 -s wlc",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 3",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 5",
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.13:80 -g -w 5",
		}},
		{"r1 down: quorum lost, but r2 (the sorry server's address) is in as itself", map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{r1: down, r2: up, r3: down}, []string{
			"ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.11:80",
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.13:80 -g -w 0",
		}},
		{"r2 down too: the sorry server comes at its address, weight 1", map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{r1: down, r2: down, r3: down}, []string{
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 1",
		}},
		{"all up again: r2 is itself again", map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{r1: up, r2: up, r3: up}, []string{
			"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 3",
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 5",
			"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.13:80 -g -w 5",
		}},
	}
	g := newRig(t)
	for _, s := range steps {
		if diff := cmp.Diff(s.want, g.reconcileWith(t, doc, &ipvsmgr.HealthView{Servers: s.view})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}
	// A quiesced server at the sorry server's address is taken over too.
	const quiesced = `{"services":[{"name":"web","address":"198.18.0.100","port":80,
 "check":{"type":"http","on_failure":"quiesce"},
 "sorry_server":{"address":"198.18.0.11"},
 "servers":[{"name":"r1","address":"198.18.0.11","weight":3}]}]}`
	g = newRig(t)
	got := g.reconcileWith(t, quiesced, &ipvsmgr.HealthView{Servers: map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{r1: down}})
	want := []string{"ipvsadm -A -t 198.18.0.100:80 -s wlc", "ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("quiesced (-want +got):\n%s", diff)
	}
}
