package vrrp

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/nstest"
	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// Tests in this file and those that use it need root and change only network
// namespaces they create (deleted when the test ends).

var netnsSeq atomic.Int64

func requireRoot(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root to create network namespaces")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Needf(t, "needs %s installed: %v", tool, err)
		}
	}
}

func sh(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newNetns creates a network namespace deleted when the test ends.
func newNetns(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("vrrp-%d-%d", os.Getpid(), netnsSeq.Add(1))
	sh(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	sh(t, "ip", "-n", name, "link", "set", "lo", "up")
	// Addresses usable at once, the link-local one VRRPv3 sends from too.
	sh(t, "ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0")
	return name
}

// link is one end of a veth pair: its namespace, interface and addresses.
type link struct {
	ns, ifname string
	v4, v6     string // without prefix length
}

// vethPair makes two namespaces joined by a veth pair, with 198.18.0.1/24 and
// 198.18.0.2/24 (and 2001:db8::1/64, 2001:db8::2/64), both up.
func vethPair(t *testing.T) (a, b link) {
	t.Helper()
	a = link{ns: newNetns(t), ifname: "vrrp0", v4: "198.18.0.1", v6: "2001:db8::1"}
	b = link{ns: newNetns(t), ifname: "vrrp0", v4: "198.18.0.2", v6: "2001:db8::2"}
	sh(t, "ip", "link", "add", "vrrptmp0", "netns", a.ns, "type", "veth", "peer", "vrrptmp1", "netns", b.ns)
	for i, l := range []link{a, b} {
		sh(t, "ip", "-n", l.ns, "link", "set", fmt.Sprintf("vrrptmp%d", i), "name", l.ifname)
		sh(t, "ip", "-n", l.ns, "addr", "add", l.v4+"/24", "dev", l.ifname)
		sh(t, "ip", "-n", l.ns, "addr", "add", l.v6+"/64", "dev", l.ifname, "nodad")
		sh(t, "ip", "-n", l.ns, "link", "set", l.ifname, "up")
	}
	// VRRPv3 over IPv6 speaks from the link-local address: wait for it.
	for _, l := range []link{a, b} {
		for i := 0; ; i++ {
			out := sh(t, "ip", "-n", l.ns, "-6", "addr", "show", "dev", l.ifname, "scope", "link")
			if strings.Contains(out, "fe80::") && !strings.Contains(out, "tentative") {
				break
			}
			if i == 500 {
				t.Fatalf("no link-local address on %s in %s: %s", l.ifname, l.ns, out)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return a, b
}

// inNetns runs f in namespace name: sockets it opens stay there.
func inNetns(name string, f func() error) error { return nstest.Do(name, f) }
