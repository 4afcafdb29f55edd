package panel

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// errBeside finds the message rendered beside field name.
func errBeside(body, name string) string {
	re := regexp.MustCompile(`<p class="fielderr" id="` + regexp.QuoteMeta(name) + `-err" role="alert">([^<]*)</p>`)
	if m := re.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

func svcForm(kv ...string) url.Values {
	f := url.Values{"name": {"api"}, "kind": {"port"}, "address": {"198.18.0.101"}, "port": {"443"}, "enabled": {"1"}}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			f.Del(kv[i])
		} else {
			f.Set(kv[i], kv[i+1])
		}
	}
	return f
}

func TestServiceFormErrorsBesideFields(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	cases := []struct {
		form  url.Values
		field string
		want  string
	}{
		{svcForm("port", "70000"), "port", "out of range"},
		{svcForm("port", "eighty"), "port", "not a whole number"},
		{svcForm("address", "not-an-ip"), "address", "not an IP address"},
		{svcForm("scheduler", "fastest"), "scheduler", "not a scheduler"},
		{svcForm("protocol", "icmp"), "protocol", "not a protocol"},
		{svcForm("persistence", "-5"), "persistence", "out of range"},
		{svcForm("persistence", "60", "persistence_netmask", "255.0.255.0"), "persistence_netmask", ""},
		{svcForm("interface", "bad interface!"), "interface", "not an interface name"},
		{svcForm("forwarding", "magic"), "forwarding", "not a forwarding method"},
		{svcForm("scheduler", "rr", "scheduler_flags", "port"), "scheduler_flags", "takes no flags"},
		{svcForm("one_packet", "1"), "one_packet", "one-packet"},
		{svcForm("kind", "fwmark", "fwmark", "5", "match", "tcp 80,99999"), "match", "out of range"},
		{svcForm("kind", "fwmark", "fwmark", "0"), "fwmark", "mark above 0"},
		{svcForm("name", "web"), "name", "already exists"},
		{svcForm("name", ""), "name", "needs a name"},
	}
	for _, c := range cases {
		r := e.post(t, "alice", "/services", c.form)
		if r.Code != http.StatusUnprocessableEntity {
			t.Errorf("%v: status %d, want 422: %s", c.form, r.Code, excerpt(r.Body))
			continue
		}
		got := errBeside(r.Body, c.field)
		if got == "" || !strings.Contains(got, c.want) {
			t.Errorf("%v: beside %s: %q, want %q\n%s", c.form, c.field, got, c.want, excerpt(r.Body))
		}
		if !strings.Contains(r.Body, `aria-describedby="`+c.field+`-err"`) && c.field != "scheduler_flags" && c.field != "one_packet" {
			t.Errorf("%v: field %s not marked invalid", c.form, c.field)
		}
	}
	// The edit form too, through PatchService's validation (paths services[0].x).
	r := e.post(t, "alice", "/services/web", svcForm("name", "web", "port", "0"))
	if got := errBeside(r.Body, "port"); !strings.Contains(got, "only valid for a persistent service") {
		t.Errorf("edit: beside port %q\n%s", got, excerpt(r.Body))
	}
	// Settings.
	r = e.post(t, "alice", "/settings", url.Values{"network": {"carrier-pigeon"}, "tcp_timeout": {"-1"}, "retire_timeout": {"x"}})
	for field, want := range map[string]string{"retire_timeout": "not a whole number"} {
		if got := errBeside(r.Body, field); !strings.Contains(got, want) {
			t.Errorf("settings beside %s: %q, want %q", field, got, want)
		}
	}
	r = e.post(t, "alice", "/settings", url.Values{"network": {"carrier-pigeon"}, "tcp_timeout": {"-1"}})
	for field, want := range map[string]string{"network": "not a forwarding method", "tcp_timeout": "out of range"} {
		if got := errBeside(r.Body, field); !strings.Contains(got, want) {
			t.Errorf("settings beside %s: %q, want %q\n%s", field, got, want, excerpt(r.Body))
		}
	}
}

