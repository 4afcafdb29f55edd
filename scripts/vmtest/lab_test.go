//go:build vmtest

// Package vmtest holds the kernel-tier tests: they run as root inside the VM
// test bed (scripts/vm) on Debian's stock kernel with IPVS, build a director,
// a client and real servers in network namespaces, send real HTTP through the
// VIP, and read back what ipvsctl wrote with ipvsadm.
package vmtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

var labSeq atomic.Int32

// Addresses (RFC 2544 benchmarking range and the IPv6 documentation prefix).
const (
	vip      = "198.18.0.100"
	vipMark  = "198.18.0.101"
	vip6     = "2001:db8::100"
	natNet   = "198.18.1"
	labNet   = "198.18.0"
	labNet6  = "2001:db8:"
	rsPrefix = "rs"
)

// lab is one director ("dir"), one client ("cli") and real servers on one
// bridged segment, each in its own network namespace.
type lab struct {
	t      *testing.T
	id     string
	dir    string
	cli    string
	rs     []string // DR real servers, rs[i] has 198.18.0.(11+i)
	nat    []string // NAT real servers behind the director, 198.18.1.(11+i)
	bare   bool     // real servers left as installed: no VIP, no ARP hiding
	db     string
	stopFn []func()
	// answerWait bounds answersOnce's connect and its answer each (0: 200 and
	// 300 ms, the failover benchmark's).
	answerWait time.Duration
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func newLab(t *testing.T, nRS int, withNAT bool) *lab {
	t.Helper()
	return buildLab(t, nRS, withNAT, false)
}

// newBareLab is a lab whose real servers serve HTTP on their RIPs and nothing
// more: no VIP, no ARP hiding, as a freshly installed machine would be. The
// tests of `ipvsctl realserver` prepare them.
func newBareLab(t *testing.T, nRS int) *lab {
	t.Helper()
	return buildLab(t, nRS, false, true)
}

func buildLab(t *testing.T, nRS int, withNAT, bare bool) *lab {
	t.Helper()
	n := labSeq.Add(1)
	l := &lab{t: t, id: fmt.Sprintf("l%d", n), bare: bare, db: t.TempDir() + "/ipvsctl.db"}
	l.dir, l.cli = l.id+"dir", l.id+"cli"
	sw := l.id + "sw"
	names := []string{sw, l.dir, l.cli}
	for i := range nRS {
		l.rs = append(l.rs, fmt.Sprintf("%s%s%d", l.id, rsPrefix, i+1))
	}
	names = append(names, l.rs...)
	if withNAT {
		for i := range 2 {
			l.nat = append(l.nat, fmt.Sprintf("%snat%d", l.id, i+1))
		}
		names = append(names, l.nat...)
	}
	for _, ns := range names {
		run(t, "ip", "netns", "add", ns)
		ns := ns
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		l.ns(ns, "ip link set lo up")
		l.ns(ns, "sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0")
	}
	l.ns(sw, "ip link add br0 type bridge")
	l.ns(sw, "ip link set br0 up")
	plug := func(ns, ifname, brname string, addrs ...string) {
		host := fmt.Sprintf("v%s%s", ns, ifname)
		run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", ifname, "netns", ns)
		run(t, "ip", "link", "set", host, "netns", sw)
		l.ns(sw, "ip link set "+host+" master "+brname+" up")
		for _, a := range addrs {
			l.ns(ns, "ip addr add "+a+" dev "+ifname+" nodad")
		}
		l.ns(ns, "ip link set "+ifname+" up")
	}
	plug(l.dir, "eth0", "br0", labNet+".1/24", labNet6+":1/64")
	plug(l.cli, "eth0", "br0", labNet+".2/24", labNet6+":2/64")
	for i, ns := range l.rs {
		plug(ns, "eth0", "br0", fmt.Sprintf("%s.%d/24", labNet, 11+i), fmt.Sprintf("%s:%x/64", labNet6, 0x11+i))
		if bare {
			l.serveHTTP(ns, ns[len(l.id):])
			continue
		}
		// A DR real server holds the VIPs on lo and never answers ARP for them.
		l.ns(ns, "sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 net.ipv4.conf.eth0.arp_ignore=1 net.ipv4.conf.eth0.arp_announce=2")
		l.ns(ns, "ip addr add "+vip+"/32 dev lo")
		l.ns(ns, "ip addr add "+vipMark+"/32 dev lo")
		l.ns(ns, "ip addr add "+vip6+"/128 dev lo nodad")
		l.serveHTTP(ns, ns[len(l.id):])
	}
	if withNAT {
		l.ns(sw, "ip link add br1 type bridge")
		l.ns(sw, "ip link set br1 up")
		plug(l.dir, "eth1", "br1", natNet+".1/24")
		l.ns(l.dir, "sysctl -qw net.ipv4.ip_forward=1")
		for i, ns := range l.nat {
			plug(ns, "eth0", "br1", fmt.Sprintf("%s.%d/24", natNet, 11+i))
			// The director is the NAT real servers' gateway: replies go back through it.
			l.ns(ns, "ip route add default via "+natNet+".1")
			l.serveHTTP(ns, ns[len(l.id):])
		}
	}
	t.Cleanup(func() {
		for _, f := range l.stopFn {
			f()
		}
	})
	return l
}

// ns runs a command line inside namespace ns.
func (l *lab) ns(ns, cmdline string) string {
	l.t.Helper()
	return run(l.t, "ip", append([]string{"netns", "exec", ns}, strings.Fields(cmdline)...)...)
}

// inNS runs f on a thread that is in namespace ns: sockets f opens live there.
func inNS(t *testing.T, ns string, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatalf("open netns %s: %v", ns, err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		t.Fatalf("enter netns %s: %v", ns, err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic("cannot return to the original network namespace: " + err.Error())
		}
	}()
	f()
}

// serveHTTP answers every request on port 80 and 8080 of ns with name.
func (l *lab) serveHTTP(ns, name string) {
	for _, port := range []string{":80", ":8080"} {
		var ln net.Listener
		var err error
		inNS(l.t, ns, func() { ln, err = net.Listen("tcp", port) })
		if err != nil {
			l.t.Fatalf("listen in %s: %v", ns, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, name)
		}), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		l.stopFn = append(l.stopFn, func() { srv.Close() })
	}
}

