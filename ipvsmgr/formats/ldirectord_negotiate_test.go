package formats

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ldNegotiate has one virtual per negotiate check ipvsctl speaks, with
// ldirectord's login keys.
const ldNegotiate = `checktimeout=5
virtual=198.18.0.110:389
	real=198.18.0.71:389 gate
	service=ldap
	checktype=negotiate
	login="cn=monitor,dc=example,dc=test"
	passwd="ldap-pw"
	request="/ou=pool,dc=example,dc=test"
	receive="^ou=pool"
virtual=198.18.0.111:1812
	real=198.18.0.72:1812 gate
	protocol=udp
	service=radius
	checktype=negotiate
	login="monitor"
	passwd="radius-pw"
	secret="radius-secret"
virtual=198.18.0.112:5060
	real=198.18.0.73:5060 gate
	protocol=udp
	service=sip
	checktype=negotiate
	login="monitor@198.18.0.112"
virtual=198.18.0.113:21
	real=198.18.0.74:21 gate
	service=ftp
	checktype=negotiate
	request="health.txt"
	receive="ok"
virtual=198.18.0.114:3306
	real=198.18.0.75:3306 gate
	service=mysql
	checktype=negotiate
virtual=198.18.0.115:636
	real=198.18.0.76:636 gate
	service=ldaps
	checktype=negotiate
	request="/ou=pool,dc=example,dc=test"
virtual=198.18.0.116:119
	real=198.18.0.77:119 gate
	checktype=negotiate
	login="reader"
	request="/news.test"
`

// The negotiate services become their checks as ldirectord reads them
// (ldirectord's own parser counts the same virtuals); the secrets go to
// the files the warnings name, never into the document or the report.
func TestLdirectordNegotiateChecks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ldirectord.cf")
	if err := os.WriteFile(p, []byte(ldNegotiate), 0o644); err != nil {
		t.Fatal(err)
	}
	st, rep, err := compareWithLdirectord(t, p)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	ldap, rad, sip, ftp, my := st.Services[0].Check, st.Services[1].Check, st.Services[2].Check, st.Services[3].Check, st.Services[4].Check
	ldaps, nntp := st.Services[5].Check, st.Services[6].Check
	if ldaps.Type != "ldaps" || ldaps.Request != "ou=pool,dc=example,dc=test" || ldaps.Login != "" || ldaps.TLSVerify != nil {
		t.Errorf("ldaps check %+v", ldaps)
	}
	// Port 119 is nntp's (ld_port_to_service); check_nntp reads a greeting
	// and sends neither the login nor the request, which are kept.
	if nntp.Type != "nntp" || nntp.Login != "" || nntp.Request != "" {
		t.Errorf("nntp check %+v", nntp)
	}
	kept := map[string]bool{}
	for _, k := range st.Imported {
		kept[fmt.Sprintf("line %d: %s %s=%s", k.Line, k.Scope, k.Key, k.Value)] = true
	}
	for _, k := range []string{`line 42: virtual 198.18.0.116:119 login="reader"`, `line 39: virtual 198.18.0.116:119 request="/news.test"`} {
		if !kept[k] {
			t.Errorf("%s not kept; kept: %v", k, kept)
		}
	}
	if ldap.Type != "ldap" || ldap.Login != "cn=monitor,dc=example,dc=test" || ldap.Request != "ou=pool,dc=example,dc=test" ||
		ldap.Receive != "^ou=pool" || ldap.PasswordFile != "/var/lib/ipvsctl/secrets/check-198.18.0.110_389.passwd" {
		t.Errorf("ldap check %+v", ldap)
	}
	if rad.Type != "radius" || rad.Login != "monitor" || rad.PasswordFile != "/var/lib/ipvsctl/secrets/check-198.18.0.111_1812.passwd" ||
		rad.SecretFile != "/var/lib/ipvsctl/secrets/check-198.18.0.111_1812.secret" {
		t.Errorf("radius check %+v", rad)
	}
	if sip.Type != "sip" || sip.Login != "monitor@198.18.0.112" || sip.Protocol != "udp" || sip.PasswordFile != "" {
		t.Errorf("sip check %+v", sip)
	}
	if ftp.Type != "ftp" || ftp.Request != "health.txt" || ftp.Receive != "ok" || ftp.Login != "" {
		t.Errorf("ftp check %+v", ftp)
	}
	// check_sql without login and request never passes: a connect check, said.
	if my.Type != "tcp" {
		t.Errorf("mysql without login or request: %+v", my)
	}
	text := reportText(rep)
	for _, w := range []string{
		"line 7: passwd in virtual 198.18.0.110:389 is not kept (secrets never live in the document): write it to /var/lib/ipvsctl/secrets/check-198.18.0.110_389.passwd",
		"line 17: secret in virtual 198.18.0.111:1812 is not kept (secrets never live in the document): write it to /var/lib/ipvsctl/secrets/check-198.18.0.111_1812.secret",
		"line 30: service=mysql in virtual 198.18.0.114:3306 without login and request",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("no warning %q in:\n%s", w, text)
		}
	}
	var doc bytes.Buffer
	if err := st.Encode(&doc); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"ldap-pw", "radius-pw", "radius-secret"} {
		if strings.Contains(doc.String(), secret) || strings.Contains(text, secret) {
			t.Errorf("secret %q is in the document or the report", secret)
		}
	}
	roundTrip(t, FormatLdirectord, st)
}
