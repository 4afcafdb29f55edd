package panel

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/arpguard/sshtest"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

func withSSH(rs server.RealServerSSH) func(*server.Config) {
	return func(c *server.Config) { c.RealServerSSH = rs }
}

// refusingSSH logs in to real servers whose SSH ports all refuse.
func refusingSSH(t *testing.T) func(*server.Config) {
	return withSSH(server.RealServerSSH{SSHConfig: arpguard.SSHConfig{User: "root", Signers: []ssh.Signer{sshtest.NewSigner(t)},
		KnownHostsFile: filepath.Join(t.TempDir(), "known_hosts"), Dial: sshtest.Refuse, Paths: arpguard.DefaultPaths().UnderRoot(t.TempDir())}})
}

// followFlash is the page a POST redirected to, with the message it left.
func (e *env) followFlash(t *testing.T, user string, w resp) resp {
	t.Helper()
	if w.Code != http.StatusSeeOther {
		t.Fatalf("POST: %d, want 303: %s", w.Code, excerpt(w.Body))
	}
	r := httptestRequest(http.MethodGet, w.Header.Get("Location"), "")
	r.AddCookie(&http.Cookie{Name: testCookie, Value: user})
	for _, c := range (&http.Response{Header: w.Header}).Cookies() {
		if c.Name == flashCookie {
			r.AddCookie(c)
		}
	}
	got := serve(e, r)
	return resp{Code: got.Code, Body: got.Body.String(), Header: got.Header()}
}

// Only admins see the Verify buttons; a viewer's or an operator's POST is
// refused, and nothing runs.
func TestRealserversVerifyIsAdminOnly(t *testing.T) {
	e := newEnvTimed(t, false, refusingSSH(t))
	e.seed(t, webState())
	for _, user := range []string{"vic", "oscar"} {
		w := e.get(t, user, "/realservers")
		if w.Code != 200 || strings.Contains(w.Body, "/realservers/verify") || strings.Contains(w.Body, "Verify all") {
			t.Errorf("%s sees a Verify control: %d %s", user, w.Code, excerpt(w.Body))
		}
		if w := e.post(t, user, "/realservers/verify", url.Values{"rip": {"198.18.0.11"}}); w.Code != http.StatusForbidden {
			t.Errorf("%s's POST: %d, want 403", user, w.Code)
		}
	}
	if rs, _ := e.core.RealServerResults(context.Background()); len(rs) != 0 {
		t.Errorf("a refused POST ran a verify: %+v", rs)
	}
	w := e.get(t, "alice", "/realservers")
	if !strings.Contains(w.Body, `action="/realservers/verify"`) || strings.Count(w.Body, `name="rip" value="198.18.0.1`) != 2 || !strings.Contains(w.Body, "Verify all") {
		t.Errorf("admin: no Verify buttons: %s", excerpt(w.Body))
	}
	// A cross-origin POST is refused before it reaches the handler.
	r := httptestRequest(http.MethodPost, "/realservers/verify", "rip=198.18.0.11")
	r.AddCookie(&http.Cookie{Name: testCookie, Value: "alice"})
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	if w := serve(e, r); w.Code != http.StatusForbidden {
		t.Errorf("cross-origin POST: %d, want 403", w.Code)
	}
}

// Without an SSH identity an admin sees the buttons disabled, with the
// serve flag that enables them; a POST anyway answers 503 with the same.
func TestRealserversVerifyWithoutIdentity(t *testing.T) {
	e := newEnvTimed(t, false, withSSH(server.RealServerSSH{Unavailable: "no SSH identity for real servers: start ipvsctl serve with --ssh-identity FILE"}))
	e.seed(t, webState())
	w := e.get(t, "alice", "/realservers")
	if strings.Contains(w.Body, `action="/realservers/verify"`) || strings.Count(w.Body, "disabled aria-describedby=\"verify-off\"") != 3 ||
		!strings.Contains(w.Body, "Verify is off: no SSH identity for real servers: start ipvsctl serve with --ssh-identity FILE") {
		t.Errorf("buttons not disabled with the reason: %s", excerpt(w.Body))
	}
	if w := e.post(t, "alice", "/realservers/verify", nil); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body, "--ssh-identity") {
		t.Errorf("POST without an identity: %d %s", w.Code, excerpt(w.Body))
	}
}

