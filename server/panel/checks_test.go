package panel

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"
)

// Every check here talks to 127.0.0.1 only: the daemon's runner checks the
// stored state's servers in the background as the tests go.

// loopbackPort is a 127.0.0.1 port that accepts (and closes) connections,
// or, when open is false, one nothing listens on.
func loopbackPort(t *testing.T, open bool) int {
	t.Helper()
	ln := acceptLoopback(t)
	if !open {
		ln.Close()
	}
	return ln.Addr().(*net.TCPAddr).Port
}

// acceptLoopback listens on 127.0.0.1 and accepts (and closes) connections
// until closed (at the test's end at the latest).
func acceptLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ipvsmgrtest.AcceptAndClose(ln)
	return ln
}

// checkedState is webState with a tcp check of 127.0.0.1:port on the service.
func checkedState(port int) *ipvsmgr.State {
	st := webState()
	st.Services[0].Check = &ipvsmgr.Check{Type: "tcp", Address: "127.0.0.1", Port: port, Interval: 60, Timeout: 1}
	return st
}

// valuesOf is what a browser posts back from a form drawn from f.
func valuesOf(f *form) url.Values {
	v := url.Values{}
	for k, s := range f.Values {
		if s != "" {
			v.Set(k, s)
		}
	}
	for k, m := range f.Multi {
		v[k] = m
	}
	return v
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckFormRoundTripsEveryType(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	ctx := context.Background()
	closed := strconv.Itoa(loopbackPort(t, false))
	common := []string{"check_interval", "0.5", "check_timeout", "0.2", "check_rise", "1", "check_fall", "4", "check_address", "127.0.0.1",
		"check_port", closed, "check_on_failure", "quiesce", "check_slow_start", "30", "check_start_healthy", "yes", "check_warmup", "2.5"}
	// Fields of other types, filled in as a browser without JavaScript
	// may send them: ignored, and no error.
	stray := []string{"check_path", "/stray", "check_send", "stray", "check_name", "stray.example.", "check_command", "/bin/false",
		"check_tls_verify", "yes", "check_qtype", "MX"}
	yes, no := true, false
	thirty, warmup := 30.0, 2.5
	base := ipvsmgr.Check{Interval: 0.5, Timeout: 0.2, Rise: 1, Fall: 4, Address: "127.0.0.1", Port: atoi(closed), OnFailure: "quiesce",
		SlowStart: &thirty, StartHealthy: &yes, Warmup: &warmup}
	with := func(typ string, set func(c *ipvsmgr.Check)) ipvsmgr.Check {
		c := base
		c.Type = typ
		if set != nil {
			set(&c)
		}
		return c
	}
	cases := []struct {
		typ    string
		fields []string
		want   ipvsmgr.Check
	}{
		{"tcp", nil, with("tcp", nil)},
		{"http", []string{"check_method", "HEAD", "check_path", "/healthz", "check_host", "www.example.test", "check_expect_status", "200, 204 301",
			"check_expect_body", "ok|ready"}, with("http", func(c *ipvsmgr.Check) {
			c.Method, c.Path, c.Host, c.ExpectStatus, c.ExpectBody = "HEAD", "/healthz", "www.example.test", []int{200, 204, 301}, "ok|ready"
		})},
		{"https", []string{"check_path", "/tls", "check_tls_verify", "yes", "check_sni", "www.example.test"}, with("https", func(c *ipvsmgr.Check) {
			c.Path, c.TLSVerify, c.SNI = "/tls", &yes, "www.example.test"
		})},
		{"send_expect", []string{"check_send", `GET / HTTP/1.0\r\n\r\n`, "check_expect", "HTTP/1.", "check_use_regex", "no", "check_protocol", "tcp"},
			with("send_expect", func(c *ipvsmgr.Check) {
				c.Send, c.Expect, c.UseRegex, c.Protocol = `GET / HTTP/1.0\r\n\r\n`, "HTTP/1.", &no, "tcp"
			})},
		{"dns", []string{"check_name", "www.example.test.", "check_qtype", "AAAA", "check_rcode", "NXDOMAIN", "check_protocol", "udp"},
			with("dns", func(c *ipvsmgr.Check) {
				c.Name, c.QType, c.RCode, c.Protocol = "www.example.test.", "AAAA", "NXDOMAIN", "udp"
			})},
		{"exec", []string{"check_command", `/bin/true %h %p 'two words' "it's"`, "check_dynamic_weight", "yes"},
			with("exec", func(c *ipvsmgr.Check) {
				c.Command, c.DynamicWeight = ipvsmgr.Argv{"/bin/true", "%h", "%p", "two words", "it's"}, &yes
			})},
		{"agent", nil, with("agent", nil)},
		{"ping", nil, with("ping", nil)},
		{"file", []string{"check_file", "/run/ipvsctl-test/web.weight", "check_file_weight", "-5", "check_file_reverse", "yes"},
			with("file", func(c *ipvsmgr.Check) {
				minus5 := -5
				c.File, c.FileWeight, c.FileReverse = "/run/ipvsctl-test/web.weight", &minus5, &yes
			})},
		{"mysql", []string{"check_login", "monitor", "check_password_file", "/etc/ipvsctl/secrets/db.passwd", "check_database", "app",
			"check_request", "SELECT 1 FROM pool WHERE enabled = 1"}, with("mysql", func(c *ipvsmgr.Check) {
			c.Login, c.PasswordFile, c.Database, c.Request = "monitor", "/etc/ipvsctl/secrets/db.passwd", "app", "SELECT 1 FROM pool WHERE enabled = 1"
		})},
		{"ldap", []string{"check_login", "cn=monitor,dc=example,dc=test", "check_request", "ou=pool,dc=example,dc=test", "check_receive", "^ou=pool"},
			with("ldap", func(c *ipvsmgr.Check) {
				c.Login, c.Request, c.Receive = "cn=monitor,dc=example,dc=test", "ou=pool,dc=example,dc=test", "^ou=pool"
			})},
		{"radius", []string{"check_login", "monitor", "check_password_file", "/etc/ipvsctl/secrets/r.passwd", "check_secret_file", "/etc/ipvsctl/secrets/r.secret"},
			with("radius", func(c *ipvsmgr.Check) {
				c.Login, c.PasswordFile, c.SecretFile = "monitor", "/etc/ipvsctl/secrets/r.passwd", "/etc/ipvsctl/secrets/r.secret"
			})},
		{"pops", []string{"check_login", "monitor", "check_tls_verify", "yes"}, with("pops", func(c *ipvsmgr.Check) { c.Login, c.TLSVerify = "monitor", &yes })},
		{"sip", []string{"check_login", "monitor@198.18.0.100", "check_protocol", "tcp"}, with("sip", func(c *ipvsmgr.Check) {
			c.Login, c.Protocol = "monitor@198.18.0.100", "tcp"
		})},
		{"none", nil, ipvsmgr.Check{Type: "none", OnFailure: "quiesce"}},
	}
	for _, c := range cases {
		kv := append([]string{"name", "web", "address", "198.18.0.100", "port", "80", "scheduler", "wrr", "check_type", c.typ,
			"sorry_server_address", "198.18.0.50", "quorum", "2"}, common...)
		kv = append(append(kv, stray...), c.fields...)
		r := e.post(t, "alice", "/services/web", svcForm(kv...))
		if r.Code != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", c.typ, r.Code, excerpt(r.Body))
		}
		st, rev, _ := e.core.State(ctx)
		svc := &st.Services[0]
		if got, want := jsonOf(t, svc.Check), jsonOf(t, c.want); got != want {
			t.Errorf("%s: stored check\n %s\nwant\n %s", c.typ, got, want)
		}
		if svc.SorryServer == nil || *svc.SorryServer != (ipvsmgr.SorryServer{Address: "198.18.0.50"}) || svc.Quorum != 2 {
			t.Errorf("%s: sorry server %+v quorum %d", c.typ, svc.SorryServer, svc.Quorum)
		}
		// The edit form shows what is stored, and every check field is in it
		// (without JavaScript the other types' are shown, blank).
		page := e.get(t, "alice", "/services/web/edit").Body
		for _, name := range checkFieldNames(false) {
			if !strings.Contains(page, `name="`+name+`"`) {
				t.Errorf("%s: the edit form has no field %s", c.typ, name)
			}
		}
		if !strings.Contains(page, `<option value="`+c.typ+`" selected>`) {
			t.Errorf("%s: the edit form does not show the type", c.typ)
		}
		// Saving the form as it was drawn changes nothing.
		r = e.post(t, "alice", "/services/web", valuesOf(serviceForm(svc)))
		st2, rev2, _ := e.core.State(ctx)
		if r.Code != http.StatusSeeOther || rev2 != rev || jsonOf(t, st2) != jsonOf(t, st) {
			t.Errorf("%s: saving the drawn form again: %d, revision %d -> %d\n%s\n%s", c.typ, r.Code, rev, rev2, jsonOf(t, st.Services[0]), jsonOf(t, st2.Services[0]))
		}
	}
	// The service page says what the check is.
	if page := e.get(t, "vic", "/services/web").Body; !strings.Contains(page, "<dt>Check type</dt>") && !strings.Contains(page, "<dt>Type</dt><dd>none</dd>") {
		t.Errorf("service page: no check shown: %s", excerpt(page))
	}
	// No check type: no check, and no sorry server without an address.
	r := e.post(t, "alice", "/services/web", svcForm("name", "web", "address", "198.18.0.100", "port", "80", "scheduler", "wrr", "check_type", "",
		"check_path", "/ignored", "check_interval", "5"))
	st, _, _ := e.core.State(ctx)
	if r.Code != http.StatusSeeOther || st.Services[0].Check != nil || st.Services[0].SorryServer != nil || st.Services[0].Quorum != 0 {
		t.Fatalf("removing the check: %d %+v %+v", r.Code, st.Services[0].Check, st.Services[0].SorryServer)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// A real server's form: overrides of the service's check, and its forced health.
func TestServerCheckOverrides(t *testing.T) {
	e := newEnv(t)
	st := webState()
	st.Services[0].Check = &ipvsmgr.Check{Type: "http", Address: "127.0.0.1", Port: loopbackPort(t, false), Path: "/", Interval: 60}
	e.seed(t, st)
	ctx := context.Background()
	form := url.Values{"name": {"r2"}, "address": {"198.18.0.12"}, "weight": {"3"}, "enabled": {"1"}, "health": {"down"},
		"check_type": {""}, "check_path": {"/r2"}, "check_port": {"8081"}, "check_send": {"ignored: not an http field"}}
	r := e.post(t, "alice", "/services/web/servers/r2", form)
	if r.Code != http.StatusSeeOther {
		t.Fatalf("save: %d %s", r.Code, excerpt(r.Body))
	}
	cur, rev, _ := e.core.State(ctx)
	rs := cur.Services[0].Servers[1]
	if got := jsonOf(t, rs.Check); got != `{"port":8081,"path":"/r2"}` || rs.Health != "down" {
		t.Fatalf("stored %s health %q", got, rs.Health)
	}
	page := e.get(t, "alice", "/services/web/servers/r2/edit").Body
	for _, want := range []string{`value="/r2"`, `value="8081"`, `<option value="down" selected>`, `the service&#39;s (http)`, `data-inherit="http"`} {
		if !strings.Contains(page, want) {
			t.Errorf("edit form lacks %s", want)
		}
	}
	if page := e.get(t, "vic", "/services/web/servers/r2").Body; !strings.Contains(page, `id="check-overrides"`) || !strings.Contains(page, "forced down") {
		t.Errorf("server page: overrides not shown: %s", excerpt(page))
	}
	// The form as drawn saves to nothing new.
	f := serverForm(&rs, "http")
	if r = e.post(t, "alice", "/services/web/servers/r2", valuesOf(f)); r.Code != http.StatusSeeOther {
		t.Fatalf("save again: %d %s", r.Code, excerpt(r.Body))
	}
	if _, rev2, _ := e.core.State(ctx); rev2 != rev {
		t.Errorf("saving the drawn form made revision %d", rev2)
	}
	// An operator forces health, and cannot change the check.
	r = e.post(t, "oscar", "/services/web/servers/r2", url.Values{"weight": {"3"}, "health": {"up"}, "check_port": {"9"}, "check_type": {"exec"},
		"check_command": {"/bin/sh -c evil"}})
	cur, _, _ = e.core.State(ctx)
	if rs := cur.Services[0].Servers[1]; r.Code != http.StatusSeeOther || rs.Health != "up" || jsonOf(t, rs.Check) != `{"port":8081,"path":"/r2"}` {
		t.Fatalf("operator: %d health %q check %s", r.Code, rs.Health, jsonOf(t, rs.Check))
	}
	if page := e.get(t, "oscar", "/services/web/servers/r2/edit").Body; !strings.Contains(page, `id="c-check_port" name="check_port" value="8081" readonly`) ||
		!strings.Contains(page, `id="c-check_type" name="check_type" disabled`) || strings.Contains(page, `id="r-health" name="health" disabled`) {
		t.Errorf("operator's form: check fields not read-only, or health not editable: %s", excerpt(page))
	}
	// Emptying every field and choosing auto removes the overrides.
	r = e.post(t, "alice", "/services/web/servers/r2", url.Values{"name": {"r2"}, "address": {"198.18.0.12"}, "weight": {"3"}, "enabled": {"1"}})
	cur, _, _ = e.core.State(ctx)
	if rs := cur.Services[0].Servers[1]; r.Code != http.StatusSeeOther || rs.Check != nil || rs.Health != "" {
		t.Fatalf("clearing: %d %+v %q", r.Code, rs.Check, rs.Health)
	}
	// A service without a check gives its server nothing to inherit.
	e.post(t, "alice", "/services/web", svcForm("name", "web", "address", "198.18.0.100", "port", "80", "scheduler", "wrr"))
	r = e.post(t, "alice", "/services/web/servers/r1", url.Values{"name": {"r1"}, "address": {"198.18.0.11"}, "weight": {"1"}, "check_port": {"80"}})
	if got := errBeside(r.Body, "check_type"); r.Code != http.StatusUnprocessableEntity || !strings.Contains(got, "no check to inherit a type from") {
		t.Fatalf("no type to inherit: %d beside check_type %q\n%s", r.Code, got, excerpt(r.Body))
	}
}

func TestCheckFormErrorsBesideFields(t *testing.T) {
	e := newEnv(t)
	seeded := checkedState(loopbackPort(t, false))
	seeded.Services[0].Servers[1].Check = &ipvsmgr.Check{Port: 8081}
	rev := e.seed(t, seeded)
	ctx := context.Background()
	before, _, _ := e.core.State(ctx)
	svc := func(kv ...string) url.Values {
		return svcForm(append([]string{"name", "web", "address", "198.18.0.100", "port", "80", "check_address", "127.0.0.1"}, kv...)...)
	}
	cases := []struct {
		target string
		form   url.Values
		field  string
		want   string
	}{
		{"/services/web", svc("check_type", "tcp", "check_timeout", "0.01"), "check_timeout", "0.01 is out of range 0.1..3600 seconds"},
		{"/services/web", svc("check_type", "tcp", "check_interval", "fast"), "check_interval", "not a number of seconds"},
		{"/services/web", svc("check_type", "tcp", "check_rise", "0"), "", ""}, // 0 is "not set": the default
		{"/services/web", svc("check_type", "tcp", "check_fall", "2000"), "check_fall", "out of range 1..1000"},
		{"/services/web", svc("check_type", "http", "check_expect_status", "200, 999"), "check_expect_status", "999 is out of range 100..599"},
		{"/services/web", svc("check_type", "http", "check_expect_status", "ok"), "check_expect_status", "not a status code"},
		{"/services/web", svc("check_type", "http", "check_expect_body", "(unclosed"), "check_expect_body", "not a regular expression"},
		{"/services/web", svc("check_type", "http", "check_path", "no-slash"), "check_path", "not a request path"},
		{"/services/web", svc("check_type", "http", "check_method", "get"), "check_method", "not an HTTP method"},
		{"/services/web", svc("check_type", "send_expect", "check_use_regex", "yes", "check_expect", "([a-"), "check_expect", "not a regular expression"},
		{"/services/web", svc("check_type", "send_expect", "check_protocol", "sctp"), "check_protocol", "not a check protocol"},
		{"/services/web", svc("check_type", "dns", "check_name", "a..b"), "check_name", "not a domain name"},
		{"/services/web", svc("check_type", "exec", "check_command", `/bin/true "unterminated`), "check_command", "unterminated"},
		{"/services/web", svc("check_type", "tcp", "check_on_failure", "panic"), "check_on_failure", "not a failure action"},
		{"/services/web", svc("check_type", "tcp", "check_start_healthy", "maybe"), "check_start_healthy", "not yes or no"},
		{"/services/web", svc("check_type", "tcp", "check_slow_start", "-3"), "check_slow_start", "out of range"},
		{"/services/web", svc("check_type", "tcp", "check_warmup", "-1"), "check_warmup", "out of range"},
		{"/services/web", svc("group", "edge{1}"), "group", "a group name cannot hold a quote, a brace"},
		{"/services/web", svc("check_type", "tcp", "quorum", "2", "hysteresis", "2"), "hysteresis", "2 is out of range 0..1 (below the quorum, 2)"},
		{"/services/web", svc("check_type", "telnet"), "check_type", "not a check type"},
		{"/services/web", svc("check_type", "tcp", "quorum_down", "notify.sh down"), "quorum_down", "is not an absolute path"},
		{"/services/web", svc("check_type", "tcp", "quorum_up", `/bin/true "unterminated`), "quorum_up", "unterminated"},
		{"/services/web", svc("check_type", "file", "check_file", "weights/web"), "check_file", "is not an absolute path"},
		{"/services/web", svc("check_type", "file", "check_file", "/run/w", "check_file_weight", "70000"), "check_file_weight", "70000 is out of range -65535..65535"},
		{"/services/web", svc("check_type", "file", "check_file", "/run/w", "check_file_weight", "heavy"), "check_file_weight", "not a whole number"},
		{"/services/web", svc("check_type", "file", "check_file", "/run/w", "check_file_reverse", "perhaps"), "check_file_reverse", "not yes or no"},
		{"/services/web", svc("check_type", "tcp", "check_port", "70000"), "check_port", "out of range 1..65535"},
		{"/services/web", svc("check_type", "tcp", "sorry_server_address", "not-an-ip"), "sorry_server_address", "not an IP address"},
		{"/services/web", svc("check_type", "tcp", "sorry_server_address", "198.18.0.50", "sorry_server_port", "8080"), "sorry_server_port", "only nat"},
		{"/services/web", svc("check_type", "tcp", "quorum", "-1"), "quorum", "out of range"},
		{"/services/web/servers/r2", url.Values{"name": {"r2"}, "address": {"198.18.0.12"}, "weight": {"3"}, "check_timeout": {"0.01"}},
			"check_timeout", "out of range 0.1..3600"},
		{"/services/web/servers/r2", url.Values{"name": {"r2"}, "address": {"198.18.0.12"}, "weight": {"3"}, "health": {"sideways"}},
			"health", "not a forced health"},
		{"/services/web/servers", url.Values{"address": {"198.18.0.13"}, "weight": {"1"}, "check_type": {"https"}, "check_sni": {"a b"}},
			"check_sni", "not a server name"},
	}
	for _, c := range cases {
		r := e.post(t, "alice", c.target, c.form)
		if c.field == "" {
			if r.Code != http.StatusSeeOther {
				t.Errorf("%v: %d %s", c.form, r.Code, excerpt(r.Body))
			}
			e.seed(t, seeded)
			rev, _ = e.core.CurrentRevision(ctx)
			continue
		}
		if r.Code != http.StatusUnprocessableEntity {
			t.Errorf("%s %v: status %d, want 422: %s", c.target, c.form, r.Code, excerpt(r.Body))
			continue
		}
		if got := errBeside(r.Body, c.field); !strings.Contains(got, c.want) {
			t.Errorf("%s %v: beside %s: %q, want %q\n%s", c.target, c.form, c.field, got, c.want, excerpt(r.Body))
		}
		if !strings.Contains(r.Body, `aria-describedby="`+c.field+`-err"`) {
			t.Errorf("%v: field %s not marked invalid", c.form, c.field)
		}
		// What was typed is shown again, to be corrected.
		if v := c.form.Get(c.field); v != "" && !strings.Contains(r.Body, `value="`+v+`"`) && !strings.Contains(r.Body, `<option value="`) {
			t.Errorf("%v: the typed %q is not shown again", c.form, v)
		}
		// Nothing stored is lost.
		after, cur, _ := e.core.State(ctx)
		if cur != rev || jsonOf(t, after) != jsonOf(t, before) {
			t.Fatalf("%v: a refused form changed the state (revision %d -> %d)", c.form, rev, cur)
		}
	}
}

func TestCheckFormViewerAndXSS(t *testing.T) {
	e := newEnv(t)
	st := checkedState(loopbackPort(t, true))
	e.seed(t, st)
	ctx := context.Background()
	xssPath := `/"><script>alert(1)</script>`
	xssBody := `<img src=x onerror=alert(2)>`
	xssSend := `"><script>alert(3)</script>\r\n`
	xssExpect := `'><svg onload=alert(4)>`
	r := e.post(t, "alice", "/services/web", svcForm("name", "web", "address", "198.18.0.100", "port", "80", "check_type", "http",
		"check_address", "127.0.0.1", "check_path", xssPath, "check_expect_body", xssBody))
	if r.Code != http.StatusSeeOther {
		t.Fatalf("save: %d %s", r.Code, excerpt(r.Body))
	}
	r = e.post(t, "alice", "/services/web/servers/r1", url.Values{"name": {"r1"}, "address": {"198.18.0.11"}, "weight": {"1"}, "enabled": {"1"},
		"check_type": {"send_expect"}, "check_send": {xssSend}, "check_expect": {xssExpect}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("save r1: %d %s", r.Code, excerpt(r.Body))
	}
	cur, _, _ := e.core.State(ctx)
	if c := cur.Services[0].Servers[0].Check; c == nil || c.Send != xssSend || c.Expect != xssExpect || cur.Services[0].Check.Path != xssPath {
		t.Fatalf("not stored as typed: %s", jsonOf(t, cur.Services[0]))
	}
	for _, pg := range []string{"/services/web/edit", "/services/web", "/services/web/servers/r1/edit", "/services/web/servers/r1"} {
		body := e.get(t, "alice", pg).Body
		for _, raw := range []string{"<script>alert", "<img src=x", "<svg onload", `"><script`, `'><svg`} {
			if strings.Contains(body, raw) {
				t.Errorf("%s: %q comes back unescaped", pg, raw)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;alert(") {
			t.Errorf("%s: the payload is not shown escaped", pg)
		}
	}
	// A viewer sees the check, and no control to change or run it.
	for _, pg := range []string{"/services/web", "/services/web/servers/r1", "/services/web/servers/r2"} {
		body := e.get(t, "vic", pg).Body
		body = strings.Replace(body, `<form method="post" action="/logout"`, "", 1)
		if strings.Contains(body, `method="post"`) || strings.Contains(body, "Test check") || strings.Contains(body, "check-now") {
			t.Errorf("viewer sees a write control on %s", pg)
		}
		if !strings.Contains(body, "Health check") {
			t.Errorf("viewer does not see the check on %s", pg)
		}
	}
	before, rev, _ := e.core.State(ctx)
	for _, pg := range []string{"/services/web/servers/r2/check", "/services/web", "/services/web/servers/r2"} {
		r := e.post(t, "vic", pg, url.Values{"check_type": {"tcp"}, "health": {"down"}, "check_port": {"1"}})
		if r.Code != http.StatusForbidden || strings.Contains(r.Body, `id="check-result"`) {
			t.Errorf("viewer POST %s: %d, want 403", pg, r.Code)
		}
	}
	if r := e.get(t, "vic", "/services/web/servers/r2/edit"); r.Code != http.StatusForbidden {
		t.Errorf("viewer opens the real-server form: %d", r.Code)
	}
	after, rev2, _ := e.core.State(ctx)
	if rev2 != rev || jsonOf(t, after) != jsonOf(t, before) {
		t.Fatal("a viewer's posts changed the state")
	}
}

// "Test this check now" against a real listener, and a closed port.
func TestCheckNow(t *testing.T) {
	e := newEnv(t)
	open, closed := loopbackPort(t, true), loopbackPort(t, false)
	st := checkedState(open)
	st.Services[0].Servers[1].Check = &ipvsmgr.Check{Port: closed}
	rev := e.seed(t, st)
	// The operator gets the button, on the service's page and the server's.
	if page := e.get(t, "oscar", "/services/web").Body; strings.Count(page, ">Test check</button>") != 2 {
		t.Errorf("service page: want a Test check button per real server: %s", excerpt(page))
	}
	page := e.get(t, "oscar", "/services/web/servers/r1").Body
	if !strings.Contains(page, `<form method="post" action="/services/web/servers/r1/check"`) || !strings.Contains(page, "Test this check now") {
		t.Fatalf("server page: no test button: %s", excerpt(page))
	}
	result := func(body string) string {
		i := strings.Index(body, `id="check-result"`)
		if i < 0 {
			return ""
		}
		j := strings.Index(body[i:], "</div>")
		return body[i : i+j]
	}
	r := e.post(t, "oscar", "/services/web/servers/r1/check", nil)
	got := result(r.Body)
	if r.Code != http.StatusOK || !strings.Contains(got, `<span class="state st-pass">pass</span>`) || !strings.Contains(got, "127.0.0.1:"+strconv.Itoa(open)) ||
		!strings.Contains(got, "<strong>tcp</strong>") || !regexp.MustCompile(`in [0-9.]+ ms`).MatchString(got) {
		t.Fatalf("open port: %d %q\n%s", r.Code, got, excerpt(r.Body))
	}
	r = e.post(t, "oscar", "/services/web/servers/r2/check", nil)
	if got := result(r.Body); r.Code != http.StatusOK || !strings.Contains(got, `st-fail">fail</span>`) || !strings.Contains(got, "connection refused") ||
		!strings.Contains(got, "127.0.0.1:"+strconv.Itoa(closed)) {
		t.Fatalf("closed port: %d %q", r.Code, got)
	}
	// A server whose check cannot run says why, beside the button's place.
	e.post(t, "alice", "/services/web/servers/r2/disable", nil)
	r = e.post(t, "oscar", "/services/web/servers/r2/check", nil)
	if got := result(r.Body); r.Code != http.StatusOK || !strings.Contains(got, "not run") || !strings.Contains(got, "disabled") {
		t.Fatalf("disabled server: %d %q", r.Code, got)
	}
	// Testing writes nothing.
	if cur, _ := e.core.CurrentRevision(context.Background()); cur != rev+1 {
		t.Fatalf("revision %d after one disable on %d", cur, rev)
	}
}
