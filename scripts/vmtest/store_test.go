//go:build vmtest

package vmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// A state built with the scripting verbs survives what a reboot does to the
// kernel (ipvsadm -C, VIPs gone): `ipvsctl restore` brings back exactly the
// same table, read back by ipvsadm, and traffic flows again.
func TestRestoreAfterReboot(t *testing.T) {
	l := newLab(t, 2, false)
	for _, args := range [][]string{
		{"vs", "add", "web", "--address", vip, "--port", "80", "--interface", "eth0", "--scheduler", "wrr"},
		{"rs", "add", "web", "--name", "r1", "--address", "198.18.0.11", "--weight", "3"},
		{"rs", "add", "web", "--name", "r2", "--address", "198.18.0.12", "--upper-threshold", "500"},
		{"vs", "add", "any", "--fwmark", "7", "--scheduler", "sh", "--scheduler-flags", "fallback,port", "--persistence", "120"},
		{"rs", "add", "any", "--address", "198.18.0.12"},
		{"vs", "add", "dns6", "--protocol", "udp", "--address", vip6, "--port", "53", "--interface", "eth0", "--scheduler", "rr", "--one-packet"},
		{"rs", "add", "dns6", "--address", "2001:db8::11"},
	} {
		if out, err := l.ipvsctl(args...); err != nil {
			t.Fatalf("ipvsctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	before := l.saved()
	if strings.Count(before, "\n") != 7 {
		t.Fatalf("table built by the verbs:\n%s", before)
	}
	l.ns(l.dir, "ipvsadm -C")
	l.ns(l.dir, "ip addr flush dev eth0 scope global")
	l.ns(l.dir, "ip addr add "+labNet+".1/24 dev eth0")
	l.ns(l.dir, "ip addr add "+labNet6+":1/64 dev eth0 nodad")
	if got := l.saved(); got != "" {
		t.Fatalf("ipvsadm -C left:\n%s", got)
	}
	out, err := l.ipvsctl("restore")
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if after := l.saved(); after != before {
		t.Fatalf("after restore:\n%s\nbefore:\n%s", after, before)
	}
	if c := l.get(vip+":80", 8); c["rs1"] != 6 || c["rs2"] != 2 {
		t.Fatalf("traffic after restore: %v", c)
	}
	if out, _ := l.ipvsctl("restore"); !strings.Contains(out, "0 changes applied, 0 failed") {
		t.Fatalf("second restore changed something:\n%s", out)
	}
}

// ipvsctl killed with SIGKILL in the middle of a large apply leaves a half
// table; the next apply converges and the one after changes nothing.
func TestKilledApplyConverges(t *testing.T) {
	l := newLab(t, 0, false)
	st := ipvsmgr.State{}
	for i := range 1000 {
		svc := ipvsmgr.Service{Name: fmt.Sprintf("s%d", i), Address: fmt.Sprintf("198.18.%d.%d", 100+i/250, 1+i%250), Port: 80}
		for j := range 10 {
			svc.Servers = append(svc.Servers, ipvsmgr.Server{Address: fmt.Sprintf("198.18.0.%d", 11+j)})
		}
		st.Services = append(st.Services, svc)
	}
	doc, _ := json.Marshal(st)
	f := t.TempDir() + "/big.json"
	os.WriteFile(f, doc, 0o600)
	cmd := exec.Command("ip", "netns", "exec", l.dir, os.Getenv("IPVSCTL_BIN"), "--db", l.db, "apply", "-f", f)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it as soon as the kernel table starts to fill (read fast, from a
	// thread in the director's namespace).
	deadline := time.Now().Add(60 * time.Second)
	inNS(t, l.dir, func() {
		for time.Now().Before(deadline) {
			b, _ := os.ReadFile("/proc/thread-self/net/ip_vs")
			if strings.Count(string(b), "\n") > 100 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	})
	cmd.Process.Kill()
	cmd.Wait()
	partial := strings.Count(l.saved(), "\n")
	t.Logf("killed with %d of 11000 entries in the kernel", partial)
	if partial >= 11000 {
		t.Fatal("the apply finished before it could be killed")
	}
	out := l.apply(string(doc))
	if n := strings.Count(l.saved(), "\n"); n != 11000 {
		t.Fatalf("after the next apply the kernel has %d entries, want 11000\n%s", n, out[max(0, len(out)-300):])
	}
	if out := l.apply(string(doc)); !strings.Contains(out, "0 changes applied, 0 failed") {
		t.Fatalf("third apply still changed things:\n%s", out[max(0, len(out)-300):])
	}
}
