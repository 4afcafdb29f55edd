package health

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// TestLDAPCheckAgainstSlapd: OpenLDAP's slapd (Debian's slapd) with an mdb
// database loaded by slapadd before it starts, and a monitor entry that
// may bind with a password, listening for ldap (389) and ldaps (636, with
// a self-signed certificate made by openssl); each check type passes and
// fails on the same cases.
func TestLDAPCheckAgainstSlapd(t *testing.T) {
	needServer(t, "slapd", "slapd", "slapadd", "slappasswd")
	needServer(t, "openssl", "openssl")
	t.Parallel()
	ns, addr := serverNetns(t)
	dir := serverDir(t)
	db := filepath.Join(dir, "db")
	if err := os.Mkdir(db, 0o700); err != nil {
		t.Fatal(err)
	}
	sh(t, fmt.Sprintf("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=ldap.test -keyout %[1]s/key.pem -out %[1]s/cert.pem 2>/dev/null", dir))
	conf := filepath.Join(dir, "slapd.conf")
	writeFile(t, conf, fmt.Sprintf(`include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile %[1]s/slapd.pid
TLSCertificateFile %[1]s/cert.pem
TLSCertificateKeyFile %[1]s/key.pem
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
suffix "dc=example,dc=test"
rootdn "cn=admin,dc=example,dc=test"
directory %[2]s
maxsize 16777216
access to attrs=userPassword by anonymous auth by * none
access to * by * read
`, dir, db), 0o600)
	hash := sh(t, "slappasswd -s right-pw")
	ldif := filepath.Join(dir, "base.ldif")
	writeFile(t, ldif, `dn: dc=example,dc=test
objectClass: dcObject
objectClass: organization
dc: example
o: Example

dn: ou=pool,dc=example,dc=test
objectClass: organizationalUnit
ou: pool

dn: cn=monitor,dc=example,dc=test
objectClass: person
cn: monitor
sn: monitor
userPassword: `+hash, 0o600)
	sh(t, fmt.Sprintf("slapadd -q -f %s -l %s", conf, ldif))
	d := startDaemon(t, ns, dir, "slapd", "slapd", "-d", "0", "-f", conf, "-h",
		fmt.Sprintf("ldap://%[1]s/ ldaps://%[1]s/", addr))
	pw := passwordFile(t, dir, "ldap.pw", "right-pw")
	wrong := passwordFile(t, dir, "wrong.pw", "wrong-pw")
	var specs []ipvsmgr.CheckSpec
	for _, c := range []struct {
		typ  string
		port uint16
	}{{"ldap", 389}, {"ldaps", 636}} {
		spec := ipvsmgr.CheckSpec{Type: c.typ, Target: netip.AddrPortFrom(addr, c.port), TLS: c.typ == "ldaps",
			Login: "cn=monitor,dc=example,dc=test", PasswordFile: pw, Request: "ou=pool,dc=example,dc=test", Receive: "^ou=pool,"}
		specs = append(specs, spec)
		waitPass(t, ns, d, spec)
		if r := runIn(t, ns, spec); r.Reason != "DN ou=pool,dc=example,dc=test" {
			t.Errorf("%s: %s %q, want a pass on the DN", c.typ, r.Outcome, r.Reason)
		}

		anonymous := spec
		anonymous.Login, anonymous.PasswordFile = "", ""
		if r := runIn(t, ns, anonymous); r.Outcome != Pass {
			t.Errorf("%s anonymous bind: %s %q, want a pass", c.typ, r.Outcome, r.Reason)
		}
		wrongPW := spec
		wrongPW.PasswordFile = wrong
		wantFail(t, ns, wrongPW, "bind: Invalid Credentials")
		wrongDN := spec
		wrongDN.Login = "cn=nobody,dc=example,dc=test"
		wantFail(t, ns, wrongDN, "bind: Invalid Credentials")
		missing := spec
		missing.Request = "ou=gone,dc=example,dc=test"
		wantFail(t, ns, missing, "search: No Such Object")
		other := spec
		other.Receive = "^ou=elsewhere,"
		wantFail(t, ns, other, `DN "ou=pool,dc=example,dc=test" does not match receive`)
	}
	ldap, ldaps := specs[0], specs[1]
	// ldaps verifies no certificate unless told to (Net::LDAP's verify =>
	// 'none'); told to, this self-signed one (for ldap.test, not the
	// address) is refused.
	verify := ldaps
	verify.TLSVerify = true
	wantFail(t, ns, verify, "TLS: certificate is not for "+addr.String())
	// ldaps to the plain-text port (slapd closes on the TLS hello), ldap to
	// the TLS one.
	plain := ldaps
	plain.Target = ldap.Target
	wantFail(t, ns, plain, "connection closed")
	tlsPort := ldap
	tlsPort.Target = ldaps.Target
	if r := runIn(t, ns, tlsPort); r.Outcome != Fail {
		t.Errorf("ldap to the ldaps port: %s %q, want a fail", r.Outcome, r.Reason)
	}
	d.stop(t)
	wantFail(t, ns, ldap, "connection refused")
	wantFail(t, ns, ldaps, "connection refused")
}
