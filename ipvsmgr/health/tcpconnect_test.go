//go:build linux

package health

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// tcpChecker is what the connector and the prober have in common.
type tcpChecker interface {
	start(spec *ipvsmgr.CheckSpec, now time.Time, done func(Result)) bool
	run(ctx context.Context)
}

// running runs c until the test ends.
func running[C tcpChecker](t testing.TB, c C) C {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}

// connector starts a tcpConnector for the test and stops it at its end.
func connector(t testing.TB) *tcpConnector {
	t.Helper()
	tcp, err := newTCPConnector()
	if err != nil {
		t.Fatal(err)
	}
	return running(t, tcp)
}

// connectOnce runs one check on c and waits for its result (bounded).
func connectOnce(t *testing.T, c tcpChecker, spec *ipvsmgr.CheckSpec) Result {
	t.Helper()
	got := make(chan Result, 1)
	if !c.start(spec, time.Now(), func(r Result) { got <- r }) {
		t.Fatalf("%s: the check was refused", spec.Target)
	}
	select {
	case r := <-got:
		return r
	case <-time.After(spec.Timeout + 5*time.Second):
		t.Fatalf("%s: no result %v after its timeout", spec.Target, 5*time.Second)
		return Result{}
	}
}

// fullListener is a listener whose accept queue is full: a SYN to it is
// dropped, so a connect hangs until the check's timeout.
func fullListener(t *testing.T, host string) string {
	t.Helper()
	lc := net.ListenConfig{}
	ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	// Listen again with a backlog of 0 (one connection fits) on the same socket.
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	raw.Control(func(fd uintptr) { unix.Listen(int(fd), 0) })
	for i := 0; i < 2; i++ {
		d := net.Dialer{Timeout: 200 * time.Millisecond}
		if c, err := d.Dial("tcp", ln.Addr().String()); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	return ln.Addr().String()
}

func TestTCPConnector(t *testing.T) {
	tcp := connector(t)
	for _, host := range loopbacks(t) {
		ln := listen(t, "tcp", host)
		ipvsmgrtest.AcceptAndClose(ln)
		r := connectOnce(t, tcp, specFor("tcp", ln.Addr().String()))
		expect(t, host+" listening", r, Pass, "connected")
		if r.Duration <= 0 || r.Weight != -1 || r.Percent != -1 {
			t.Errorf("%s listening: result %+v: want a duration, no weight, no percentage", host, r)
		}
		expect(t, host+" closed", connectOnce(t, tcp, specFor("tcp", closedPort(t, "tcp", host))), Fail, "connection refused")

		spec := specFor("tcp", fullListener(t, host))
		spec.Timeout = 300 * time.Millisecond
		r = connectOnce(t, tcp, spec)
		expect(t, host+" backlog full", r, Fail, "timeout after 300ms")
		if r.Duration < spec.Timeout || r.Duration > spec.Timeout+time.Second {
			t.Errorf("%s backlog full: took %v, want about %v", host, r.Duration, spec.Timeout)
		}
	}
}

// TEST-NET-1 answers nothing: without a route the connect fails at once, a
// fault of the director; with one it times out.
func TestTCPConnectorBlackhole(t *testing.T) {
	tcp := connector(t)
	spec := specFor("tcp", "192.0.2.1:80")
	spec.Timeout = 200 * time.Millisecond
	r := connectOnce(t, tcp, spec)
	if r.Outcome == Fail && r.Reason == "connection refused" {
		testenv.Elsewhere(t, "TestTCPConnector (its full backlog times out) and the namespaces' blackhole route (netnsPair)", "192.0.2.1 is refused here: a firewall answers for TEST-NET-1")
	}
	if !(r.Outcome == Fail && r.Reason == "timeout after 200ms") && !(r.Outcome == Fault && strings.Contains(r.Reason, "unreachable")) {
		t.Errorf("192.0.2.1: got %s %q, want a timeout after 200ms (or no route: a fault)", r.Outcome, r.Reason)
	}
}

// The checks of many targets run at once, each finishing at its own time.
func TestTCPConnectorMixed(t *testing.T) {
	tcp := connector(t)
	open := listen(t, "tcp", "127.0.0.1")
	ipvsmgrtest.AcceptAndClose(open)
	full, closed := fullListener(t, "127.0.0.1"), closedPort(t, "tcp", "127.0.0.1")
	type want struct {
		outcome Outcome
		reason  string
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	bad := map[string]int{}
	for i := 0; i < 60; i++ {
		target, w := open.Addr().String(), want{Pass, "connected"}
		switch i % 3 {
		case 1:
			target, w = closed, want{Fail, "connection refused"}
		case 2:
			target, w = full, want{Fail, "timeout after 200ms"}
		}
		spec := specFor("tcp", target)
		spec.Timeout = 200 * time.Millisecond
		wg.Add(1)
		if !tcp.start(spec, time.Now(), func(r Result) {
			defer wg.Done()
			if r.Outcome != w.outcome || r.Reason != w.reason {
				mu.Lock()
				bad[fmt.Sprintf("%s: %s %q, want %s %q", target, r.Outcome, r.Reason, w.outcome, w.reason)]++
				mu.Unlock()
			}
		}) {
			t.Fatal("the connector refused a check")
		}
	}
	wg.Wait()
	for b, n := range bad {
		t.Errorf("%d times %s", n, b)
	}
}

// A passed check resets its connection: neither side keeps a TIME_WAIT. The
// listener has a loopback address of its own, and only sockets with that
// address and port at one end count: another test's connection that took the
// same port number as its ephemeral port (and left a TIME_WAIT) is not ours.
func TestTCPConnectorLeavesNoTimeWait(t *testing.T) {
	tcp := connector(t)
	const host = "127.41.0.1"
	ln := listen(t, "tcp", host)
	ipvsmgrtest.AcceptAndClose(ln)
	end := netip.MustParseAddrPort(ln.Addr().String())
	before := timeWaits(t, end)
	for i := 0; i < 20; i++ {
		expect(t, "listening", connectOnce(t, tcp, specFor("tcp", end.String())), Pass, "connected")
	}
	if n := timeWaits(t, end); n > before {
		t.Errorf("%d sockets with the end %s in TIME_WAIT after 20 checks (%d before)", n, end, before)
	}
}

// timeWaits counts the IPv4 TCP sockets in TIME_WAIT with end as their local
// or their remote address.
func timeWaits(t *testing.T, end netip.AddrPort) int {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		testenv.Need(t, err.Error())
	}
	defer f.Close()
	a := end.Addr().As4()
	// /proc/net/tcp writes the address as the host-order word of its network bytes.
	want := fmt.Sprintf("%08X:%04X", binary.LittleEndian.Uint32(a[:]), end.Port())
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 3 && fs[3] == "06" && (fs[1] == want || fs[2] == want) {
			n++
		}
	}
	return n
}

// Out of file descriptors, the check cannot run: a fault, not a failure.
func TestTCPConnectorOutOfFiles(t *testing.T) {
	tcp := connector(t)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		testenv.Need(t, err.Error())
	}
	lowest, err := unix.Dup(0)
	if err != nil {
		testenv.Need(t, err.Error())
	}
	unix.Close(lowest)
	lim := old
	lim.Cur = uint64(lowest)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		testenv.Need(t, err.Error())
	}
	got := make(chan Result, 1)
	ok := tcp.start(specFor("tcp", "127.0.0.1:9"), time.Now(), func(r Result) { got <- r })
	unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	if !ok {
		t.Fatal("the connector refused the check")
	}
	expect(t, "no file descriptor", <-got, Fault, "out of file descriptors")
}
