package health

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

const twoServers = `{"services":[{"name":"web","address":"198.18.0.100","port":80,
 "check":{"type":"tcp","interval":1,"timeout":1,"rise":1,"fall":1},
 "servers":[{"name":"r1","address":"198.18.0.11"},{"name":"r2","address":"198.18.0.12"}]}]}`

// A check that blocks past its interval makes its round late: Progress
// says which and by how much, counts the round once, and the server's
// status carries it; once the check returns, the round is on time again
// and every check has run once.
func TestProgressLateRoundAndFirstRuns(t *testing.T) {
	release := make(chan struct{})
	h := newHarnessWith(t, compile(t, twoServers), func(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
		if spec.Target.String() == "198.18.0.12:80" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return pass("connected")
	})
	if p := h.r.Progress(); p.Checks != 2 || p.Probes != 2 || p.NotRun != 2 || p.Late != 0 {
		t.Fatalf("before any run: %+v", p)
	}
	h.step(time.Second, 1) // both start; r2 blocks
	if p := h.r.Progress(); p.NotRun != 1 || p.Late != 0 || p.LateRounds != 0 {
		t.Fatalf("after r1's first result: %+v", p)
	}
	if st := h.status("r1"); st.LastCheck.IsZero() || st.LastAge != 0 {
		t.Errorf("r1 just checked: last %v, age %v", st.LastCheck, st.LastAge)
	}
	h.step(time.Second, 1)
	h.step(time.Second, 1) // r2 began at most 2 s ago... now more than its interval past its due time
	h.step(time.Second, 1)
	p := h.r.Progress()
	if p.Late != 1 || p.WorstTarget != "198.18.0.12:80" || p.WorstType != "tcp" || p.Worst <= time.Second || p.LateRounds != 1 {
		t.Fatalf("with r2 blocked 3 s past its start: %+v", p)
	}
	if again := h.r.Progress(); again.LateRounds != 1 {
		t.Errorf("the same late round counted again: %d", again.LateRounds)
	}
	if st := h.status("r2"); st.Late != p.Worst || !st.LastCheck.IsZero() {
		t.Errorf("r2's status: late %v (want %v), last check %v", st.Late, p.Worst, st.LastCheck)
	}
	if st := h.status("r1"); st.Late != 0 {
		t.Errorf("r1 is on time, status says late %v", st.Late)
	}
	h.clk.Advance(500 * time.Millisecond)
	if st := h.status("r1"); st.LastAge != 500*time.Millisecond {
		t.Errorf("r1's age half a second after its result: %v", st.LastAge)
	}
	close(release)
	for range 2 { // r2's blocked run, then the one due at once
		select {
		case <-h.results:
		case <-time.After(5 * time.Second):
			t.Fatal("r2's result did not come within 5 s")
		}
	}
	if p := h.r.Progress(); p.Late != 0 || p.NotRun != 0 || p.Worst != 0 || p.LateRounds != 1 {
		t.Errorf("after r2 returned: %+v", p)
	}
}

// What the daemon's watchdog costs each second at 10,000 distinct checks
// (one Progress: a walk of every check under the runner's lock).
func BenchmarkProgress10000(b *testing.B) {
	r := NewRunner(Config{Check: func(context.Context, *ipvsmgr.CheckSpec) Result { return pass("connected") }})
	sc := make([]ipvsmgr.ServerCheck, 10000)
	for i := range sc {
		addr := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		spec := ipvsmgr.CheckSpec{Type: "tcp", Target: netip.AddrPortFrom(addr, 80), Interval: time.Second, Timeout: time.Second, Rise: 1, Fall: 1}
		sc[i] = ipvsmgr.ServerCheck{Ref: ipvsmgr.ServerRef{Server: ipvsmgr.DestKey{Addr: addr, Port: 80}}, Spec: spec, Weight: 1}
	}
	r.Update(sc)
	for b.Loop() {
		if p := r.Progress(); p.Probes != 10000 {
			b.Fatalf("%d checks", p.Probes)
		}
	}
}
