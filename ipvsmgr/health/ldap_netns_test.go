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
// may bind with a password.
func TestLDAPCheckAgainstSlapd(t *testing.T) {
	needServer(t, "slapd", "slapd", "slapadd", "slappasswd")
	t.Parallel()
	ns, addr := serverNetns(t)
	dir := serverDir(t)
	db := filepath.Join(dir, "db")
	if err := os.Mkdir(db, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "slapd.conf")
	writeFile(t, conf, fmt.Sprintf(`include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile %[1]s/slapd.pid
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
	d := startDaemon(t, ns, dir, "slapd", "slapd", "-d", "0", "-f", conf, "-h", "ldap://"+addr.String()+"/")
	spec := ipvsmgr.CheckSpec{Type: "ldap", Target: netip.AddrPortFrom(addr, 389), Login: "cn=monitor,dc=example,dc=test",
		PasswordFile: passwordFile(t, dir, "ldap.pw", "right-pw"), Request: "ou=pool,dc=example,dc=test", Receive: "^ou=pool,"}
	waitPass(t, ns, d, spec)

	anonymous := spec
	anonymous.Login, anonymous.PasswordFile = "", ""
	if r := runIn(t, ns, anonymous); r.Outcome != Pass {
		t.Errorf("anonymous bind: %s %q, want a pass", r.Outcome, r.Reason)
	}
	wrongPW := spec
	wrongPW.PasswordFile = passwordFile(t, dir, "wrong.pw", "wrong-pw")
	wantFail(t, ns, wrongPW, "bind: Invalid Credentials")
	missing := spec
	missing.Request = "ou=gone,dc=example,dc=test"
	wantFail(t, ns, missing, "search: No Such Object")
	other := spec
	other.Receive = "^ou=elsewhere,"
	wantFail(t, ns, other, `DN "ou=pool,dc=example,dc=test" does not match receive`)
	d.stop(t)
	wantFail(t, ns, spec, "connection refused")
}
