package httpd_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/arpguard/sshtest"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// unreachableSSH logs in to real servers whose SSH ports all refuse.
func unreachableSSH(t *testing.T) servertest.Option {
	return servertest.WithRealServerSSH(server.RealServerSSH{SSHConfig: arpguard.SSHConfig{User: "root",
		Signers: []ssh.Signer{sshtest.NewSigner(t)}, KnownHostsFile: filepath.Join(t.TempDir(), "known_hosts"), Dial: sshtest.Refuse}})
}

// POST /api/v1/realservers/verify is the panel's Verify button for scripts:
// admin only; named addresses of the desired state, or all of them, each
// with its result; an unknown address is 404, an unknown operation too.
func TestRealServersVerifyAPI(t *testing.T) {
	g := servertest.Start(t, unreachableSSH(t))
	setUp(t, g)
	for _, r := range []auth.Role{auth.Viewer, auth.Operator} {
		if resp, body := do(t, g, g.Tokens[r], "POST", "/api/v1/realservers/verify", ""); resp.StatusCode != http.StatusForbidden {
			t.Errorf("verify as %s: %s %s, want 403", r, resp.Status, body)
		}
	}
	admin := g.Tokens[auth.Admin]
	resp, body := do(t, g, admin, "POST", "/api/v1/realservers/verify", `{"rips": ["198.18.0.12"]}`)
	var rep server.RealServerReport
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &rep) != nil || len(rep.Results) != 1 ||
		rep.Results[0].Host != "198.18.0.12:22" || rep.Results[0].State != arpguard.StateUnreachable ||
		!strings.Contains(rep.Results[0].Detail, "connection refused") {
		t.Fatalf("verify one: %s %s", resp.Status, body)
	}
	resp, body = do(t, g, admin, "POST", "/api/v1/realservers/verify", "")
	if rep = (server.RealServerReport{}); resp.StatusCode != 200 || json.Unmarshal([]byte(body), &rep) != nil || len(rep.Results) != 2 {
		t.Fatalf("verify all: %s %s", resp.Status, body)
	}
	// The status carries the stored results.
	resp, body = do(t, g, admin, "GET", "/api/v1/status", "")
	if resp.StatusCode != 200 || strings.Count(body, `"state":"unreachable"`) != 2 {
		t.Errorf("status after verify: %s %s", resp.Status, body)
	}
	for _, c := range []struct {
		path, body string
		want       int
	}{
		{"/api/v1/realservers/verify", `{"rips": ["198.18.0.99"]}`, 404},
		{"/api/v1/realservers/format", "", 404},
		{"/api/v1/realservers/verify", `{"rip": "198.18.0.11"}`, 400},
		{"/api/v1/realservers/verify", `{"targets": [{"rip": "198.18.0.11", "mode": "dr-sysctl", "interface": "eth0", "vips": []}]}`, 422},
	} {
		if resp, body := do(t, g, admin, "POST", c.path, c.body); resp.StatusCode != c.want {
			t.Errorf("POST %s %s: %s %s, want %d", c.path, c.body, resp.Status, body, c.want)
		}
	}
}

// A daemon without an SSH identity answers 503, saying how to give it one.
func TestRealServersVerifyWithoutIdentity(t *testing.T) {
	g := servertest.Start(t, servertest.WithRealServerSSH(server.RealServerSSH{Unavailable: "no SSH identity: start ipvsctl serve with --ssh-identity FILE"}))
	setUp(t, g)
	resp, body := do(t, g, g.Tokens[auth.Admin], "POST", "/api/v1/realservers/verify", "")
	var e httpd.ErrorBody
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil ||
		e.Code != server.CodeUnavailable || !strings.Contains(e.Error, "--ssh-identity") {
		t.Fatalf("verify without an identity: %s %s", resp.Status, body)
	}
}
