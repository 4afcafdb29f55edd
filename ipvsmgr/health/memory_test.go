package health

import (
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// tcpChecks are n real servers of one service, each with its own tcp check
// every second.
func tcpChecks(n int) []ipvsmgr.ServerCheck {
	svc := ipvsmgr.ServiceKey{Family: 2, Protocol: 6, Addr: netip.MustParseAddr("198.18.0.100"), Port: 80}
	out := make([]ipvsmgr.ServerCheck, n)
	for i := range out {
		addr := netip.AddrFrom4([4]byte{198, 19, byte(i / 250), byte(1 + i%250)})
		ref := ipvsmgr.ServerRef{Service: svc, Server: ipvsmgr.DestKey{Addr: addr, Port: 80}}
		out[i] = ipvsmgr.ServerCheck{Ref: ref, ServiceName: "s", ServerName: ref.Server.String(), Weight: 1,
			OnFailure: "remove", Spec: ipvsmgr.CheckSpec{Type: "tcp", Target: netip.AddrPortFrom(addr, 80),
				Interval: time.Second, Timeout: time.Second, Rise: 1, Fall: 1}}
	}
	return out
}

// A member keeps no copy of its probe's spec: what the runner holds for
// each checked server.
func TestMemberKeepsNoSpec(t *testing.T) {
	if m, s := unsafe.Sizeof(member{}), unsafe.Sizeof(ipvsmgr.CheckSpec{}); m >= s {
		t.Errorf("a member is %d bytes, a check spec %d: the member holds a copy of the spec", m, s)
	}
}

// What the runner holds for 1,000 checked servers (B/op with -benchmem:
// each probe, member and key, made anew).
func BenchmarkRunnerUpdate1000(b *testing.B) {
	checks := tcpChecks(1000)
	b.ReportAllocs()
	for b.Loop() {
		r := NewRunner(Config{})
		r.Update(checks)
	}
}
