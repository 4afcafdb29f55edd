package health

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// TestNNTPCheckAgainstLeafnode: Debian's leafnode, an inetd-style NNTP
// server, run for each connection by socat in the namespace (nofork: it
// gets the socket itself, as from inetd), its
// configuration directory bound over /etc/news/leafnode and its spool on
// tmpfs in a mount namespace of its own (the host's are not touched). One
// is configured with a host name it takes (a 200 greeting), one with
// localhost.localdomain, which it refuses with a 503 greeting. Leafnode
// takes no client but on its LANs (a namespace's lo is none) unless told
// allowSTRANGERS: the namespace is the access control here.
func TestNNTPCheckAgainstLeafnode(t *testing.T) {
	needServer(t, "leafnode", "/usr/sbin/leafnode", "unshare")
	needServer(t, "socat", "socat")
	t.Parallel()
	ns, addr := serverNetns(t)
	dir := serverDir(t)
	leafnode := func(port uint16, hostname string) *daemon {
		etc := filepath.Join(dir, fmt.Sprint(port))
		if err := os.Mkdir(etc, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(etc, "config"), "server = news.ipvsctl-test.net\nexpire = 20\nhostname = "+hostname+
			"\nallowSTRANGERS = 42\n", 0o644)
		return startDaemon(t, ns, dir, fmt.Sprint("leafnode-", port), "unshare", "--mount", "--propagation", "private", "sh", "-c",
			fmt.Sprintf("mount --bind %s /etc/news/leafnode && mount -t tmpfs tmpfs /var/spool/news && "+
				"exec socat TCP-LISTEN:%d,bind=%s,fork,reuseaddr EXEC:/usr/sbin/leafnode,nofork", etc, port, addr))
	}
	d := leafnode(119, "director.ipvsctl-test.net")
	refusing := leafnode(120, "localhost.localdomain")
	spec := ipvsmgr.CheckSpec{Type: "nntp", Target: netip.AddrPortFrom(addr, 119)}
	waitPass(t, ns, d, spec)
	if r := runIn(t, ns, spec); r.Reason[:4] != "200 " {
		t.Errorf("nntp: %s %q, want a pass on the 200 greeting", r.Outcome, r.Reason)
	}
	misconfigured := spec
	misconfigured.Target = netip.AddrPortFrom(addr, 120)
	for deadline := time.Now().Add(serverStart); ; time.Sleep(200 * time.Millisecond) {
		if r := runIn(t, ns, misconfigured); r.Reason != "connection refused" || time.Now().After(deadline) {
			break // listening (or never: the wantFail says so)
		}
	}
	wantFail(t, ns, misconfigured, `greeting "503 `)
	refusing.stop(t)
	d.stop(t)
	wantFail(t, ns, spec, "connection refused")
}
