package httpd_test

import (
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// A NAT service added through the API while the daemon runs gets its
// forwarding with the write (the host half of the write's reconcile), not at
// the next boot; its answer lists the change.
func TestNATServiceAddedWhileRunningGetsForwarding(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	if v := g.Host.Sysctl("net.ipv4.ip_forward"); v != "" {
		t.Fatalf("ip_forward = %q for a DR state", v)
	}
	resp, body := do(t, g, g.Tokens[auth.Admin], "POST", "/api/v1/services",
		`{"name":"nat","address":"198.18.0.100","port":8080,"forwarding":"nat","servers":[{"name":"n1","address":"198.18.1.11"}]}`)
	if resp.StatusCode != 200 && resp.StatusCode != 201 {
		t.Fatalf("POST /services: %s %s", resp.Status, body)
	}
	if v := g.Host.Sysctl("net.ipv4.ip_forward"); v != "1" {
		t.Fatalf("ip_forward = %q after adding a NAT service", v)
	}
	if !strings.Contains(body, "sysctl net.ipv4.ip_forward=1") {
		t.Errorf("the write's answer does not list the change: %s", body)
	}
}
