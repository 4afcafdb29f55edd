package ipvsmgr

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var netCmp = cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})

const checkedDoc = `{"services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler":"wlc",
 "check":{"type":"http","path":"/healthz","expect_status":[200],"interval":2,"timeout":1,
          "rise":2,"fall":3,"on_failure":"quiesce","slow_start":30},
 "sorry_server":{"address":"198.18.0.50","port":80},
 "quorum":1,
 "servers":[{"name":"r1","address":"198.18.0.11","weight":4},
            {"name":"r2","address":"198.18.0.12","check":{"port":8081,"timeout":0.5,"start_healthy":true}},
            {"name":"r3","address":"198.18.0.13","health":"down","check":{"type":"none"}},
            {"name":"r4","address":"198.18.0.14","enabled":false}]}]}`

func TestCompileChecks(t *testing.T) {
	d, err := compileDoc(t, checkedDoc)
	if err != nil {
		t.Fatal(err)
	}
	svc := d.Table.Services[0].Key
	ref := func(a string) ServerRef {
		return ServerRef{Service: svc, Server: DestKey{Addr: netip.MustParseAddr(a), Port: 80}}
	}
	base := CheckSpec{Type: "http", Target: netip.MustParseAddrPort("198.18.0.11:80"), Interval: 2 * time.Second, Timeout: time.Second,
		Rise: 2, Fall: 3, Method: "GET", Path: "/healthz", ExpectStatus: []int{200}}
	r2 := base
	r2.Target, r2.Timeout = netip.MustParseAddrPort("198.18.0.12:8081"), 500*time.Millisecond
	want := []ServerCheck{
		{Ref: ref("198.18.0.11"), ServiceName: "web", ServerName: "r1", Weight: 4, Spec: base, OnFailure: "quiesce", SlowStart: 30 * time.Second},
		{Ref: ref("198.18.0.12"), ServiceName: "web", ServerName: "r2", Weight: 1, Spec: r2, OnFailure: "quiesce", SlowStart: 30 * time.Second, StartHealthy: true},
		{Ref: ref("198.18.0.13"), ServiceName: "web", ServerName: "r3", Weight: 1, Spec: CheckSpec{Type: "none"}, OnFailure: "quiesce", Forced: HealthDown},
	}
	if diff := cmp.Diff(want, d.Checks, netCmp); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
	wantSorry := []SorryPolicy{{Service: svc, Dest: &Destination{Key: DestKey{Addr: netip.MustParseAddr("198.18.0.50"), Port: 80}, Weight: 1, Forward: ForwardDR}, Quorum: 1}}
	if diff := cmp.Diff(wantSorry, d.Sorry, netCmp); diff != "" {
		t.Errorf("sorry (-want +got):\n%s", diff)
	}
	// The same check of the same target is one spec, whatever service it is in.
	if d.Checks[0].Spec.Key() == d.Checks[1].Spec.Key() {
		t.Error("different targets share a key")
	}
	c2 := d.Checks[0].Spec
	c2.ExpectStatus = []int{200}
	if c2.Key() != d.Checks[0].Spec.Key() {
		t.Error("equal specs have different keys")
	}
}