// An admin's Verify runs through the core: the page it returns to shows
// each real server's result, an unreachable one with its SSH error, and
// when it was taken; the run is in the audit record as the admin's.
func TestRealserversVerifyShowsResults(t *testing.T) {
	e := newEnvTimed(t, false, refusingSSH(t))
	e.seed(t, webState())
	w := e.followFlash(t, "alice", e.post(t, "alice", "/realservers/verify", url.Values{"rip": {"198.18.0.12"}, "back": {"/realservers"}}))
	if !strings.Contains(w.Body, "Verified: 1 unreachable") {
		t.Errorf("no flash: %s", excerpt(w.Body))
	}
	row := rowOf(t, w.Body, "198.18.0.12")
	if !strings.Contains(row, "st-unreachable") || !strings.Contains(row, "dial tcp: connection refused") ||
		!strings.Contains(row, time.Now().Local().Format("2006-01-02")) || !strings.Contains(row, "s ago") {
		t.Errorf("unreachable row: %s", row)
	}
	if row := rowOf(t, w.Body, "198.18.0.11"); !strings.Contains(row, "never checked") {
		t.Errorf("r1 verified too: %s", row)
	}
	w = e.followFlash(t, "alice", e.post(t, "alice", "/realservers/verify", nil))
	if !strings.Contains(w.Body, "Verified: 2 unreachable") || !strings.Contains(rowOf(t, w.Body, "198.18.0.11"), "st-unreachable") {
		t.Errorf("verify all: %s", excerpt(w.Body))
	}
	entries, err := e.core.Audit(context.Background(), store.AuditFilter{Action: "realserver verify"})
	if err != nil || len(entries) != 2 || entries[0].Actor != "alice" || entries[0].Via != "panel" {
		t.Errorf("audit: %+v, err %v", entries, err)
	}
}

// Against a real sshd in a namespace (root): a pushed real server verifies
// as prepared from the panel; drift made behind its back is listed item by
// item; an address without a route shows the SSH error.
func TestRealserversVerifyRealSSHD(t *testing.T) {
	b := sshtest.Start(t)
	const vip = "198.18.7.100"
	e := newEnvTimed(t, false, withSSH(server.RealServerSSH{SSHConfig: arpguard.SSHConfig{User: "root", Signers: []ssh.Signer{b.Signer},
		KnownHostsFile: b.KnownHosts(t, b.HostKey), Dial: b.Dial, Timeout: 20 * time.Second, Paths: arpguard.DefaultPaths().UnderRoot(t.TempDir())}}))
	e.seed(t, &ipvsmgr.State{Services: []ipvsmgr.Service{{Name: "web", Protocol: "tcp", Address: vip, Port: 80,
		Servers: []ipvsmgr.Server{{Name: "r1", Address: sshtest.RIP}, {Name: "gone", Address: "192.0.2.1"}}}}})
	target := arpguard.Target{RIP: netip.MustParseAddr(sshtest.RIP), Interface: "eth0", Mode: arpguard.ModeDRSysctl, VIPs: []netip.Addr{netip.MustParseAddr(vip)}}
	if rep, err := e.core.PrepareRealServers(context.Background(), server.Actor{Name: "root", Via: "cli"}, "push",
		server.RealServerSelection{Targets: []arpguard.Target{target}}); err != nil || rep.Results[0].State != arpguard.StatePrepared {
		t.Fatalf("push: %+v, err %v", rep, err)
	}
	w := e.followFlash(t, "alice", e.post(t, "alice", "/realservers/verify", nil))
	if row := rowOf(t, w.Body, sshtest.RIP); !strings.Contains(row, "st-prepared") || !strings.Contains(row, "verify") {
		t.Errorf("pushed server after Verify all: %s", row)
	}
	if row := rowOf(t, w.Body, "192.0.2.1"); !strings.Contains(row, "st-unreachable") || !strings.Contains(row, "network is unreachable") {
		t.Errorf("unroutable server: %s", row)
	}
	b.InRS(t, "ip addr del "+vip+"/32 dev lo && echo 0 >/proc/sys/net/ipv4/conf/eth0/arp_announce")
	w = e.followFlash(t, "alice", e.post(t, "alice", "/realservers/verify", url.Values{"rip": {sshtest.RIP}}))
	row := rowOf(t, w.Body, sshtest.RIP)
	if !strings.Contains(row, "st-drift") || !strings.Contains(row, "<li>VIP "+vip+" missing on lo</li>") || strings.Count(row, "<li>") != 2 {
		t.Errorf("drift not listed item by item: %s", row)
	}
}

// rowOf is the table row of the real server at rip.
func rowOf(t *testing.T, body, rip string) string {
	t.Helper()
	i := strings.Index(body, `id="rs-`+rip+`"`)
	if i < 0 {
		t.Fatalf("no row for %s in %s", rip, excerpt(body))
	}
	j := strings.Index(body[i:], "</tr>")
	return body[i : i+j]
}

// What a real server answered (an SSH error, drift items) is shown escaped.
func TestRealserversResultsEscaped(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	if err := e.st.SaveResults(context.Background(), []arpguard.Result{
		{Target: "198.18.0.11:22", Host: "198.18.0.11:22", Action: "verify", State: arpguard.StateFailed, Detail: "<script>alert(1)</script>", At: time.Now()},
		{Target: "198.18.0.12:22", Host: "198.18.0.12:22", Action: "verify", State: arpguard.StateDrift, Drift: []string{`"><img src=x onerror=alert(2)>`}, At: time.Now()},
	}); err != nil {
		t.Fatal(err)
	}
	w := e.get(t, "alice", "/realservers")
	if strings.Contains(w.Body, "<script>alert") || strings.Contains(w.Body, "<img src=x") ||
		!strings.Contains(w.Body, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(w.Body, "&lt;img src=x") {
		t.Errorf("not escaped: %s", excerpt(w.Body))
	}
}
