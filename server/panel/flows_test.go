package panel

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

func TestDraftStageDiffApplyAndStaleRefusal(t *testing.T) {
	e := newEnv(t)
	rev := e.seed(t, webState())
	ctx := context.Background()
	// Stage a weight edit: nothing is stored, the draft shows the kernel change.
	r := e.post(t, "alice", "/services/web/servers/r1", url.Values{"name": {"r1"}, "address": {"198.18.0.11"}, "weight": {"5"}, "enabled": {"1"}, "stage": {"1"}, "base": {itoa64(rev)}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("stage: %d %s", r.Code, excerpt(r.Body))
	}
	if cur, _ := e.core.CurrentRevision(ctx); cur != rev {
		t.Fatalf("staging stored a revision")
	}
	// Further edits go to the draft too (no stage flag needed), and pages show the draft.
	e.post(t, "alice", "/services", svcForm("name", "api"))
	r = e.get(t, "alice", "/draft")
	if !strings.Contains(r.Body, "ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 5") || !strings.Contains(r.Body, "ipvsadm -A -t 198.18.0.101:443") {
		t.Fatalf("draft diff: %s", excerpt(r.Body))
	}
	if !strings.Contains(e.get(t, "alice", "/services").Body, "api") || strings.Contains(e.get(t, "oscar", "/services").Body, ">api<") {
		t.Fatal("the draft is shown to its author only")
	}
	if !strings.Contains(e.get(t, "alice", "/").Body, "staged change") {
		t.Fatal("no draft banner")
	}
	// Apply: one revision.
	r = e.post(t, "alice", "/draft/apply", nil)
	if r.Code != http.StatusSeeOther {
		t.Fatalf("apply: %d %s", r.Code, excerpt(r.Body))
	}
	st, cur, _ := e.core.State(ctx)
	if cur != rev+1 || len(st.Services) != 2 || *st.Services[0].Servers[0].Weight != 5 {
		t.Fatalf("after apply: revision %d, %+v", cur, st.Services)
	}
	waitFor(t, "the kernel has the draft", func() bool {
		tb, _ := e.kernel.Kernel.Table(ctx)
		return len(tb.Services) == 2
	})
	// A draft whose base moved is refused, with the other change shown.
	e.post(t, "alice", "/services/api/disable", url.Values{"stage": {"1"}})
	w := 2
	if _, err := e.core.PatchServer(ctx, server.Actor{Name: "bob", Via: "api"}, "web", "r2", server.ServerPatch{Weight: &w}, server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.get(t, "alice", "/draft").Body, "moved") {
		t.Fatal("the draft page does not say the state moved")
	}
	r = e.post(t, "alice", "/draft/apply", nil)
	if r.Code != http.StatusConflict || !strings.Contains(r.Body, "bob") || !strings.Contains(r.Body, "r2 weight") {
		t.Fatalf("stale draft: %d %s", r.Code, excerpt(r.Body))
	}
	st, _, _ = e.core.State(ctx)
	if !st.Services[1].IsEnabled() {
		t.Fatal("a stale draft was applied")
	}
	// Discard.
	e.post(t, "alice", "/draft/discard", nil)
	if r := e.get(t, "alice", "/draft"); !strings.Contains(r.Body, "You have no draft") {
		t.Fatal("discard kept the draft")
	}
}

func TestHistoryAndRollback(t *testing.T) {
	e := newEnv(t)
	rev := e.seed(t, webState())
	e.post(t, "oscar", "/services/web/servers/r1/drain", nil)
	r := e.get(t, "vic", "/history")
	if !strings.Contains(r.Body, "oscar") || !strings.Contains(r.Body, "rs drain web r1") || !strings.Contains(r.Body, "panel") {
		t.Fatalf("history: %s", excerpt(r.Body))
	}
	r = e.get(t, "vic", "/history/2")
	if !strings.Contains(r.Body, "server web/r1 drained: (unset) -&gt; true") || strings.Contains(r.Body, "weight") {
		t.Fatalf("revision page: %s", excerpt(r.Body))
	}
	r = e.post(t, "alice", "/history/1/rollback", url.Values{"base": {"2"}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("rollback: %d %s", r.Code, excerpt(r.Body))
	}
	st, cur, _ := e.core.State(context.Background())
	if cur != rev+2 || st.Services[0].Servers[0].EffectiveWeight() != 1 {
		t.Fatalf("rollback: revision %d weight %d", cur, st.Services[0].Servers[0].EffectiveWeight())
	}
	// A rollback from a stale page is refused.
	if r := e.post(t, "alice", "/history/2/rollback", url.Values{"base": {"2"}}); r.Code != http.StatusConflict {
		t.Fatalf("stale rollback: %d", r.Code)
	}
}

func TestWhyNamesEveryReason(t *testing.T) {
	e := newEnv(t)
	st := webState()
	off, zero := false, 0
	st.Services[0].Interface = "eth0"
	st.Services[0].Servers[0].Enabled = &off
	st.Services[0].Servers[1].Weight = &zero
	one := 1
	st.Services[0].Servers = append(st.Services[0].Servers, ipvsmgr.Server{Name: "r3", Address: "198.18.0.13", Weight: &one, UpperThreshold: 10})
	e.seed(t, st)
	waitFor(t, "kernel", func() bool { m, _ := e.panel.model(t.Context()); return m != nil && m.Rows[0].InKernel })
	r := e.get(t, "vic", "/services/web/servers/r1/why")
	if !strings.Contains(r.Body, `data-reason="server_disabled"`) || !strings.Contains(r.Body, "Real server admin state</strong>: maint") ||
		!strings.Contains(r.Body, "Health</strong>: unchecked") {
		t.Fatalf("why r1: %s", excerpt(r.Body))
	}
	r = e.get(t, "vic", "/services/web/servers/r2/why")
	if !strings.Contains(r.Body, `data-reason="weight_zero"`) || !strings.Contains(r.Body, "Weight</strong>: 0 configured") {
		t.Fatalf("why r2: %s", excerpt(r.Body))
	}
	waitFor(t, "r3 at its limit", func() bool {
		return strings.Contains(e.get(t, "vic", "/services/web/servers/r3/why").Body, "Connection limit</strong>: reached")
	})
	// A disabled service comes first.
	e.post(t, "alice", "/services/web/disable", nil)
	r = e.get(t, "vic", "/services/web/servers/r3/why")
	i, j := strings.Index(r.Body, "Virtual service enabled</strong>: no"), strings.Index(r.Body, "Real server admin state")
	if i < 0 || j < i {
		t.Fatalf("why with the service disabled: %s", excerpt(r.Body))
	}
	// A real server the kernel refuses: named with the kernel's error.
	e.post(t, "alice", "/services/web/enable", nil)
	e.kernel.setFailOn(func(op ipvsmgr.Op) error {
		if op.Dest != nil && op.Dest.Key.Addr.String() == "198.18.0.14" {
			return errString("address not unicast")
		}
		return nil
	})
	e.post(t, "alice", "/services/web/servers", url.Values{"name": {"r4"}, "address": {"198.18.0.14"}, "enabled": {"1"}})
	waitFor(t, "r4's reason", func() bool {
		b := e.get(t, "vic", "/services/web/servers/r4/why").Body
		return strings.Contains(b, "the kernel has no real server 198.18.0.14:80") && strings.Contains(b, "address not unicast")
	})
}

type errString string

func (e errString) Error() string { return string(e) }

// Every displayed free-text field comes back escaped.
func TestXSSPayloadsEscaped(t *testing.T) {
	e := newEnv(t)
	payloads := []string{`"><img src=x onerror=alert(1)>`, `<script>alert(1)</script>`, `javascript:alert(1)`, `' onmouseover='alert(1)`}
	// Names have no spaces (the model refuses them): the same attacks without.
	names := []string{`"><img/src=x/onerror=alert(1)>`, `<script>alert(1)</script>`, `javascript:alert(1)`, `'onmouseover='alert(1)`}
	one := 1
	st := &ipvsmgr.State{Imported: []ipvsmgr.ImportedKey{{Source: "lvs.cf", Line: 3, Scope: payloads[1], Key: payloads[0], Value: payloads[2]}}}
	for i, p := range names {
		st.Services = append(st.Services, ipvsmgr.Service{Name: p, Address: "198.18.0.100", Port: 80 + i,
			Servers: []ipvsmgr.Server{{Name: p + "rs", Address: "198.18.0." + itoa(11+i), Weight: &one}}})
	}
	e.seed(t, st)
	// A user, a token and audit entries with the payloads, in the store.
	root := server.Actor{Name: "root", Via: "test"}
	if err := e.core.AddUser(t.Context(), root, server.NewUser{Name: names[0], Role: "viewer", Password: testPassword}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.core.CreateToken(t.Context(), root, server.TokenRequest{User: names[0], Name: names[1]}); err != nil {
		t.Fatal(err)
	}
	by := &auth.Principal{User: names[2], Role: auth.Viewer, Via: "panel", ClientAddr: payloads[1]}
	if err := auth.New(e.st, auth.Config{}).Audit(t.Context(), by, payloads[3], payloads[0], nil, errString(payloads[1]), payloads[2]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "kernel", func() bool { m, _ := e.panel.model(t.Context()); return m != nil && m.Rows[0].InKernel })
	e.post(t, "oscar", "/services/"+url.PathEscape(names[0])+"/servers/"+url.PathEscape(names[0]+"rs")+"/drain", nil)
	pages := []string{"/", "/live", "/live/rows", "/live?q=" + url.QueryEscape(payloads[0]), "/services", "/history", "/history/1", "/history/2",
		"/realservers", "/users", "/audit", "/addresses/198.18.0.11"}
	for i, p := range names {
		svc := "/services/" + url.PathEscape(p)
		rs := svc + "/servers/" + url.PathEscape(p+"rs")
		pages = append(pages, svc, svc+"/edit", rs, rs+"/edit", rs+"/why")
		_ = i
	}
	for _, pg := range pages {
		r := e.get(t, "alice", pg)
		if r.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", pg, r.Code, excerpt(r.Body))
			continue
		}
		for _, bad := range []string{"<img src=x", "<img/src=x", "<script>alert", `href="javascript:`, `' onmouseover='`, `'onmouseover='`} {
			if strings.Contains(r.Body, bad) {
				t.Errorf("GET %s: unescaped %q", pg, bad)
			}
		}
	}
	// The import preview shows an uploaded file's keys escaped too.
	body := "serial_no = 1\nprimary = 198.18.0.1\nservice = lvs\nnetwork = direct\nvirtual web {\n address = 198.18.0.100 eth0:1\n active = 1\n port = 80\n send = \"<script>alert(1)</script>\"\n expect = \"\\\"><img src=x>\"\n server r1 {\n  address = 198.18.0.11\n  active = 1\n  weight = 1\n }\n}\n"
	r := e.upload(t, "alice", "lvs.cf", "lvs.cf", body)
	if r.Code != http.StatusOK || !strings.Contains(r.Body, "Kept but not used") {
		t.Fatalf("import preview: %d %s", r.Code, excerpt(r.Body))
	}
	if strings.Contains(r.Body, "<script>alert") || strings.Contains(r.Body, "<img src=x") {
		t.Fatal("import preview: unescaped")
	}
}

func (e *env) upload(t *testing.T, user, format, name, content string) resp {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.WriteField("format", format)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write([]byte(content))
	mw.Close()
	r := httptestRequest(http.MethodPost, "/import", "")
	r.Body = readCloser{bytes.NewReader(b.Bytes())}
	r.ContentLength = int64(b.Len())
	r.Header.Set("Content-Type", mw.FormDataContentType())
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	r.AddCookie(&http.Cookie{Name: testCookie, Value: user})
	w := serve(e, r)
	return resp{Code: w.Code, Body: w.Body.String(), Header: w.Header()}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

func TestImportPreviewApplyAndExport(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	save := "-A -t 198.18.0.200:80 -s rr\n-a -t 198.18.0.200:80 -r 198.18.0.31:80 -g -w 1\n"
	r := e.upload(t, "alice", "ipvsadm", "saved", save)
	if r.Code != http.StatusOK || !strings.Contains(r.Body, "ipvsadm -A -t 198.18.0.200:80 -s rr") || !strings.Contains(r.Body, "ipvsadm -D -t 198.18.0.100:80") {
		t.Fatalf("preview: %d %s", r.Code, excerpt(r.Body))
	}
	if cur, _ := e.core.CurrentRevision(context.Background()); cur != 1 {
		t.Fatal("preview stored a revision")
	}
	r = e.post(t, "alice", "/import/apply", url.Values{"format": {"ipvsadm"}, "name": {"saved"}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("apply: %d %s", r.Code, excerpt(r.Body))
	}
	st, _, _ := e.core.State(context.Background())
	if len(st.Services) != 1 || st.Services[0].Address != "198.18.0.200" {
		t.Fatalf("imported %+v", st.Services)
	}
	if r := e.get(t, "vic", "/history"); !strings.Contains(r.Body, "import --format ipvsadm saved") {
		t.Fatalf("history: %s", excerpt(r.Body))
	}
	// Malformed input: the error names the line, nothing stored.
	r = e.upload(t, "alice", "ipvsadm", "bad", "-A -t nonsense\n")
	if r.Code != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "line 1") {
		t.Fatalf("bad import: %d %s", r.Code, excerpt(r.Body))
	}
	r = e.get(t, "vic", "/export?format=ipvsadm")
	if r.Code != http.StatusOK || r.Body != save || !strings.Contains(r.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("export: %d %q %v", r.Code, r.Body, r.Header)
	}
}

// The panel's import form takes ldirectord.cf: a preview, then apply, and
// an export with its file name.
func TestImportLdirectordInThePanel(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	cf := "virtual=198.18.0.210:80\n\treal=198.18.0.41:80 gate 3\n\tscheduler=rr\n\tfallbackcommand=\"/usr/local/bin/sorry\"\n"
	if r := e.get(t, "alice", "/import"); !strings.Contains(r.Body, "<option >ldirectord</option>") && !strings.Contains(r.Body, ">ldirectord</option>") {
		t.Fatalf("the import form offers no ldirectord: %s", excerpt(r.Body))
	}
	r := e.upload(t, "alice", "ldirectord", "ldirectord.cf", cf)
	if r.Code != http.StatusOK || !strings.Contains(r.Body, "ipvsadm -A -t 198.18.0.210:80 -s rr") || !strings.Contains(r.Body, "1 real servers, 0 kept") {
		t.Fatalf("preview: %d %s", r.Code, excerpt(r.Body))
	}
	r = e.post(t, "alice", "/import/apply", url.Values{"format": {"ldirectord"}, "name": {"ldirectord.cf"}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("apply: %d %s", r.Code, excerpt(r.Body))
	}
	r = e.get(t, "vic", "/export?format=ldirectord")
	if r.Code != http.StatusOK || !strings.Contains(r.Body, "virtual=198.18.0.210:80\n    real=198.18.0.41:80 gate 3\n") || !strings.Contains(r.Body, "fallbackcommand") ||
		!strings.Contains(r.Header.Get("Content-Disposition"), "ldirectord.cf") {
		t.Fatalf("export: %d %q %v", r.Code, r.Body, r.Header)
	}
	r = e.upload(t, "alice", "ldirectord", "bad.cf", "virtual=198.18.0.210:80\n\treal=198.18.0.41:80 gate\n\tcolour=blue\n")
	if r.Code != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "line 3") {
		t.Fatalf("bad import: %d %s", r.Code, excerpt(r.Body))
	}
}

func TestLiveTableFilterSortPageAndStale(t *testing.T) {
	e := newEnv(t)
	st := &ipvsmgr.State{}
	one, zero := 1, 0
	for i := 0; i < 60; i++ {
		s := ipvsmgr.Service{Name: "svc" + itoa(i), Address: "198.18.1." + itoa(i+1), Port: 80,
			Servers: []ipvsmgr.Server{{Name: "a", Address: "198.18.2." + itoa(i+1), Weight: &one}}}
		if i == 42 {
			s.Servers[0].Weight = &zero // all down
		}
		st.Services = append(st.Services, s)
	}
	e.seed(t, st)
	waitFor(t, "kernel", func() bool {
		m, _ := e.panel.model(t.Context())
		return m != nil && m.Rows[59].InKernel && !m.Rows[59].Known == false
	})
	r := e.get(t, "vic", "/live")
	if strings.Count(r.Body, `class="svc`) != 25 || !strings.Contains(r.Body, "page 1 of 3") {
		t.Fatalf("page 1: %d services", strings.Count(r.Body, `class="svc`))
	}
	r = e.get(t, "vic", "/live?problems=1")
	if strings.Count(r.Body, `class="svc`) != 1 || !strings.Contains(r.Body, "svc42") || !strings.Contains(r.Body, "all down") {
		t.Fatalf("problems only: %s", excerpt(r.Body))
	}
	r = e.get(t, "vic", "/live?q=198.18.2.7&sort=active")
	if !strings.Contains(r.Body, "svc6<") || strings.Contains(r.Body, "svc5<") {
		t.Fatalf("search: %s", excerpt(r.Body))
	}
	// The fragment keeps the query in its links and has no layout.
	r = e.get(t, "vic", "/live/rows?sort=state&page=2")
	if strings.Contains(r.Body, "<html") || !strings.Contains(r.Body, "sort=state") {
		t.Fatalf("fragment: %s", excerpt(r.Body))
	}
	if !strings.Contains(e.get(t, "vic", "/live?sort=state").Body, `data-poll="/live/rows?sort=state"`) {
		t.Fatal("the poll URL does not keep the query")
	}
	// A stale snapshot is flagged and never green.
	e.kernel.setReadErr(errString("netlink: timeout"))
	waitFor(t, "stale", func() bool { return strings.Contains(e.get(t, "vic", "/live/rows").Body, "STALE") })
	r = e.get(t, "vic", "/")
	if !strings.Contains(r.Body, "STALE") || strings.Contains(r.Body, "kernel OK") || !strings.Contains(r.Body, "netlink: timeout") {
		t.Fatalf("overview when stale: %s", excerpt(r.Body))
	}
	if !strings.Contains(e.get(t, "vic", "/live/rows").Body, `class="live stale"`) {
		t.Fatal("stale table not marked")
	}
}

func TestOverviewTiles(t *testing.T) {
	e := newEnv(t)
	st := webState()
	off, zero := false, 0
	st.Services[0].Servers[0].Enabled = &off
	st.Services = append(st.Services, ipvsmgr.Service{Name: "dark", Address: "198.18.0.102", Port: 80, Enabled: &off},
		ipvsmgr.Service{Name: "drained", Address: "198.18.0.103", Port: 80, Servers: []ipvsmgr.Server{{Address: "198.18.0.40", Weight: &zero}}})
	e.seed(t, st)
	waitFor(t, "reconcile", func() bool { _, ok := e.core.LastReconcile(); return ok })
	waitFor(t, "tiles", func() bool {
		m, _ := e.panel.model(t.Context())
		return m != nil && m.Totals.Up == 1 && m.Totals.Disabled == 1
	})
	m, _ := e.panel.model(t.Context())
	if tt := m.Totals; tt.Services != 3 || tt.ServicesProblem != 1 || tt.ServicesDisabled != 1 || tt.Servers != 3 || tt.Up != 1 || tt.Drained+tt.Draining != 1 {
		t.Fatalf("totals %+v", tt)
	}
	r := e.get(t, "vic", "/")
	for _, want := range []string{"kernel OK", "desired revision", "last reconcile", "daemon up since", "drained"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
}

func TestChartsSampledAndStored(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	waitFor(t, "samples", func() bool {
		rows, _, err := e.st.ChartSize(context.Background())
		return err == nil && rows >= 2
	})
	waitFor(t, "a sparkline", func() bool { return strings.Contains(e.get(t, "vic", "/live").Body, `<polyline points="`) })
	r := e.get(t, "vic", "/services/web/servers/r2")
	if !strings.Contains(r.Body, "Active connections") || !strings.Contains(r.Body, `<polyline points="`) {
		t.Fatalf("chart: %s", excerpt(r.Body))
	}
	if r := e.get(t, "vic", "/services/web?range=day"); !strings.Contains(r.Body, "last day (1 min points)") {
		t.Fatal("day range")
	}
}

func TestAccountsScreens(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	role := func(name string) string {
		us, err := e.core.Users(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			if u.Name == name {
				return u.Role
			}
		}
		return ""
	}
	activeTokens := func() (out []server.Token) {
		ts, err := e.core.Tokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range ts {
			if tk.RevokedAt == nil {
				out = append(out, tk)
			}
		}
		return out
	}
	r := e.post(t, "alice", "/users", url.Values{"name": {"carol"}, "role": {"operator"}, "password": {"a long s3cret pass"}})
	if r.Code != http.StatusSeeOther || role("carol") != "operator" {
		t.Fatalf("add user: %d %s", r.Code, excerpt(r.Body))
	}
	r = e.post(t, "alice", "/users", url.Values{"name": {""}, "role": {"god"}})
	if errBeside(r.Body, "name") == "" || errBeside(r.Body, "role") == "" || errBeside(r.Body, "password") == "" {
		t.Fatalf("user form errors: %s", excerpt(r.Body))
	}
	// The core's refusal (its password rule) is shown, and nothing made.
	r = e.post(t, "alice", "/users", url.Values{"name": {"dave"}, "role": {"viewer"}, "password": {"short"}})
	if r.Code != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "at least 12 characters") || role("dave") != "" {
		t.Fatalf("short password: %d %s", r.Code, excerpt(r.Body))
	}
	e.post(t, "alice", "/users/carol/role", url.Values{"role": {"admin"}})
	if role("carol") != "admin" {
		t.Fatal("set role")
	}
	e.post(t, "alice", "/users/carol/password", url.Values{"password": {"another long password"}})
	if _, err := auth.New(e.st, auth.Config{}).Login(ctx, "carol", "another long password", "127.0.0.1"); err != nil {
		t.Fatalf("reset password: the new one does not log in: %v", err)
	}
	e.post(t, "alice", "/users/carol/delete", nil)
	if role("carol") != "" {
		t.Fatal("remove user")
	}
	// A lifetime that is not a whole number of days is refused by name and
	// value, never taken as "until revoked".
	for _, bad := range []string{"thirty", "-1", "1.5", "100000"} {
		r = e.post(t, "alice", "/tokens", url.Values{"user": {"alice"}, "name": {"deploy"}, "days": {bad}})
		if r.Code != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "Expires after (days): &#34;"+bad+"&#34; is not a whole number") || len(activeTokens()) != 0 {
			t.Fatalf("days %q: %d, %d tokens, %s", bad, r.Code, len(activeTokens()), excerpt(r.Body))
		}
	}
	r = e.post(t, "alice", "/tokens", url.Values{"user": {"alice"}, "name": {"deploy"}, "days": {"30"}})
	tokens := activeTokens()
	if len(tokens) != 1 || tokens[0].ExpiresAt == nil || tokens[0].ExpiresAt.Sub(tokens[0].CreatedAt) != 30*24*time.Hour {
		t.Fatalf("token made: %+v, want one expiring after 30 days", tokens)
	}
	prefix := tokens[0].Prefix
	secret := regexp.MustCompile(`Token ` + regexp.QuoteMeta(prefix) + ` for alice: (\S+)</pre>`).FindStringSubmatch(r.Body)
	if secret == nil {
		t.Fatalf("token secret not shown once: %s", excerpt(r.Body))
	}
	row := regexp.MustCompile(`<td>` + regexp.QuoteMeta(prefix) + `</td>\s*<td>deploy</td>\s*<td>alice</td>`)
	if page := e.get(t, "alice", "/users").Body; strings.Contains(page, secret[1]) || !row.MatchString(page) {
		t.Fatalf("token secret shown again, or the token not listed with its name: %s", excerpt(page))
	}
	e.post(t, "alice", "/tokens/"+prefix+"/revoke", nil)
	if len(activeTokens()) != 0 {
		t.Fatal("revoke")
	}
	// The audit is the core's: the panel's own edits above are in it, as alice's.
	r = e.get(t, "alice", "/audit?action=carol")
	if !strings.Contains(r.Body, "user add") || !strings.Contains(r.Body, "<td>alice</td>") || !strings.Contains(r.Body, "user rm") {
		t.Fatalf("the panel's user edits not audited as alice: %s", excerpt(r.Body))
	}
	a := auth.New(e.st, auth.Config{})
	a.Audit(ctx, &auth.Principal{User: "mallory", Via: "panel"}, "login", "", nil, auth.ErrBadCredentials, "")
	r = e.get(t, "alice", "/audit?user=mallory")
	if !strings.Contains(r.Body, "mallory") || strings.Contains(r.Body, "<td>alice</td>") || !strings.Contains(r.Body, "refused") {
		t.Fatalf("audit filter: %s", excerpt(r.Body))
	}
	a.Audit(ctx, &auth.Principal{User: "alice", Via: "cli"}, "apply", "", nil, nil, "rs drain web r1")
	r = e.get(t, "alice", "/audit?action=Drain")
	if !strings.Contains(r.Body, "rs drain web r1") || strings.Contains(r.Body, "mallory") {
		t.Fatalf("audit filter on the detail: %s", excerpt(r.Body))
	}
	// Own password.
	r = e.post(t, "alice", "/account/password", url.Values{"old": {"pw-alice"}, "new": {"x1"}, "again": {"x2"}})
	if errBeside(r.Body, "again") == "" {
		t.Fatalf("mismatch not shown: %s", excerpt(r.Body))
	}
	r = e.post(t, "alice", "/account/password", url.Values{"old": {"wrong"}, "new": {"x1"}, "again": {"x1"}})
	if !strings.Contains(r.Body, "current password is wrong") {
		t.Fatalf("wrong old: %s", excerpt(r.Body))
	}
	if r = e.post(t, "alice", "/account/password", url.Values{"old": {"pw-alice"}, "new": {"x1"}, "again": {"x1"}}); r.Code != http.StatusSeeOther || e.auth.pw["alice"] != "x1" {
		t.Fatalf("change: %d", r.Code)
	}
}

func TestLoginPage(t *testing.T) {
	e := newEnv(t)
	r := e.post(t, "", "/login", url.Values{"user": {"alice"}, "password": {"nope"}, "next": {"/live"}})
	if r.Code != http.StatusUnauthorized || !strings.Contains(r.Body, "wrong user name or password") {
		t.Fatalf("bad login: %d %s", r.Code, excerpt(r.Body))
	}
	r = e.post(t, "", "/login", url.Values{"user": {"alice"}, "password": {"pw-alice"}, "next": {"//evil.example/"}})
	if r.Code != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Fatalf("login: %d %q", r.Code, r.Header.Get("Location"))
	}
	e.panel.d.NoUsers = func(context.Context) bool { return true }
	if r := e.get(t, "", "/login"); !strings.Contains(r.Body, "ipvsctl user add NAME --role admin") {
		t.Fatal("no first-admin hint")
	}
	// Security headers on every answer.
	r = e.get(t, "", "/login")
	csp := r.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") || r.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("headers: %v", r.Header)
	}
	// No inline script or event handler in any page.
	for _, body := range []string{r.Body, e.get(t, "alice", "/live").Body, e.get(t, "alice", "/").Body} {
		if strings.Contains(body, "<script>") || strings.Contains(body, " onclick=") || strings.Contains(body, " onload=") {
			t.Fatal("inline script")
		}
	}
	// Assets: hashed URL, long cache.
	a, _ := e.panel.assets.url("panel.css")
	r = e.get(t, "", a)
	if r.Code != http.StatusOK || !strings.Contains(r.Header.Get("Cache-Control"), "immutable") || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/css") {
		t.Fatalf("asset: %d %v", r.Code, r.Header)
	}
	if r := e.get(t, "", "/static/0000/panel.css"); strings.Contains(r.Header.Get("Cache-Control"), "immutable") {
		t.Fatal("an old hash is cached for a year")
	}
}

// A server's health shows in the live table and in the why view, which names
// it as the reason when it is down.
func TestHealthInLiveTableAndWhy(t *testing.T) {
	e := newEnv(t)
	st := webState()
	st.Services[0].Servers[1].Health = "down"
	e.seed(t, st)
	waitFor(t, "kernel", func() bool { m, _ := e.panel.model(t.Context()); return m != nil && m.Rows[0].InKernel })
	waitFor(t, "the forced health in the model", func() bool {
		m, _ := e.panel.model(t.Context())
		return m != nil && len(m.Rows[0].Servers) > 1 && m.Rows[0].Servers[1].Health == "forced down"
	})
	if r := e.get(t, "vic", "/live"); !strings.Contains(r.Body, "forced down") {
		t.Errorf("live table without the forced health: %s", excerpt(r.Body))
	}
	r := e.get(t, "vic", "/services/web/servers/r2/why")
	if !strings.Contains(r.Body, `<span class="state st-down">blocks</span>`+"\n         <strong>Health</strong>: forced down") &&
		!regexp.MustCompile(`blocks</span>\s*<strong>Health</strong>: forced down`).MatchString(r.Body) {
		t.Errorf("why r2 does not name its health: %s", excerpt(r.Body))
	}
}