func TestCompileCheckTypes(t *testing.T) {
	doc := `{"services":[{"address":"198.18.0.100","port":53,"protocol":"udp","servers":[
	 {"address":"198.18.0.11","check":{"type":"dns","name":"example.test","rcode":"NXDOMAIN"}},
	 {"address":"198.18.0.12","check":{"type":"send_expect","send":"GET / HTTP/1.0\\r\\n\\r\\n","expect":"HTTP","protocol":"udp"}},
	 {"address":"198.18.0.13","check":{"type":"exec","command":"/usr/lib/check -H %h -p %p --pct 50%% 'a b'","dynamic_weight":true}},
	 {"address":"198.18.0.14","check":{"type":"agent","port":9999,"address":"198.18.1.14"}},
	 {"address":"198.18.0.15","check":{"type":"https","sni":"web.test","tls_verify":true}},
	 {"address":"198.18.0.16","check":{"type":"pgsql","login":"mon","password_file":"/etc/ipvsctl/secrets/pg.pw","database":"app","request":"/SELECT 1"}},
	 {"address":"198.18.0.17","check":{"type":"ftp","request":"/health.txt","receive":"ok"}},
	 {"address":"198.18.0.18","check":{"type":"pops","login":"mon"}},
	 {"address":"198.18.0.19","check":{"type":"ldaps","request":"/ou=pool,dc=example,dc=test","receive":"^ou=pool,","tls_verify":true}},
	 {"address":"198.18.0.20","check":{"type":"nntp","connect_checks":3}}]}]}`
	d, err := compileDoc(t, doc)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]CheckSpec{}
	for _, c := range d.Checks {
		got[c.Spec.Type] = c.Spec
	}
	if s := got["dns"]; s.QType != "A" || s.Protocol != "udp" || s.RCode != "NXDOMAIN" || s.Target.String() != "198.18.0.11:53" {
		t.Errorf("dns: %+v", s)
	}
	if s := got["send_expect"]; s.Send != "GET / HTTP/1.0\r\n\r\n" || s.Expect != "HTTP" || s.Protocol != "udp" {
		t.Errorf("send_expect: %+v", s)
	}
	if s := got["exec"]; !cmp.Equal(s.Command, []string{"/usr/lib/check", "-H", "198.18.0.13", "-p", "53", "--pct", "50%", "a b"}) || !s.DynamicWeight {
		t.Errorf("exec: %q", s.Command)
	}
	if s := got["agent"]; s.Target.String() != "198.18.1.14:9999" {
		t.Errorf("agent: %+v", s)
	}
	if s := got["https"]; !s.TLS || !s.TLSVerify || s.SNI != "web.test" || s.Path != "/" || s.Method != "GET" {
		t.Errorf("https: %+v", s)
	}
	// ldirectord drops request's leading slash (check_sql, check_ldap); ftp logs in anonymously by default.
	if s := got["pgsql"]; s.Request != "SELECT 1" || s.Login != "mon" || s.PasswordFile != "/etc/ipvsctl/secrets/pg.pw" || s.Database != "app" {
		t.Errorf("pgsql: %+v", s)
	}
	if s := got["ftp"]; s.Request != "health.txt" || s.Receive != "ok" || s.Login != "anonymous" {
		t.Errorf("ftp: %+v", s)
	}
	if s := got["pops"]; !s.TLS || s.TLSVerify || s.Login != "mon" {
		t.Errorf("pops: %+v", s)
	}
	if s := got["ldaps"]; !s.TLS || !s.TLSVerify || s.Request != "ou=pool,dc=example,dc=test" || s.Receive != "^ou=pool," {
		t.Errorf("ldaps: %+v", s)
	}
	if s := got["nntp"]; s.TLS || s.ConnectChecks != 3 || s.Target.String() != "198.18.0.20:53" {
		t.Errorf("nntp: %+v", s)
	}
}

