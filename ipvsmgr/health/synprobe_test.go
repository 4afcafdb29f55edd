//go:build linux

package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// Tier 2: the half-open tcp check needs a raw socket (CAP_NET_RAW); the
// tests skip without one.

// canRaw says whether this process may open a raw socket (CAP_NET_RAW).
func canRaw() bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// prober starts a synProber for the test (in the calling thread's network
// namespace) and stops it at the test's end.
func prober(t testing.TB) *synProber {
	t.Helper()
	p, err := newSynProber()
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		testenv.Needf(t, "needs CAP_NET_RAW: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return running(t, p)
}

// quietListener listens on host:0 and never accepts by itself; accepted
// says how many connections reached its queue.
func quietListener(t *testing.T, host string) (addr string, accepted func() int) {
	t.Helper()
	ip := netip.MustParseAddr(host)
	family, sa := unix.AF_INET6, unix.Sockaddr(nil)
	if ip.Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Addr: ip.As4()}
	} else {
		sa6 := &unix.SockaddrInet6{Addr: ip.As16()}
		if ip.Zone() != "" {
			ifi, err := net.InterfaceByName(ip.Zone())
			if err != nil {
				t.Fatal(err)
			}
			sa6.ZoneId = uint32(ifi.Index)
		}
		sa = sa6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		t.Fatal(err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := 0
	switch a := got.(type) {
	case *unix.SockaddrInet4:
		port = a.Port
	case *unix.SockaddrInet6:
		port = a.Port
	}
	return net.JoinHostPort(ip.WithZone("").String(), fmt.Sprint(port)), func() int {
		n := 0
		for {
			nfd, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
			if err != nil {
				return n
			}
			unix.Close(nfd)
			n++
		}
	}
}

func TestSynProbe(t *testing.T) {
	p := prober(t)
	for _, host := range loopbacks(t) {
		addr, accepted := quietListener(t, host)
		for range 5 {
			r := connectOnce(t, p, specFor("tcp", addr))
			expect(t, host+" listening", r, Pass, "SYN-ACK")
			if r.Duration <= 0 || r.Weight != -1 || r.Percent != -1 {
				t.Errorf("%s listening: result %+v: want a duration, no weight, no percentage", host, r)
			}
		}
		// A completed handshake would be in the queue by now.
		time.Sleep(100 * time.Millisecond)
		if n := accepted(); n != 0 {
			t.Errorf("%s: the listener's application was given %d connections by 5 half-open checks, want 0", host, n)
		}
		expect(t, host+" closed", connectOnce(t, p, specFor("tcp", closedPort(t, "tcp", host))), Fail, "connection refused")

		spec := specFor("tcp", fullListener(t, host))
		spec.Timeout = 300 * time.Millisecond
		r := connectOnce(t, p, spec)
		expect(t, host+" backlog full", r, Fail, "timeout after 300ms")
		if r.Duration < spec.Timeout || r.Duration > spec.Timeout+time.Second {
			t.Errorf("%s backlog full: took %v, want about %v", host, r.Duration, spec.Timeout)
		}
	}
}

// The kernel filter keeps the director's other TCP traffic out of the
// prober: connections to a local listener reach a raw socket without the
// filter, and not the prober's.
func TestSynProbeFilterDropsOtherTraffic(t *testing.T) {
	p := prober(t)
	unfiltered, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(unfiltered)
	ln := listen(t, "tcp", "127.0.0.1")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	before := p.received.Load()
	for range 20 {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(make([]byte, 1024))
		c.Close()
	}
	time.Sleep(200 * time.Millisecond)
	seen := 0
	buf := make([]byte, 2048)
	for {
		if _, _, err := unix.Recvfrom(unfiltered, buf, unix.MSG_DONTWAIT); err != nil {
			break
		}
		seen++
	}
	if seen < 20*4 {
		t.Fatalf("an unfiltered raw socket saw %d segments of 20 connections: the test proves nothing", seen)
	}
	if got := p.received.Load() - before; got != 0 {
		t.Errorf("the prober read %d segments of connections not its own (an unfiltered socket saw %d), want 0", got, seen)
	}
	addr, _ := quietListener(t, "127.0.0.1")
	expect(t, "listening", connectOnce(t, p, specFor("tcp", addr)), Pass, "SYN-ACK")
	time.Sleep(50 * time.Millisecond)
	if got := p.received.Load() - before; got != 1 {
		t.Errorf("the prober read %d segments for one check, want 1 (the SYN-ACK)", got)
	}
}

// While held, the replies of a batch wait in the socket (run is not woken
// for each); release reads them and tells their results (on loopback the
// kernel answers within the send), and run reads what comes after.
func TestSynProbeHoldRelease(t *testing.T) {
	p := prober(t)
	var got atomic.Int64
	p.hold()
	for i := range 10 {
		target, want := closedPort(t, "tcp", "127.0.0.1"), "connection refused"
		if i%2 == 0 {
			target, _ = quietListener(t, "127.0.0.1")
			want = "SYN-ACK"
		}
		if !p.start(specFor("tcp", target), time.Now(), func(r Result) {
			got.Add(1)
			if r.Reason != want {
				t.Errorf("%s: %s %q, want %q", target, r.Outcome, r.Reason, want)
			}
		}) {
			t.Fatal("the prober refused a check")
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := got.Load(); n != 0 {
		t.Errorf("%d results while held, want 0", n)
	}
	p.release()
	// Usually all ten by now; a loaded machine may answer later (its
	// softirqs deferred to ksoftirqd), and run tells those.
	t.Logf("%d results when release returned", got.Load())
	for i := 0; got.Load() < 10; i++ {
		if i == 500 {
			t.Fatalf("%d results 5s after release, want 10", got.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Not held any more: run reads the replies itself.
	addr, _ := quietListener(t, "127.0.0.1")
	expect(t, "after release", connectOnce(t, p, specFor("tcp", addr)), Pass, "SYN-ACK")
}

// Two checks of one target at once would be one 4-tuple: the second is
// refused, and the runner connects for it.
func TestSynProbeOneProbePerTarget(t *testing.T) {
	p := prober(t)
	spec := specFor("tcp", fullListener(t, "127.0.0.1"))
	spec.Timeout = 300 * time.Millisecond
	got := make(chan Result, 1)
	if !p.start(spec, time.Now(), func(r Result) { got <- r }) {
		t.Fatal("the prober refused the first check")
	}
	other := *spec
	other.Interval = 5 * time.Second
	if p.start(&other, time.Now(), func(Result) { t.Error("the second check of a target under way got a result") }) {
		t.Error("the prober took a second check of a target under way")
	}
	expect(t, "backlog full", <-got, Fail, "timeout after 300ms")
}

// The runner checks tcp on the prober when it can (CAP_NET_RAW), and on the
// connector without it: a listener is up, a closed port down with its
// reason, and the prober gives the listener's application no connection.
func TestRunnerChecksTCP(t *testing.T) {
	for _, mode := range []struct {
		name       string
		noSynProbe bool
		passed     string
	}{{"prober", false, "SYN-ACK"}, {"connector", true, "connected"}} {
		t.Run(mode.name, func(t *testing.T) {
			if !mode.noSynProbe && !canRaw() {
				t.Log("no CAP_NET_RAW: the runner connects")
				mode.passed = "connected"
			}
			addr, accepted := quietListener(t, "127.0.0.1")
			closed := closedPort(t, "tcp", "127.0.0.1")
			events := make(chan Event, 16)
			r := NewRunner(Config{Notify: func(e Event) { events <- e }})
			r.noSynProbe = mode.noSynProbe
			var checks []ipvsmgr.ServerCheck
			for i, target := range []string{addr, closed} {
				spec := *specFor("tcp", target)
				spec.Interval = 100 * time.Millisecond
				checks = append(checks, ipvsmgr.ServerCheck{Ref: ipvsmgr.ServerRef{Server: ipvsmgr.DestKey{Port: uint16(i + 1)}}, Spec: spec, Weight: 1})
			}
			r.Update(checks)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- r.Run(ctx) }()
			got := map[uint16]Event{}
			deadline := time.After(10 * time.Second)
			for len(got) < 2 {
				select {
				case e := <-events:
					got[e.Ref.Server.Port] = e
				case <-deadline:
					t.Fatalf("events after 10s: %+v", got)
				}
			}
			time.Sleep(300 * time.Millisecond) // a few more rounds
			// Before the runner stops: a check it starts while the prober
			// stops may connect.
			connections := accepted()
			cancel()
			<-done
			if e := got[1]; e.To != ipvsmgr.HealthUp || e.Reason != mode.passed {
				t.Errorf("listening: %s %q, want up: %s", e.To, e.Reason, mode.passed)
			}
			if e := got[2]; e.To != ipvsmgr.HealthDown || e.Reason != "connection refused" {
				t.Errorf("closed: %s %q, want down: connection refused", e.To, e.Reason)
			}
			if connections != 0 && mode.passed == "SYN-ACK" {
				t.Errorf("the listener's application was given %d connections, want 0", connections)
			}
		})
	}
}

// netnsPair makes two fresh network namespaces joined by a veth: the
// director (veth0: 198.18.98.1/24, 2001:db8:98::1/64, fe80::1) and a router
// (veth1: .2, ::2, fe80::2) that forwards, with routes behind it that drop
// (blackhole: .99, :99::) and refuse with an ICMP error (unreachable: .97,
// :97::; prohibit: .95, :95::). Both are deleted when the test ends.
func netnsPair(t *testing.T) (director, router netns.NsHandle) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root for network namespaces")
	}
	if !canRaw() {
		testenv.Need(t, "needs CAP_NET_RAW")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Need(t, err.Error())
	}
	base := fmt.Sprintf("hc%d-%d", os.Getpid(), time.Now().UnixNano()%100000)
	d, rt := base+"d", base+"r"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for _, ns := range []string{d, rt} {
		run("netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		run("-n", ns, "link", "set", "lo", "up")
	}
	run("link", "add", "veth0", "netns", d, "type", "veth", "peer", "name", "veth1", "netns", rt)
	for _, c := range [][]string{
		{"-n", d, "addr", "add", "198.18.98.1/24", "dev", "veth0"},
		{"-n", d, "addr", "add", "2001:db8:98::1/64", "dev", "veth0", "nodad"},
		{"-n", d, "addr", "add", "fe80::1/64", "dev", "veth0", "nodad"},
		{"-n", d, "link", "set", "veth0", "up"},
		{"-n", rt, "addr", "add", "198.18.98.2/24", "dev", "veth1"},
		{"-n", rt, "addr", "add", "2001:db8:98::2/64", "dev", "veth1", "nodad"},
		{"-n", rt, "addr", "add", "fe80::2/64", "dev", "veth1", "nodad"},
		{"-n", rt, "link", "set", "veth1", "up"},
		// Behind the router: nothing answers (dropped) or an ICMP error does.
		{"-n", d, "route", "add", "198.18.99.0/24", "via", "198.18.98.2"},
		{"-n", d, "route", "add", "198.18.97.0/24", "via", "198.18.98.2"},
		{"-n", d, "route", "add", "198.18.95.0/24", "via", "198.18.98.2"},
		{"-n", d, "route", "add", "2001:db8:99::/64", "via", "2001:db8:98::2"},
		{"-n", d, "route", "add", "2001:db8:97::/64", "via", "2001:db8:98::2"},
		{"-n", d, "route", "add", "2001:db8:95::/64", "via", "2001:db8:98::2"},
		{"-n", rt, "route", "add", "blackhole", "198.18.99.0/24"},
		{"-n", rt, "route", "add", "unreachable", "198.18.97.0/24"},
		{"-n", rt, "route", "add", "prohibit", "198.18.95.0/24"},
		{"-n", rt, "route", "add", "blackhole", "2001:db8:99::/64"},
		{"-n", rt, "route", "add", "unreachable", "2001:db8:97::/64"},
		{"-n", rt, "route", "add", "prohibit", "2001:db8:95::/64"},
		// On the director: a route that refuses at once, and a link where
		// no neighbour answers (the kernel's own ICMP error, after ARP/ND).
		{"-n", d, "route", "add", "unreachable", "198.18.96.0/24"},
		{"-n", d, "route", "add", "198.18.93.0/24", "dev", "veth0"},
		{"-n", d, "route", "add", "2001:db8:93::/64", "dev", "veth0"},
	} {
		run(c...)
	}
	// A veth's carrier comes up a moment after it is set up (the kernel's
	// link watch): until then its packets are dropped, and with the short
	// neighbour timers below an answering neighbour would seem absent.
	for _, end := range [][2]string{{d, "veth0"}, {rt, "veth1"}} {
		for i := 0; ; i++ {
			out, _ := exec.Command("ip", "-n", end[0], "-o", "link", "show", end[1]).Output()
			if strings.Contains(string(out), "state UP") {
				break
			}
			if i == 100 {
				t.Fatalf("%s in %s not up after 5s: %s", end[1], end[0], out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, c := range [][]string{
		{rt, "net.ipv4.ip_forward=1"}, {rt, "net.ipv6.conf.all.forwarding=1"},
		{d, "net.ipv4.neigh.veth0.mcast_solicit=1"}, {d, "net.ipv4.neigh.veth0.retrans_time_ms=100"},
		{d, "net.ipv6.neigh.veth0.mcast_solicit=1"}, {d, "net.ipv6.neigh.veth0.retrans_time_ms=100"},
	} {
		if out, err := exec.Command("ip", "netns", "exec", c[0], "sysctl", "-qw", c[1]).CombinedOutput(); err != nil {
			t.Fatalf("sysctl %s in %s: %v: %s", c[1], c[0], err, out)
		}
	}
	var handles [2]netns.NsHandle
	for i, name := range []string{d, rt} {
		h, err := netns.GetFromName(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		handles[i] = h
	}
	return handles[0], handles[1]
}

// inNetns runs f on a thread in namespace ns; the sockets f makes stay there.
func inNetns(t *testing.T, ns netns.NsHandle, f func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Errorf("back to the test's namespace: %v", err) // the thread stays locked, and dies with the goroutine
			return
		}
		runtime.UnlockOSThread()
	}()
	f()
}

// What is behind a router, through a veth: answered, dropped (a timeout),
// refused by ICMP, by the director's own routes, by a neighbour that never
// answers; and a link-local target by its zone.
func TestSynProbeNetns(t *testing.T) {
	director, router := netnsPair(t)
	var p *synProber
	inNetns(t, director, func() { p = prober(t) })
	var v4, v6, ll string
	var accepted4, accepted6 func() int
	inNetns(t, router, func() {
		v4, accepted4 = quietListener(t, "198.18.98.2")
		v6, accepted6 = quietListener(t, "2001:db8:98::2")
		ll, _ = quietListener(t, "fe80::2%veth1")
		_, port, _ := net.SplitHostPort(ll)
		ll = "[fe80::2%veth0]:" + port
	})
	cases := []struct {
		name, target string
		outcome      Outcome
		reason       string
	}{
		{"IPv4 listening", v4, Pass, "SYN-ACK"},
		{"IPv6 listening", v6, Pass, "SYN-ACK"},
		{"link-local by zone", ll, Pass, "SYN-ACK"},
		{"IPv4 closed port", "198.18.98.2:1", Fail, "connection refused"},
		{"IPv6 closed port", "[2001:db8:98::2]:1", Fail, "connection refused"},
		{"IPv4 dropped", "198.18.99.1:80", Fail, "timeout after 1s"},
		{"IPv6 dropped", "[2001:db8:99::1]:80", Fail, "timeout after 1s"},
		{"IPv4 ICMP host unreachable from the router", "198.18.97.1:80", Fail, "host unreachable"},
		{"IPv4 ICMP prohibited by the router", "198.18.95.1:80", Fail, "administratively prohibited"},
		{"IPv6 ICMP no route at the router", "[2001:db8:97::1]:80", Fail, "network unreachable"},
		{"IPv6 ICMP prohibited by the router", "[2001:db8:95::1]:80", Fail, "administratively prohibited"},
		{"IPv4 unreachable route on the director", "198.18.96.1:80", Fail, "host unreachable"},
		{"IPv4 no neighbour", "198.18.93.1:80", Fail, "host unreachable"},
		{"IPv6 no neighbour", "[2001:db8:93::1]:80", Fail, "host unreachable"},
		{"IPv4 no route", "203.0.113.1:80", Fault, "network unreachable"},
	}
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		spec := specFor("tcp", c.target)
		if !p.start(spec, time.Now(), func(r Result) {
			defer wg.Done()
			expect(t, c.name+" ("+c.target+")", r, c.outcome, c.reason)
			if c.outcome == Fail && c.reason != "timeout after 1s" && r.Duration > 900*time.Millisecond {
				t.Errorf("%s: took %v: the reason came with the timeout, not before it", c.name, r.Duration)
			}
		}) {
			t.Errorf("%s (%s): the prober refused the check", c.name, c.target)
			wg.Done()
		}
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	if n := accepted4() + accepted6(); n != 0 {
		t.Errorf("the router's listeners were given %d connections, want 0", n)
	}
}

// A thousand checks at once, one listener on a thousand addresses of a
// namespace behind a veth: every one passes.
func TestSynProbe1000(t *testing.T) {
	director, router := netnsPair(t)
	var batch []string
	for i := range 1000 {
		batch = append(batch, fmt.Sprintf("addr add 198.19.%d.%d/32 dev lo", i/250, i%250+1))
	}
	inNetns(t, router, func() {
		c := exec.Command("ip", "-batch", "-")
		c.Stdin = strings.NewReader(strings.Join(batch, "\n") + "\n")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("ip -batch: %v: %s", err, out)
		}
	})
	var addr string
	var accepted func() int
	inNetns(t, router, func() { addr, accepted = quietListener(t, "0.0.0.0") })
	_, port, _ := net.SplitHostPort(addr)
	inNetns(t, director, func() {
		if out, err := exec.Command("ip", "route", "add", "198.19.0.0/16", "via", "198.18.98.2").CombinedOutput(); err != nil {
			t.Fatalf("ip route add: %v: %s", err, out)
		}
	})
	var p *synProber
	inNetns(t, director, func() { p = prober(t) })
	var wg sync.WaitGroup
	var passed atomic.Int64
	var mu sync.Mutex
	bad := map[string]int{}
	start := time.Now()
	for i := range 1000 {
		spec := specFor("tcp", fmt.Sprintf("198.19.%d.%d:%s", i/250, i%250+1, port))
		spec.Timeout = 5 * time.Second
		wg.Add(1)
		if !p.start(spec, time.Now(), func(r Result) {
			defer wg.Done()
			if r.Outcome == Pass {
				passed.Add(1)
				return
			}
			mu.Lock()
			bad[r.Outcome.String()+" "+r.Reason]++
			mu.Unlock()
		}) {
			t.Fatal("the prober refused a check")
		}
	}
	wg.Wait()
	t.Logf("1000 checks in %v", time.Since(start))
	for b, n := range bad {
		t.Errorf("%d checks: %s", n, b)
	}
	if passed.Load() != 1000 {
		t.Errorf("%d of 1000 passed", passed.Load())
	}
	time.Sleep(100 * time.Millisecond)
	if n := accepted(); n != 0 {
		t.Errorf("the listener was given %d connections, want 0", n)
	}
}
