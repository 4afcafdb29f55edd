//go:build vmtest

package vmtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A NAT service added through the API while `ipvsctl serve` runs gets
// net.ipv4.ip_forward with the write (the reconcile's host half plans it for
// every revision, not only when the daemon opens the kernel): the
// director's /proc/sys reads 1 after the POST, ipvsadm lists the service
// with masquerading, and real traffic reaches the NAT real servers.
func TestServeSetsForwardingForANATServiceAddedLive(t *testing.T) {
	l := newLab(t, 0, true)
	l.ns(l.dir, "sysctl -qw net.ipv4.ip_forward=0")
	tok := l.adminToken()
	l.serve(nil, "--listen", apiAddr)
	if got := strings.TrimSpace(l.ns(l.dir, "cat /proc/sys/net/ipv4/ip_forward")); got != "0" {
		t.Fatalf("ip_forward = %s before any NAT service", got)
	}

	out := l.curl(tok, "POST", "/api/v1/services", fmt.Sprintf(`{"name":"nat","address":"%s","port":8000,"interface":"eth0",
	 "scheduler":"rr","forwarding":"nat","servers":[{"name":"n1","address":"198.18.1.11","port":8080},
	 {"name":"n2","address":"198.18.1.12","port":8080}]}`, vip))
	var wr writeResult
	if err := json.Unmarshal([]byte(out), &wr); err != nil || !wr.Applied || len(wr.Failures) != 0 {
		t.Fatalf("POST /services answered %s (%v)", out, err)
	}
	if got := strings.TrimSpace(l.ns(l.dir, "cat /proc/sys/net/ipv4/ip_forward")); got != "1" {
		t.Fatalf("ip_forward = %s after a NAT service was added through the API", got)
	}
	if !slices.Contains(wr.Changes, "sysctl net.ipv4.ip_forward=1") {
		t.Errorf("the write's answer does not list the sysctl: %v", wr.Changes)
	}
	got := l.ns(l.dir, "ipvsadm -Ln -t "+vip+":8000")
	for _, rs := range []string{"198.18.1.11:8080", "198.18.1.12:8080"} {
		if !strings.Contains(got, rs) || !strings.Contains(got, "Masq") {
			t.Fatalf("ipvsadm -Ln after the POST:\n%s", got)
		}
	}
	if counts := l.get(vip+":8000", 10); counts["nat1"] != 5 || counts["nat2"] != 5 {
		t.Fatalf("NAT round robin through the director: %v", counts)
	}
}
