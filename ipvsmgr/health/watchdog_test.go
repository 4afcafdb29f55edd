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
	p = h.r.Progress()
	if p.Late != 0 || p.NotRun != 0 || p.Worst != 0 || p.LateRounds != 1 {
		t.Errorf("after r2 returned: %+v", p)
	}
	// The start delay is the scheduler's: a run after one that overran is
	// due when that one's result came, and starts then. The first two runs
	// were due at random within the first second (the fake clock stepped
	// over it); the others started on time.
	d := p.StartDelay
	var withinASecond uint64 // DelayBounds[9] is 1 s
	for _, c := range d.Counts[:10] {
		withinASecond += c
	}
	if d.Count != 6 || d.Counts[0] != 4 || withinASecond != 6 {
		t.Errorf("start delays %+v: want 6 runs, 4 on time and 2 up to a second late", d)
	}
}

// Delays puts each duration in the first bucket whose bound holds it, and
// its quantiles interpolate within a bucket as histogram_quantile does.
func TestDelaysQuantile(t *testing.T) {
	var d Delays
	if d.Quantile(0.99) != 0 {
		t.Errorf("an empty histogram's p99: %v", d.Quantile(0.99))
	}
	for range 98 {
		d.add(-time.Millisecond) // early: counted as on time
	}
	d.add(1500 * time.Microsecond) // (1 ms, 2 ms]
	d.add(time.Minute)             // beyond 5 s
	if d.Counts[0] != 98 || d.Counts[1] != 1 || d.Counts[len(DelayBounds)] != 1 || d.Count != 100 || d.Sum != time.Minute+1500*time.Microsecond {
		t.Fatalf("buckets %+v", d)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.49, 500 * time.Microsecond}, {0.98, time.Millisecond}, {0.985, 1500 * time.Microsecond}, {0.995, 5 * time.Second}} {
		if got := d.Quantile(c.q); (got - c.want).Abs() > time.Microsecond {
			t.Errorf("quantile %v: %v, want %v", c.q, got, c.want)
		}
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
