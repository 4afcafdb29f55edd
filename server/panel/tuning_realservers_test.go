package panel

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/ssh"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/arpguard/sshtest"
	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// TestTuningRealServersCheck: only an admin sees and may press the real
// servers' Check on the Tuning page; it runs `realserver tune check` over
// SSH (audited) and shows each real server's result on the page, an
// unreachable one with its SSH error; without an SSH identity the button
// is disabled with the reason.
func TestTuningRealServersCheck(t *testing.T) {
	h := tuningHost(t)
	e := newEnvTimed(t, false, refusingSSH(t), func(c *server.Config) { c.TuneHost = h })
	e.seed(t, webState())
	for _, user := range []string{"vic", "oscar"} {
		if w := e.get(t, user, "/tuning"); strings.Contains(w.Body, `action="/tuning/realservers"`) {
			t.Errorf("%s sees the real servers' Check", user)
		}
		if w := e.post(t, user, "/tuning/realservers", nil); w.Code != http.StatusForbidden {
			t.Errorf("%s's POST: %d, want 403", user, w.Code)
		}
	}
	if w := e.get(t, "alice", "/tuning"); !strings.Contains(w.Body, `action="/tuning/realservers"`) {
		t.Errorf("admin: no Check button: %s", excerpt(w.Body))
	}
	w := e.post(t, "alice", "/tuning/realservers", nil)
	if w.Code != 200 || !strings.Contains(w.Body, `id="rs-tune-summary"`) || !strings.Contains(w.Body, "2 unreachable") ||
		strings.Count(w.Body, "connection refused") != 2 {
		t.Errorf("POST /tuning/realservers: %d %s", w.Code, excerpt(w.Body[strings.Index(w.Body, `id="rs-tuning"`):]))
	}
	es, err := e.core.Audit(context.Background(), store.AuditFilter{Action: "realserver tune check"})
	if err != nil || len(es) != 1 || es[0].Actor != "alice" {
		t.Errorf("audit: %+v %v", es, err)
	}

	off := newEnvTimed(t, false, withSSH(server.RealServerSSH{Unavailable: "no SSH identity for real servers: start ipvsctl serve with --ssh-identity FILE"}),
		func(c *server.Config) { c.TuneHost = h })
	off.seed(t, webState())
	if w := off.get(t, "alice", "/tuning"); strings.Contains(w.Body, `action="/tuning/realservers"`) ||
		!strings.Contains(w.Body, "Check is off: no SSH identity for real servers") {
		t.Errorf("without an identity: %s", excerpt(w.Body))
	}
}

// nginxRealServer is a panel whose one real server is a real sshd with
// nginx (at worker_connections 768, its config file conf) in a namespace.
func nginxRealServer(t *testing.T) (e *env, conf string) {
	t.Helper()
	b := sshtest.Start(t)
	_, conf = b.StartNginx(t, `pid DIR/nginx.pid;
error_log DIR/error.log;
events {
    worker_connections 768;
}
http {
    access_log off;
    server {
        listen RIP:80;
        location / { return 200 "ok\n"; }
    }
}
`, 80)
	h := tuningHost(t)
	e = newEnvTimed(t, false, withSSH(server.RealServerSSH{SSHConfig: arpguard.SSHConfig{User: "root",
		Signers: []ssh.Signer{b.Signer}, KnownHostsFile: b.KnownHosts(t, b.HostKey), Dial: b.Dial, Timeout: 30 * time.Second,
		Paths: arpguard.DefaultPaths().UnderRoot(t.TempDir())}}), func(c *server.Config) { c.TuneHost = h })
	one := 1
	e.seed(t, &ipvsmgr.State{Services: []ipvsmgr.Service{{Name: "web", Protocol: "tcp", Address: "198.18.7.100", Port: 80, Scheduler: "wrr",
		Servers: []ipvsmgr.Server{{Name: "r1", Address: sshtest.RIP, Weight: &one}}}}})
	return e, conf
}

// TestTuningRealServersWebFindings (tier 2): a real sshd and nginx in a
// namespace; the Tuning page's check shows nginx's findings with the
// manual's entry and the file and line each came from.
func TestTuningRealServersWebFindings(t *testing.T) {
	e, conf := nginxRealServer(t)
	w := e.post(t, "alice", "/tuning/realservers", nil)
	body := w.Body
	if i := strings.Index(body, `id="rs-tuning"`); i >= 0 {
		body = body[i:]
	}
	for _, want := range []string{
		"<code>nginx worker_connections</code>", "https://nginx.org/en/docs/ngx_core_module.html#worker_connections",
		"<code>" + conf + ":4</code>", "<code>nginx open_file_cache</code>", "<code>" + conf + ":6</code>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the check's page lacks %q:\n%s", want, body)
		}
	}
}

// TestBrowserTuningRealServers (tier 2, Chromium): an admin presses the
// Tuning page's Check and sees the real server's nginx findings with their
// file and line, the page no wider than the window; its screenshot is
// tuning-realservers.png.
func TestBrowserTuningRealServers(t *testing.T) {
	if testing.Short() {
		testenv.OptIn(t, "browser test skipped in -short mode")
	}
	e, conf := nginxRealServer(t)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	br := browsertest.Start(t, 60*time.Second)
	br.Login(srv.URL+"/tuning", "alice", "pw-alice", "#tuning-table")
	br.Do("check", chromedp.Click(chromedp.CSS(`form[action="/tuning/realservers"] button`)), chromedp.WaitVisible(chromedp.CSS("#rs-tune-summary")))
	if s := br.Text("#rs-tuning"); !strings.Contains(s, "nginx worker_connections") || !strings.Contains(s, conf+":4") {
		t.Errorf("the real servers' section: %q", s)
	}
	br.FitsWidth("the Tuning page with the real servers' check")
	br.Shot("tuning-realservers")
}
