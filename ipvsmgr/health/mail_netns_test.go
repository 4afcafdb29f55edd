package health

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// TestMailChecksAgainstDovecot: Dovecot (Debian's dovecot-imapd and
// dovecot-pop3d) serving imap, imaps, pop and pops to one user from a
// passwd-file, with a self-signed certificate made by openssl.
func TestMailChecksAgainstDovecot(t *testing.T) {
	needServer(t, "dovecot-imapd and dovecot-pop3d", "dovecot", "openssl")
	for _, p := range []string{"/usr/lib/dovecot/imap", "/usr/lib/dovecot/pop3"} {
		if _, err := os.Stat(p); err != nil {
			needServer(t, "dovecot-imapd and dovecot-pop3d", p)
		}
	}
	t.Parallel()
	ns, addr := serverNetns(t)
	dir := serverDir(t)
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o777) // the mail user (nobody) makes its home here
	sh(t, fmt.Sprintf("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=mail.test -keyout %[1]s/key.pem -out %[1]s/cert.pem 2>/dev/null", dir))
	writeFile(t, filepath.Join(dir, "users"), "mon:{PLAIN}right-pw\n", 0o644)
	conf := filepath.Join(dir, "dovecot.conf")
	writeFile(t, conf, fmt.Sprintf(`protocols = imap pop3
listen = %[2]s
base_dir = %[1]s/run
state_dir = %[1]s/state
log_path = %[1]s/dovecot.log
ssl = yes
ssl_cert = <%[1]s/cert.pem
ssl_key = <%[1]s/key.pem
disable_plaintext_auth = no
auth_failure_delay = 0
passdb {
  driver = passwd-file
  args = %[1]s/users
}
userdb {
  driver = static
  args = uid=65534 gid=65534 home=%[1]s/home/%%u
}
mail_location = maildir:~/Maildir
first_valid_uid = 1
first_valid_gid = 1
`, dir, addr), 0o644)
	d := startDaemon(t, ns, dir, "dovecot", "dovecot", "-F", "-c", conf)
	pw := passwordFile(t, dir, "mail.pw", "right-pw")
	wrong := passwordFile(t, dir, "wrong.pw", "wrong-pw")
	for _, c := range []struct {
		typ      string
		port     uint16
		wrongPW  string
		greeting string
	}{
		{"imap", 143, "LOGIN answered", "* OK"},
		{"imaps", 993, "LOGIN answered", "* OK"},
		{"pop", 110, "PASS answered", "+OK"},
		{"pops", 995, "PASS answered", "+OK"},
	} {
		spec := ipvsmgr.CheckSpec{Type: c.typ, Target: netip.AddrPortFrom(addr, c.port), Login: "mon", PasswordFile: pw,
			TLS: c.typ == "imaps" || c.typ == "pops"}
		waitPass(t, ns, d, spec)
		if r := runIn(t, ns, spec); r.Reason != "logged in as mon" {
			t.Errorf("%s: %q, want logged in as mon", c.typ, r.Reason)
		}
		wrongPW := spec
		wrongPW.PasswordFile = wrong
		wantFail(t, ns, wrongPW, c.wrongPW)
		noLogin := spec
		noLogin.Login, noLogin.PasswordFile = "", ""
		if r := runIn(t, ns, noLogin); r.Outcome != Pass || r.Reason[:len(c.greeting)] != c.greeting {
			t.Errorf("%s without a login: %s %q, want a pass on the greeting", c.typ, r.Outcome, r.Reason)
		}
	}
	// imap spoken to a POP server: the greeting is not IMAP's.
	wantFail(t, ns, ipvsmgr.CheckSpec{Type: "imap", Target: netip.AddrPortFrom(addr, 110)}, `greeting "+OK`)
	// imaps to a plain-text port: no TLS there.
	wantFail(t, ns, ipvsmgr.CheckSpec{Type: "imaps", Target: netip.AddrPortFrom(addr, 143), TLS: true}, "TLS")
	d.stop(t)
	wantFail(t, ns, ipvsmgr.CheckSpec{Type: "pop", Target: netip.AddrPortFrom(addr, 110), Login: "mon", PasswordFile: pw}, "connection refused")
}
