//go:build vmtest

package vmtest

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
)

// bgpOrderDoc is a BGP-mode state (no speaker runs: `ipvsctl apply` only
// reconciles) with the real servers .1n for n in ns.
func bgpOrderDoc(ns ...int) string {
	var srv []string
	for _, n := range ns {
		srv = append(srv, fmt.Sprintf(`{"name":"rs%d","address":"198.18.0.1%d"}`, n, n))
	}
	return fmt.Sprintf(`{"settings":{"network":"dr","bgp":{"asn":65001,"peers":[{"address":"198.18.0.254","asn":65000}]}},
	"services":[{"name":"web","protocol":"tcp","address":"%s","port":80,"servers":[%s]}]}`, vip, strings.Join(srv, ","))
}

// nosortOrder is the real servers of the VIP's service in the kernel's own
// list order (ipvsadm -Ln sorts them; --nosort does not): the order mh
// builds its Maglev table from.
func (l *lab) nosortOrder() []string {
	l.t.Helper()
	var out []string
	for _, line := range strings.Split(l.ns(l.dir, "ipvsadm -Ln --nosort -t "+vip+":80"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "->" && f[1] != "RemoteAddress:Port" {
			out = append(out, f[1])
		}
	}
	return out
}

// In BGP mode a real server added to the state later takes its canonical
// place in the running director's kernel list, the place a director started
// afterwards gives it (so both build one Maglev table), and the servers
// re-added to get there keep their open connections: each long-lived
// connection still carries bytes and still reaches its real server.
func TestBGPAddedServerKeepsCanonicalKernelOrder(t *testing.T) {
	l := newLab(t, 3, false)
	// The VIP is on the director's lo (BGP mode, no ARP for it): the
	// client reaches it through a route, as through the upstream router.
	l.ns(l.cli, "ip route add "+vip+"/32 via "+labNet+".1")
	out := l.apply(bgpOrderDoc(3, 1))
	t.Logf("apply r1, r3:\n%s", out)
	if got, want := l.nosortOrder(), []string{"198.18.0.13:80", "198.18.0.11:80"}; !slices.Equal(got, want) {
		t.Fatalf("kernel order after adding r1, r3: %v, want %v", got, want)
	}
	// One long-lived connection to each of r1 and r3 (mh hashes the source
	// port: new connections until both are reached, at most 40).
	conns := map[string]net.Conn{}
	for i := 0; i < 40 && len(conns) < 2; i++ {
		c, err := l.dial(vip + ":80")
		if err != nil {
			t.Fatalf("connect through the VIP: %v", err)
		}
		name, err := ask(c)
		if err != nil {
			t.Fatalf("request through the VIP: %v", err)
		}
		if conns[name] != nil {
			c.Close()
			continue
		}
		conns[name] = c
		t.Cleanup(func() { c.Close() })
	}
	if conns["rs1"] == nil || conns["rs3"] == nil {
		t.Fatalf("no connection reached each of rs1 and rs3 in 40 tries: %v", conns)
	}
	nodest := strings.TrimSpace(l.ns(l.dir, "sysctl -n net.ipv4.vs.expire_nodest_conn"))
	out = l.apply(bgpOrderDoc(1, 2, 3))
	t.Logf("apply r1, r2, r3 (expire_nodest_conn=%s):\n%s", nodest, out)
	// The plan: add r2, then r3 (ahead of r2's place) deleted and re-added
	// at once; r1, the tail already in place, untouched.
	for _, want := range []string{"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80", "ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.13:80",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.13:80"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q", want)
		}
	}
	if strings.Contains(out, "198.18.0.11:80 -g") || strings.Contains(out, "-r 198.18.0.11:80\n") {
		t.Errorf("r1 (in place) was touched:\n%s", out)
	}
	if got, want := l.nosortOrder(), []string{"198.18.0.13:80", "198.18.0.12:80", "198.18.0.11:80"}; !slices.Equal(got, want) {
		t.Fatalf("kernel order after adding r2: %v, want %v (the canonical one, as a fresh director builds it)", got, want)
	}
	for name, c := range conns {
		for i := range 3 {
			again, err := ask(c)
			if err != nil || again != name {
				t.Errorf("connection to %s after the reorder (request %d): %q, %v", name, i, again, err)
				break
			}
		}
	}
	if n := l.activeConns("198.18.0.13:80"); n != 1 {
		t.Errorf("r3 re-added with %d active connections, want its 1 (taken back from the kernel's trash)", n)
	}
	// A second apply changes nothing: the order holds.
	if out := l.apply(bgpOrderDoc(1, 2, 3)); strings.Contains(out, "ipvsadm -") {
		t.Errorf("a second apply changed:\n%s", out)
	}
}
