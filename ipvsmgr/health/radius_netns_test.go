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

// TestRADIUSCheckAgainstFreeRADIUS: FreeRADIUS (Debian's freeradius) with
// Debian's configuration copied and cut to one PAP site (the EAP module
// needs certificates the test has no use for), one client that must sign
// its requests with a Message-Authenticator, and one user.
func TestRADIUSCheckAgainstFreeRADIUS(t *testing.T) {
	needServer(t, "freeradius", "freeradius")
	if _, err := os.Stat("/etc/freeradius/3.0/radiusd.conf"); err != nil {
		needServer(t, "freeradius", "/etc/freeradius/3.0/radiusd.conf")
	}
	t.Parallel()
	ns, addr := serverNetns(t)
	dir := serverDir(t)
	raddb := filepath.Join(dir, "raddb")
	sh(t, fmt.Sprintf(`set -e
cp -rL /etc/freeradius/3.0 %[1]s/raddb && cd %[1]s/raddb && mkdir %[1]s/run %[1]s/log
rm -f mods-enabled/eap sites-enabled/*
sed -i -e 's|^\s*user = freerad||; s|^\s*group = freerad||' -e 's|^run_dir = .*|run_dir = %[1]s/run|; s|^logdir = .*|logdir = %[1]s/log|' radiusd.conf`, dir))
	writeFile(t, filepath.Join(raddb, "sites-enabled", "default"), fmt.Sprintf(`server default {
	listen {
		type = auth
		ipaddr = %s
		port = 1812
	}
	authorize {
		files
		pap
	}
	authenticate {
		Auth-Type PAP {
			pap
		}
	}
}
`, addr), 0o644)
	writeFile(t, filepath.Join(raddb, "clients.conf"), fmt.Sprintf(`client director {
	ipaddr = %s
	secret = right-secret
	require_message_authenticator = yes
}
`, addr), 0o640)
	authorize := filepath.Join(raddb, "mods-config", "files", "authorize")
	users, err := os.ReadFile(authorize)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, authorize, "mon Cleartext-Password := \"right-pw\"\n"+string(users), 0o640)
	d := startDaemon(t, ns, dir, "freeradius", "freeradius", "-f", "-l", "stdout", "-d", raddb)
	spec := ipvsmgr.CheckSpec{Type: "radius", Target: netip.AddrPortFrom(addr, 1812), Login: "mon",
		PasswordFile: passwordFile(t, dir, "radius.pw", "right-pw"), SecretFile: passwordFile(t, dir, "radius.secret", "right-secret")}
	waitPass(t, ns, d, spec)
	if r := runIn(t, ns, spec); r.Reason != "Access-Accept" {
		t.Errorf("radius: %q, want Access-Accept", r.Reason)
	}
	wrongPW := spec
	wrongPW.PasswordFile = passwordFile(t, dir, "wrong.pw", "wrong-pw")
	wantFail(t, ns, wrongPW, "Access-Reject")
	unknown := spec
	unknown.Login = "nobody-here"
	wantFail(t, ns, unknown, "Access-Reject")
	// A wrong secret is dropped by the server unanswered: the check's own
	// timeout ends it (kept short here), never the test's.
	wrongSecret := spec
	wrongSecret.SecretFile, wrongSecret.Timeout = passwordFile(t, dir, "wrong.secret", "wrong-secret"), time.Second
	wantFail(t, ns, wrongSecret, "timeout after 1s")
	d.stop(t)
	wantFail(t, ns, spec, "connection refused")
}