func TestCheckValidationNamesFieldAndValue(t *testing.T) {
	svc := func(check, server string) string {
		return `{"services":[{"address":"198.18.0.1","port":80` + check + `,"servers":[{"address":"198.18.0.11"` + server + `}]}]}`
	}
	cases := []struct {
		name, doc, field, msg string
	}{
		{"type", svc(`,"check":{"type":"icmp"}`, ""), "services[0].check.type", `"icmp" is not a check type`},
		{"file missing", svc(`,"check":{"type":"file"}`, ""), "services[0].servers[0].check.file", "missing: a file check needs the file to read"},
		{"file relative", svc(`,"check":{"type":"file","file":"weights/a"}`, ""), "services[0].check.file", `"weights/a" is not an absolute path`},
		{"file_weight", svc(`,"check":{"type":"file","file":"/run/w","file_weight":70000}`, ""), "services[0].check.file_weight", "70000 is out of range -65535..65535"},
		{"file on tcp", svc(`,"check":{"type":"tcp","file":"/run/w"}`, ""), "services[0].check.file", "only for file checks, not tcp"},
		{"file_reverse on ping", svc(`,"check":{"type":"ping","file_reverse":true}`, ""), "services[0].check.file_reverse", "only for file checks, not ping"},
		{"mysql without login", svc(`,"check":{"type":"mysql","request":"SELECT 1"}`, ""), "services[0].servers[0].check.login", "missing: a mysql check logs in"},
		{"pgsql without request", svc(`,"check":{"type":"pgsql","login":"mon"}`, ""), "services[0].servers[0].check.request", "missing: a pgsql check runs a query"},
		{"password_file relative", svc(`,"check":{"type":"mysql","login":"mon","request":"SELECT 1","password_file":"etc/pw"}`, ""), "services[0].check.password_file", `"etc/pw" is not a clean absolute path`},
		{"password_file elsewhere", svc(`,"check":{"type":"imap","login":"mon","password_file":"/root/.ssh/id_ed25519"}`, ""), "services[0].check.password_file", `"/root/.ssh/id_ed25519" is not in /etc/ipvsctl/secrets/ or /var/lib/ipvsctl/secrets/`},
		{"secret_file elsewhere", svc(`,"check":{"type":"radius","login":"mon","secret_file":"/var/lib/ipvsctl/tls-self-signed.key"}`, ""), "services[0].check.secret_file", "is not in /etc/ipvsctl/secrets/"},
		{"database on ldap", svc(`,"check":{"type":"ldap","database":"app"}`, ""), "services[0].check.database", "only for mysql and pgsql checks, not ldap"},
		{"login on nntp", svc(`,"check":{"type":"nntp","login":"reader"}`, ""), "services[0].check.login", "only for mysql and pgsql and ldap and ldaps"},
		{"receive on nntp", svc(`,"check":{"type":"nntp","receive":"^200"}`, ""), "services[0].check.receive", "only for ldap and ldaps and ftp checks, not nntp"},
		{"tls_verify on ldap", svc(`,"check":{"type":"ldap","tls_verify":true}`, ""), "services[0].check.tls_verify", "only for https and ldaps and imaps and pops checks, not ldap"},
		{"secret_file on pop", svc(`,"check":{"type":"pop","secret_file":"/etc/s"}`, ""), "services[0].check.secret_file", "only for radius checks, not pop"},
		{"radius without secret", svc(`,"check":{"type":"radius","login":"mon"}`, ""), "services[0].servers[0].check.secret_file", "missing: a radius check signs"},
		{"receive regexp", svc(`,"check":{"type":"ftp","request":"a","receive":"(("}`, ""), "services[0].check.receive", `"((" is not a regular expression`},
		{"login line end", svc(`,"check":{"type":"imap","login":"a\r\nb"}`, ""), "services[0].check.login", "holds a line end"},
		{"interval too small", svc(`,"check":{"type":"tcp","interval":0.05}`, ""), "services[0].check.interval", "0.05 is out of range 0.1..86400 seconds"},
		{"timeout negative", svc(`,"check":{"type":"tcp","timeout":-1}`, ""), "services[0].check.timeout", "-1 is out of range"},
		{"rise", svc(`,"check":{"type":"tcp","rise":-2}`, ""), "services[0].check.rise", "-2 is out of range 1..1000"},
		{"server port", svc(`,"check":{"type":"tcp"}`, `,"check":{"port":70000}`), "services[0].servers[0].check.port", "70000 is out of range 1..65535"},
		{"server without type", svc("", `,"check":{"port":81}`), "services[0].servers[0].check.type", "missing"},
		{"on_failure", svc(`,"check":{"type":"tcp","on_failure":"drop"}`, ""), "services[0].check.on_failure", `"drop" is not a failure action`},
		{"path", svc(`,"check":{"type":"http","path":"healthz"}`, ""), "services[0].check.path", `"healthz" is not a request path`},
		{"path on tcp", svc(`,"check":{"type":"tcp","path":"/"}`, ""), "services[0].check.path", "only for http and https checks, not tcp"},
		{"expect_status", svc(`,"check":{"type":"http","expect_status":[200,99]}`, ""), "services[0].check.expect_status[1]", "99 is out of range 100..599"},
		{"expect_body", svc(`,"check":{"type":"http","expect_body":"ok("}`, ""), "services[0].check.expect_body", "is not a regular expression"},
		{"regex expect", svc(`,"check":{"type":"send_expect","expect":"[","use_regex":true}`, ""), "services[0].check.expect", "is not a regular expression"},
		{"protocol", svc(`,"check":{"type":"send_expect","protocol":"sctp"}`, ""), "services[0].check.protocol", `"sctp" is not a check protocol`},
		{"udp needs send", svc(`,"check":{"type":"send_expect","protocol":"udp","expect":"x"}`, ""), "services[0].servers[0].check.send", "missing"},
		{"dns name", svc(`,"check":{"type":"dns"}`, ""), "services[0].servers[0].check.name", "missing"},
		{"qtype", svc(`,"check":{"type":"dns","name":"a.test","qtype":"WKS"}`, ""), "services[0].check.qtype", `"WKS" is not a query type`},
		{"rcode", svc(`,"check":{"type":"dns","name":"a.test","rcode":"OOPS"}`, ""), "services[0].check.rcode", `"OOPS" is not a response code`},
		{"exec command", svc(`,"check":{"type":"exec"}`, ""), "services[0].servers[0].check.command", "missing"},
		{"exec empty", svc(`,"check":{"type":"exec","command":[]}`, ""), "services[0].check.command", "empty"},
		{"exec bare name", svc(`,"check":{"type":"exec","command":["check_web","-H","%h"]}`, ""), "services[0].check.command[0]", `"check_web" is not an absolute path`},
		{"agent port", svc(`,"check":{"type":"agent"}`, ""), "services[0].servers[0].check.port", "missing: an agent check needs the agent's port"},
		{"dynamic on tcp", svc(`,"check":{"type":"tcp","dynamic_weight":true}`, ""), "services[0].check.dynamic_weight", "only for exec checks"},
		{"check address", svc(`,"check":{"type":"tcp","address":"nowhere"}`, ""), "services[0].check.address", `"nowhere" is not an IP address`},
		{"slow_start", svc(`,"check":{"type":"tcp","slow_start":-1}`, ""), "services[0].check.slow_start", "-1 is out of range"},
		{"health", svc("", `,"health":"sick"`), "services[0].servers[0].health", `"sick" is not a forced health`},
		{"quorum", svc(`,"quorum":-1`, ""), "services[0].quorum", "-1 is out of range 0..65535"},
		{"sorry address", svc(`,"sorry_server":{"address":"2001:db8::5"}`, ""), "services[0].sorry_server.address", "an IPv4 service cannot have an IPv6 sorry server"},
		{"sorry port dr", svc(`,"sorry_server":{"address":"198.18.0.50","port":8080}`, ""), "services[0].sorry_server.port", "only nat forwarding can change the port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := tc.doc
			_, err := compileDoc(t, doc)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a validation error, got %v for %s", err, doc)
			}
			for _, p := range ve.Problems {
				if p.Field == tc.field && strings.Contains(p.Message, tc.msg) {
					return
				}
			}
			t.Errorf("no problem %s: %q in %v", tc.field, tc.msg, ve.Problems)
		})
	}
	// A password never goes in the document: no such field.
	if _, err := compileDoc(t, svc(`,"check":{"type":"imap","login":"a","password":"hunter2"}`, "")); err == nil || !strings.Contains(err.Error(), `unknown field "password"`) {
		t.Errorf("a password in a check: %v", err)
	}
	// Unknown fields in a check are refused.
	if _, err := compileDoc(t, svc(`,"check":{"type":"tcp","retries":3}`, "")); err == nil || !strings.Contains(err.Error(), `unknown field "retries"`) {
		t.Errorf("unknown check field: %v", err)
	}
}

func TestSplitCommand(t *testing.T) {
	for in, want := range map[string][]string{
		`/bin/check %h %p`:           {"/bin/check", "%h", "%p"},
		`  a   "b c" 'd "e"' f\ g  `: {"a", "b c", `d "e"`, "f g"},
		`a "" b`:                     {"a", "", "b"},
		`x\"y`:                       {`x"y`},
		``:                           nil,
	} {
		got, err := SplitCommand(in)
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`a "b`, `a 'b`, `a\`} {
		if _, err := SplitCommand(bad); err == nil {
			t.Errorf("SplitCommand(%q) took it", bad)
		}
	}
}

func TestEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`GET / HTTP/1.0\r\n\r\n`: "GET / HTTP/1.0\r\n\r\n",
		`a\tb\\n\x`:              "a\tb\\n\\x",
		`trailing\`:              `trailing\`,
	} {
		got := DecodeEscapes(in)
		if got != want {
			t.Errorf("DecodeEscapes(%q) = %q, want %q", in, got, want)
		}
		if back := DecodeEscapes(EncodeEscapes(got)); back != got {
			t.Errorf("EncodeEscapes(%q) does not decode back: %q", got, back)
		}
	}
}
