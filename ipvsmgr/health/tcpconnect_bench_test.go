//go:build linux

package health

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// BenchmarkTCPCheck1000 checks 1,000 listeners of the test process once each
// per round, by a Go dial in a goroutine each (as every check type runs), by
// the connector and by the half-open prober (skipped without CAP_NET_RAW),
// and reports the process's CPU time (user and system,
// the listeners' share of the handshakes included) per check. The listeners
// never accept during a round; their queues are emptied between rounds,
// outside the measure.
func BenchmarkTCPCheck1000(b *testing.B) {
	fds, specs := rawListeners(b, 1000)
	ctx := context.Background()
	run := func(b *testing.B, round func() int64) {
		var user, sys time.Duration
		var failed int64
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			u0, s0 := cpuTime(b)
			failed += round()
			u1, s1 := cpuTime(b)
			user, sys = user+u1-u0, sys+s1-s0
			b.StopTimer()
			drain(fds)
			b.StartTimer()
		}
		if failed > 0 {
			b.Fatalf("%d checks did not pass", failed)
		}
		checks := float64(b.N * len(specs))
		b.ReportMetric(float64((user+sys).Nanoseconds())/1e3/checks, "cpu-µs/check")
		b.ReportMetric(float64(user.Nanoseconds())/1e3/checks, "user-µs/check")
		b.ReportMetric(float64(sys.Nanoseconds())/1e3/checks, "sys-µs/check")
	}
	b.Run("dial", func(b *testing.B) {
		c := &Checker{}
		run(b, func() int64 {
			var failed atomic.Int64
			var wg sync.WaitGroup
			for _, s := range specs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if c.Run(ctx, s).Outcome != Pass {
						failed.Add(1)
					}
				}()
			}
			wg.Wait()
			return failed.Load()
		})
	})
	// Every check at once on a connector or the prober, results by callback.
	onEach := func(b *testing.B, start func(*ipvsmgr.CheckSpec, time.Time, func(Result)) bool) {
		run(b, func() int64 {
			var failed atomic.Int64
			var wg sync.WaitGroup
			now := time.Now()
			for _, s := range specs {
				wg.Add(1)
				if !start(s, now, func(r Result) {
					if r.Outcome != Pass {
						failed.Add(1)
					}
					wg.Done()
				}) {
					b.Fatal("the check was refused")
				}
			}
			wg.Wait()
			return failed.Load()
		})
	}
	b.Run("epoll", func(b *testing.B) { onEach(b, connector(b).start) })
	b.Run("synprobe", func(b *testing.B) { onEach(b, prober(b).start) })
}

// rawListeners opens n listeners on 127.0.0.1 that accept nothing by
// themselves (drain empties their queues).
func rawListeners(b *testing.B, n int) ([]int, []*ipvsmgr.CheckSpec) {
	fds := make([]int, 0, n)
	specs := make([]*ipvsmgr.CheckSpec, 0, n)
	b.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	for range n {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		fds = append(fds, fd)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			b.Fatal(err)
		}
		if err := unix.Listen(fd, 4096); err != nil {
			b.Fatal(err)
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			b.Fatal(err)
		}
		target := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*unix.SockaddrInet4).Port))
		specs = append(specs, &ipvsmgr.CheckSpec{Type: "tcp", Target: target, Timeout: time.Second, Interval: time.Second, Rise: 1, Fall: 1})
	}
	return fds, specs
}

func drain(fds []int) {
	for _, fd := range fds {
		for {
			nfd, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
			if err != nil {
				break
			}
			unix.Close(nfd)
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) (user, sys time.Duration) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// BenchmarkRunnerTCP1000 runs the scheduler on 1,000 tcp checks every 100 ms
// for a second (about 10,000 checks), dialled, on the connector or on the
// prober, and reports the process's CPU time per check.
func BenchmarkRunnerTCP1000(b *testing.B) {
	fds, specs := rawListeners(b, 1000)
	for _, mode := range []string{"dial", "epoll", "synprobe"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "synprobe" && !canRaw() {
				testenv.Need(b, "needs CAP_NET_RAW")
			}
			var user, sys time.Duration
			var checks int64
			for i := 0; i < b.N; i++ {
				var n atomic.Int64
				r := NewRunner(Config{})
				r.noConnector = mode == "dial"
				r.noSynProbe = mode == "epoll"
				r.afterResult = func() { n.Add(1) }
				sc := make([]ipvsmgr.ServerCheck, len(specs))
				for j, s := range specs {
					spec := *s
					spec.Interval = 100 * time.Millisecond
					sc[j] = ipvsmgr.ServerCheck{Ref: ipvsmgr.ServerRef{Server: ipvsmgr.DestKey{Addr: s.Target.Addr(), Port: s.Target.Port()}}, Spec: spec, Weight: 1}
				}
				r.Update(sc)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				u0, s0 := cpuTime(b)
				r.Run(ctx)
				u1, s1 := cpuTime(b)
				cancel()
				user, sys, checks = user+u1-u0, sys+s1-s0, checks+n.Load()
				b.StopTimer()
				drain(fds)
				b.StartTimer()
			}
			b.ReportMetric(float64((user+sys).Nanoseconds())/1e3/float64(checks), "cpu-µs/check")
			b.ReportMetric(float64(user.Nanoseconds())/1e3/float64(checks), "user-µs/check")
			b.ReportMetric(float64(checks)/float64(b.N), "checks/op")
		})
	}
}