func TestServerFormErrorsBesideFields(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	base := url.Values{"address": {"198.18.0.13"}, "weight": {"1"}, "enabled": {"1"}}
	with := func(kv ...string) url.Values {
		f := url.Values{}
		for k, v := range base {
			f[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	cases := []struct {
		form  url.Values
		field string
		want  string
	}{
		{with("weight", "70000"), "weight", "out of range 0..65535"},
		{with("address", "198.18.0.999"), "address", "not an IP address"},
		{with("address", "2001:db8::1"), "address", "IPv4 service cannot have an IPv6"},
		{with("port", "8080"), "port", "differs from the service port"},
		{with("upper_threshold", "10", "lower_threshold", "20"), "lower_threshold", "above upper_threshold"},
		{with("forwarding", "magic"), "forwarding", "not a forwarding method"},
		{with("address", "198.18.0.11"), "address", "duplicate real server"},
		{with("name", "r1"), "name", "already has a real server"},
	}
	for _, c := range cases {
		r := e.post(t, "alice", "/services/web/servers", c.form)
		if r.Code != http.StatusUnprocessableEntity {
			t.Errorf("%v: status %d: %s", c.form, r.Code, excerpt(r.Body))
			continue
		}
		if got := errBeside(r.Body, c.field); !strings.Contains(got, c.want) {
			t.Errorf("%v: beside %s: %q, want %q\n%s", c.form, c.field, got, c.want, excerpt(r.Body))
		}
	}
	// Editing r2 (index 1): the core names services[0].servers[1].weight.
	r := e.post(t, "alice", "/services/web/servers/r2", url.Values{"name": {"r2"}, "address": {"198.18.0.12"}, "weight": {"-1"}, "enabled": {"1"}})
	if got := errBeside(r.Body, "weight"); !strings.Contains(got, "out of range") {
		t.Errorf("edit r2: beside weight %q\n%s", got, excerpt(r.Body))
	}
}

func TestFormsApplyAndEdit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.post(t, "alice", "/services", svcForm("name", "api", "scheduler", "sh", "scheduler_flags", "port", "persistence", "300",
		"persistence_netmask", "255.255.255.0", "interface", "eth0"))
	if r.Code != http.StatusSeeOther || r.Header.Get("Location") != "/services/api" {
		t.Fatalf("add service: %d %s %s", r.Code, r.Header.Get("Location"), excerpt(r.Body))
	}
	for _, a := range []string{"198.18.0.21", "198.18.0.22"} {
		r = e.post(t, "alice", "/services/api/servers", url.Values{"address": {a}, "weight": {"2"}, "upper_threshold": {"100"}, "enabled": {"1"}})
		if r.Code != http.StatusSeeOther {
			t.Fatalf("add server %s: %d %s", a, r.Code, excerpt(r.Body))
		}
	}
	st, _, _ := e.core.State(ctx)
	got := st.Services[0]
	if got.Scheduler != "sh" || got.Persistence != 300 || len(got.Servers) != 2 || *got.Servers[1].Weight != 2 || got.Servers[1].UpperThreshold != 100 {
		t.Fatalf("stored %+v", got)
	}
	// Edit every field, into a fwmark service with match rules.
	r = e.post(t, "alice", "/services/api", url.Values{"name": {"api2"}, "kind": {"fwmark"}, "fwmark": {"7"}, "address": {"198.18.0.101"},
		"match": {"tcp 80,443\nudp 53"}, "interface": {"eth1"}, "scheduler": {"mh"}, "scheduler_flags": {"fallback"}, "forwarding": {"tun"}})
	if r.Code != http.StatusSeeOther || r.Header.Get("Location") != "/services/api2" {
		t.Fatalf("edit: %d %s %s", r.Code, r.Header.Get("Location"), excerpt(r.Body))
	}
	st, _, _ = e.core.State(ctx)
	got = st.Services[0]
	if got.Name != "api2" || got.FWMark != 7 || got.Port != 0 || got.Protocol != "" || len(got.Match) != 2 || got.Match[1].Protocol != "udp" ||
		got.Forwarding != "tun" || got.Scheduler != "mh" || got.IsEnabled() || got.Persistence != 0 {
		t.Fatalf("after edit %+v", got)
	}
	// Activate: a whole virtual service is an admin's (server.Policy), as in the API.
	if r := e.post(t, "oscar", "/services/api2/enable", nil); r.Code != http.StatusForbidden {
		t.Fatalf("an operator enabled a virtual service: %d", r.Code)
	}
	e.post(t, "alice", "/services/api2/enable", nil)
	st, _, _ = e.core.State(ctx)
	if !st.Services[0].IsEnabled() {
		t.Fatal("enable did nothing")
	}
	// The operator edits a weight but nothing else.
	r = e.post(t, "oscar", "/services/api2/servers/198.18.0.21", url.Values{"address": {"198.18.0.99"}, "weight": {"9"}, "name": {"evil"}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("operator weight: %d %s", r.Code, excerpt(r.Body))
	}
	st, _, _ = e.core.State(ctx)
	if rs := st.Services[0].Servers[0]; *rs.Weight != 9 || rs.Address != "198.18.0.21" || rs.Name != "" {
		t.Fatalf("operator edit changed %+v", rs)
	}
	// Settings.
	r = e.post(t, "alice", "/settings", url.Values{"network": {"nat"}, "tcp_timeout": {"900"}, "tcpfin_timeout": {"120"}, "udp_timeout": {"300"},
		"retire_timeout": {"30"}, "keep_foreign_services": {"1"}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("settings: %d %s", r.Code, excerpt(r.Body))
	}
	st, _, _ = e.core.State(ctx)
	if s := st.Settings; s.Network != "nat" || s.TCPTimeout != 900 || s.RetireTimeout != 30 || !s.KeepForeignServices {
		t.Fatalf("settings %+v", s)
	}
	// Remove a server, then the service.
	if r = e.post(t, "alice", "/services/api2/servers/198.18.0.22/delete", nil); r.Code != http.StatusSeeOther {
		t.Fatalf("rm server: %d %s", r.Code, excerpt(r.Body))
	}
	if r = e.post(t, "alice", "/services/api2/delete", nil); r.Code != http.StatusSeeOther {
		t.Fatalf("rm service: %d %s", r.Code, excerpt(r.Body))
	}
	st, _, _ = e.core.State(ctx)
	if len(st.Services) != 0 {
		t.Fatalf("services left: %+v", st.Services)
	}
}

// A viewer sees no write control anywhere, and every write is refused.
func TestViewerSeesNoWriteControlsAndIsRefused(t *testing.T) {
	e := newEnv(t)
	rev := e.seed(t, webState())
	waitFor(t, "kernel", func() bool {
		m, _ := e.panel.model(t.Context())
		return m != nil && len(m.Rows) == 1 && m.Rows[0].InKernel
	})
	for _, pg := range []string{"/", "/live", "/live/rows", "/services", "/services/web", "/services/web/servers/r1", "/settings",
		"/history", "/history/1", "/import", "/draft", "/addresses/198.18.0.11", "/services/web/servers/r1/why"} {
		r := e.get(t, "vic", pg)
		body := r.Body
		// The only form a viewer gets is logging out and their own password.
		body = strings.Replace(body, `<form method="post" action="/logout"`, "", 1)
		if strings.Contains(body, `method="post"`) || strings.Contains(body, "formaction") || strings.Contains(body, `type="submit" class="primary"`) {
			t.Errorf("viewer sees a write control on %s", pg)
		}
	}
	posts := []string{"/services", "/services/web", "/services/web/enable", "/services/web/disable", "/services/web/delete",
		"/services/web/servers", "/services/web/servers/r1", "/services/web/servers/r1/drain", "/services/web/servers/r1/enable",
		"/services/web/servers/r1/disable", "/services/web/servers/r1/delete", "/services/web/servers/r1/check", "/actions", "/settings", "/draft/start", "/draft/apply",
		"/draft/discard", "/history/1/rollback", "/import", "/import/apply", "/users", "/users/vic/role", "/tokens", "/tokens/t1/revoke"}
	for _, pg := range posts {
		r := e.post(t, "vic", pg, url.Values{"action": {"drain"}, "sel": {"web/r1"}, "weight": {"0"}, "name": {"x"}})
		if r.Code != http.StatusForbidden {
			t.Errorf("viewer POST %s: %d, want 403", pg, r.Code)
		}
	}
	// The operator may drain but not edit services, settings or history.
	for _, pg := range []string{"/services", "/services/web", "/services/web/delete", "/services/web/servers", "/services/web/servers/r1/delete",
		"/settings", "/draft/start", "/history/1/rollback", "/import", "/users"} {
		if r := e.post(t, "oscar", pg, url.Values{"name": {"x"}}); r.Code != http.StatusForbidden {
			t.Errorf("operator POST %s: %d, want 403", pg, r.Code)
		}
	}
	if cur, _ := e.core.CurrentRevision(context.Background()); cur != rev {
		t.Fatalf("refused posts changed the state: revision %d, was %d", cur, rev)
	}
	// Nobody logged in: refused too.
	if r := e.post(t, "", "/services/web/servers/r1/drain", nil); r.Code != http.StatusUnauthorized {
		t.Errorf("anonymous POST: %d", r.Code)
	}
}

func TestCrossOriginPostRefused(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	r := httptestRequest(http.MethodPost, "/services/web/servers/r1/drain", "")
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	r.AddCookie(&http.Cookie{Name: testCookie, Value: "alice"})
	w := serve(e, r)
	if w.Code != http.StatusForbidden {
		t.Fatalf("cross-site POST: %d", w.Code)
	}
	r = httptestRequest(http.MethodPost, "/services/web/servers/r1/drain", "")
	r.Header.Set("Origin", "https://evil.example")
	r.Host = "director:3636"
	r.AddCookie(&http.Cookie{Name: testCookie, Value: "alice"})
	if w := serve(e, r); w.Code != http.StatusForbidden {
		t.Fatalf("cross-origin POST: %d", w.Code)
	}
	st, _, _ := e.core.State(context.Background())
	if st.Services[0].Servers[0].EffectiveWeight() == 0 {
		t.Fatal("a cross-origin drain went through")
	}
}

func TestActionsOneManyAndAcross(t *testing.T) {
	e := newEnv(t)
	st := webState()
	one := 1
	st.Services = append(st.Services, ipvsmgr.Service{Name: "web-tls", Address: "198.18.0.100", Port: 443,
		Servers: []ipvsmgr.Server{{Name: "r1", Address: "198.18.0.11", Weight: &one}, {Address: "198.18.0.12"}}})
	e.seed(t, st)
	ctx := context.Background()
	weight := func(svc, rs int) int { // as the kernel gets it
		s, _, _ := e.core.State(ctx)
		return s.Services[svc].Servers[rs].KernelWeight()
	}
	r := e.post(t, "oscar", "/services/web/servers/r2/drain", url.Values{"back": {"/live?q=r2"}})
	if r.Code != http.StatusSeeOther || r.Header.Get("Location") != "/live?q=r2" || weight(0, 1) != 0 {
		t.Fatalf("drain: %d %s weight %d", r.Code, r.Header.Get("Location"), weight(0, 1))
	}
	// Enable gives back the configured weight (3), kept while drained.
	r = e.post(t, "oscar", "/services/web/servers/r2/enable", nil)
	if weight(0, 1) != 3 {
		t.Fatalf("enable after drain: weight %d, want 3 back", weight(0, 1))
	}
	// Several rows, one revision.
	before, _ := e.core.CurrentRevision(ctx)
	r = e.post(t, "oscar", "/actions", url.Values{"action": {"disable"}, "sel": {"web/r1", "web-tls/198.18.0.12"}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("bulk: %d %s", r.Code, excerpt(r.Body))
	}
	after, _ := e.core.CurrentRevision(ctx)
	s, _, _ := e.core.State(ctx)
	if after != before+1 || s.Services[0].Servers[0].IsEnabled() || s.Services[1].Servers[1].IsEnabled() || !s.Services[1].Servers[0].IsEnabled() {
		t.Fatalf("bulk disable: revisions %d->%d, state %+v", before, after, s.Services)
	}
	// One address across every service.
	r = e.post(t, "oscar", "/actions", url.Values{"action": {"drain"}, "address": {"198.18.0.11"}})
	if r.Code != http.StatusSeeOther || weight(0, 0) != 0 || weight(1, 0) != 0 || weight(0, 1) != 3 {
		t.Fatalf("drain across: %d weights %d %d %d", r.Code, weight(0, 0), weight(1, 0), weight(0, 1))
	}
	if r := e.get(t, "oscar", "/addresses/198.18.0.11"); !strings.Contains(r.Body, "Drain everywhere") || strings.Count(r.Body, "<tr class=") != 2 {
		t.Fatalf("address page: %s", excerpt(r.Body))
	}
	// The flash says what happened, on the next page.
	r = e.post(t, "oscar", "/services/web/servers/r2/drain", nil)
	var flash string
	for _, c := range r.Header.Values("Set-Cookie") {
		if strings.HasPrefix(c, flashCookie+"=") {
			flash = c
		}
	}
	if !strings.Contains(flash, "revision") {
		t.Fatalf("no flash: %q", flash)
	}
	req := httptestRequest(http.MethodGet, "/services/web/servers/r2", "")
	req.AddCookie(&http.Cookie{Name: testCookie, Value: "oscar"})
	req.AddCookie(&http.Cookie{Name: flashCookie, Value: strings.SplitN(strings.TrimPrefix(flash, flashCookie+"="), ";", 2)[0]})
	if w := serve(e, req); !strings.Contains(w.Body.String(), `class="banner flash ok"`) || !strings.Contains(w.Body.String(), "rs drain web r2") {
		t.Fatalf("flash not shown: %s", excerpt(w.Body.String()))
	}
}

func TestStaleFormRefusedWithTheOtherChange(t *testing.T) {
	e := newEnv(t)
	rev := e.seed(t, webState())
	// Someone else changes a weight after the form was drawn.
	w := 7
	if _, err := e.core.PatchServer(context.Background(), server.Actor{Name: "bob", Via: "cli"}, "web", "r1", server.ServerPatch{Weight: &w}, server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	r := e.post(t, "alice", "/services/web", svcForm("name", "web", "address", "198.18.0.100", "port", "80", "base", itoa64(rev)))
	if r.Code != http.StatusConflict || !strings.Contains(r.Body, "bob") || !strings.Contains(r.Body, "weight") {
		t.Fatalf("stale edit: %d %s", r.Code, excerpt(r.Body))
	}
}

// The settings form edits its own fields and keeps the rest of the
// settings: saving it on a director of a pair kept the pair (it dropped
// settings.redundancy, and VRRP with it).
func TestSettingsFormKeepsRedundancy(t *testing.T) {
	e := newEnv(t)
	st := webState()
	st.Settings.Redundancy = &ipvsmgr.Redundancy{VRID: 51, Interface: "eth0", UnicastPeers: []string{"198.18.0.1", "198.18.0.2"}}
	e.seed(t, st)
	form := func(timeout string, more ...string) url.Values {
		v := url.Values{"network": {"dr"}, "tcp_timeout": {timeout}, "tcpfin_timeout": {"0"}, "udp_timeout": {"0"}, "retire_timeout": {"0"}}
		for i := 0; i+1 < len(more); i += 2 {
			v.Set(more[i], more[i+1])
		}
		return v
	}
	check := func(what string, timeout int) {
		t.Helper()
		cur, _, _ := e.core.State(t.Context())
		if r := cur.Settings.Redundancy; r == nil || r.VRID != 51 || len(r.UnicastPeers) != 2 || cur.Settings.TCPTimeout != timeout {
			t.Fatalf("%s: settings %+v, redundancy %+v", what, cur.Settings, r)
		}
	}
	if r := e.post(t, "alice", "/settings", form("900")); r.Code != http.StatusSeeOther {
		t.Fatalf("save: %d %s", r.Code, excerpt(r.Body))
	}
	check("saved", 900)
	if r := e.post(t, "alice", "/settings", form("600", "stage", "1")); r.Code != http.StatusSeeOther {
		t.Fatalf("stage: %d %s", r.Code, excerpt(r.Body))
	}
	if r := e.post(t, "alice", "/draft/apply", nil); r.Code != http.StatusSeeOther {
		t.Fatalf("apply the draft: %d %s", r.Code, excerpt(r.Body))
	}
	check("staged, then applied", 600)
}