// dial opens a TCP connection from the client namespace.
func (l *lab) dial(addr string) (net.Conn, error) {
	var c net.Conn
	var err error
	inNS(l.t, l.cli, func() { c, err = net.DialTimeout("tcp", addr, 3*time.Second) })
	return c, err
}

// ask sends one HTTP request on c and returns the body (the server's name).
func ask(c net.Conn) (string, error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: vip\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// get makes n requests, each on a new connection, and counts the answers.
func (l *lab) get(addr string, n int) map[string]int {
	l.t.Helper()
	counts := map[string]int{}
	for range n {
		c, err := l.dial(addr)
		if err != nil {
			l.t.Fatalf("connect to %s from the client: %v", addr, err)
		}
		name, err := ask(c)
		c.Close()
		if err != nil {
			l.t.Fatalf("request to %s: %v", addr, err)
		}
		counts[name]++
	}
	return counts
}

// ipvsctl runs the binary under test inside the director namespace.
func (l *lab) ipvsctl(args ...string) (string, error) {
	bin := os.Getenv("IPVSCTL_BIN")
	if bin == "" {
		l.t.Fatal("IPVSCTL_BIN is not set (scripts/vmtest.sh sets it)")
	}
	full := append([]string{"netns", "exec", l.dir, bin, "--db", l.db}, args...)
	out, err := exec.Command("ip", full...).CombinedOutput()
	return string(out), err
}

// apply writes doc to a file and runs `ipvsctl apply -f` on it.
func (l *lab) apply(doc string, extra ...string) string {
	l.t.Helper()
	f := l.t.TempDir() + "/state.json"
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		l.t.Fatal(err)
	}
	out, err := l.ipvsctl(append([]string{"apply", "-f", f}, extra...)...)
	if err != nil {
		l.t.Fatalf("ipvsctl apply: %v\n%s", err, out)
	}
	return out
}

// saved is `ipvsadm -Sn` in the director: an independent tool's reading.
func (l *lab) saved() string {
	l.t.Helper()
	return l.ns(l.dir, "ipvsadm -Sn")
}

// activeConns is ipvsadm's ActiveConn of the real server dest (ADDR:PORT)
// in the director, summed over the services that have it; the test fails
// when no service has it.
func (l *lab) activeConns(dest string) int {
	l.t.Helper()
	n, seen := 0, false
	out := l.ns(l.dir, "ipvsadm -Ln")
	for _, line := range strings.Split(out, "\n") {
		// "  -> 198.18.0.11:80    Route   1      0          4"
		f := strings.Fields(line)
		if len(f) == 6 && f[0] == "->" && f[1] == dest {
			a, err := strconv.Atoi(f[4])
			if err != nil {
				l.t.Fatalf("ipvsadm -Ln: ActiveConn %q of %s", f[4], dest)
			}
			n, seen = n+a, true
		}
	}
	if !seen {
		l.t.Fatalf("ipvsadm -Ln lists no real server %s:\n%s", dest, out)
	}
	return n
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
