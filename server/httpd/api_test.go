package httpd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
)

type call struct {
	method, path, body string
	role               auth.Role // the least role that may make it
}

// calls is every API route with a request that would succeed for its role.
var calls = []call{
	{"GET", "/api/v1/state", "", auth.Viewer},
	{"PUT", "/api/v1/state", webDoc, auth.Admin},
	{"GET", "/api/v1/diff", "", auth.Viewer},
	{"POST", "/api/v1/diff", webDoc, auth.Viewer},
	{"GET", "/api/v1/services", "", auth.Viewer},
	{"POST", "/api/v1/services", `{"name":"dns","protocol":"udp","address":"198.18.0.53","port":53,"servers":[]}`, auth.Admin},
	{"GET", "/api/v1/services/web", "", auth.Viewer},
	{"PATCH", "/api/v1/services/web", `{"scheduler":"rr"}`, auth.Admin},
	{"POST", "/api/v1/services/web/disable", "", auth.Admin},
	{"POST", "/api/v1/services/web/enable", "", auth.Admin},
	{"GET", "/api/v1/services/web/servers", "", auth.Viewer},
	{"POST", "/api/v1/services/web/servers", `{"name":"r3","address":"198.18.0.13"}`, auth.Admin},
	{"GET", "/api/v1/services/web/servers/r1", "", auth.Viewer},
	{"PATCH", "/api/v1/services/web/servers/r1", `{"weight":4}`, auth.Operator},
	{"PATCH", "/api/v1/services/web/servers/r1", `{"health":"down"}`, auth.Operator},
	{"PATCH", "/api/v1/services/web/servers/r1", `{"health":"auto"}`, auth.Operator},
	{"POST", "/api/v1/services/web/servers/r1/drain", "", auth.Operator},
	{"POST", "/api/v1/services/web/servers/r1/disable", "", auth.Operator},
	{"POST", "/api/v1/services/web/servers/r1/enable", "", auth.Operator},
	{"DELETE", "/api/v1/services/web/servers/r2", "", auth.Admin},
	{"DELETE", "/api/v1/services/dns", "", auth.Admin},
	{"GET", "/api/v1/status", "", auth.Viewer},
	{"GET", "/api/v1/health", "", auth.Viewer},
	{"GET", "/api/v1/health?service=web&server=r1", "", auth.Viewer},
	{"GET", "/api/v1/charts?service=web", "", auth.Viewer},
	{"GET", "/api/v1/charts?service=web&server=r1&range=day", "", auth.Viewer},
	{"POST", "/api/v1/loadtest/runs", `{"test":"t1","phase":"default","service":"web","tool":"wrk"}`, auth.Admin},
	{"POST", "/api/v1/loadtest/runs/1/end", `{"rps":850,"p99_ms":12.5,"entries":10,"buckets":4096}`, auth.Admin},
	{"GET", "/api/v1/loadtest/runs", "", auth.Viewer},
	{"GET", "/api/v1/history", "", auth.Viewer},
	{"GET", "/api/v1/history/1", "", auth.Viewer},
	{"POST", "/api/v1/rollback/1", "", auth.Admin},
	{"GET", "/api/v1/export?format=ipvsadm", "", auth.Viewer},
	{"POST", "/api/v1/import?format=ipvsadm", "-A -t 198.18.0.100:80 -s wlc\n-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1\n", auth.Admin},
	{"GET", "/api/v1/audit", "", auth.Admin},
	{"GET", "/api/v1/users", "", auth.Admin},
	{"POST", "/api/v1/users", `{"name":"dora","role":"viewer","password":"a long enough password"}`, auth.Admin},
	{"PATCH", "/api/v1/users/dora", `{"role":"operator"}`, auth.Admin},
	{"PUT", "/api/v1/users/dora/password", `{"password":"another long password"}`, auth.Admin},
	{"GET", "/api/v1/tokens", "", auth.Admin},
	{"POST", "/api/v1/tokens", `{"user":"dora","name":"t1","expires":"90d"}`, auth.Admin},
	{"POST", "/api/v1/tokens/t1/revoke", "", auth.Admin},
	{"DELETE", "/api/v1/users/dora", "", auth.Admin},
	{"POST", "/api/v1/draft/start", "", server.RoleFor("draft stage")},
	{"GET", "/metrics", "", auth.Viewer},
	{"GET", "/api/v1/openapi.json", "", auth.Viewer},
}

const webDoc = `{"services":[{"name":"web","address":"198.18.0.100","port":80,"interface":"eth0","scheduler":"wrr",
 "servers":[{"name":"r1","address":"198.18.0.11","weight":3},{"name":"r2","address":"198.18.0.12","weight":1}]}]}`

func do(t *testing.T, g *servertest.Rig, token, method, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func setUp(t *testing.T, g *servertest.Rig) {
	t.Helper()
	if resp, body := do(t, g, g.Tokens[auth.Admin], "PUT", "/api/v1/state", webDoc); resp.StatusCode != 200 {
		t.Fatalf("PUT /state: %s %s", resp.Status, body)
	}
}

// Every route refuses a request without credentials, then a role below its
// own, and serves its own role.
func TestEveryRouteChecksItsRole(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	roles := []auth.Role{auth.Viewer, auth.Operator, auth.Admin}
	for _, c := range calls {
		if resp, body := do(t, g, "", c.method, c.path, c.body); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
			t.Errorf("%s %s without credentials: %s %s", c.method, c.path, resp.Status, body)
		}
		if resp, _ := do(t, g, "ipvsctl_00000000_forged", c.method, c.path, c.body); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s with a forged token: %s", c.method, c.path, resp.Status)
		}
		for _, r := range roles {
			resp, body := do(t, g, g.Tokens[r], c.method, c.path, c.body)
			switch {
			case auth.Allows(r, c.role) && resp.StatusCode != 200:
				t.Errorf("%s %s as %s: %s %s", c.method, c.path, r, resp.Status, body)
			case !auth.Allows(r, c.role) && resp.StatusCode != http.StatusForbidden:
				t.Errorf("%s %s as %s: %s, want 403", c.method, c.path, r, resp.Status)
			}
		}
	}
	// An operator may change a weight, not a port.
	if resp, body := do(t, g, g.Tokens[auth.Operator], "PATCH", "/api/v1/services/web/servers/r1", `{"weight":2,"port":8080}`); resp.StatusCode != http.StatusForbidden {
		t.Errorf("operator PATCH of a port: %s %s", resp.Status, body)
	}
}

func TestErrorsNameTheFieldAndStatus(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	admin := g.Tokens[auth.Admin]
	var e httpd.ErrorBody
	check := func(name string, want int, resp *http.Response, body string) {
		t.Helper()
		if resp.StatusCode != want {
			t.Errorf("%s: %s, want %d: %s", name, resp.Status, want, body)
		}
		e = httpd.ErrorBody{}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
			t.Errorf("%s: body %q is not an error document", name, body)
		}
	}
	resp, body := do(t, g, admin, "PUT", "/api/v1/state", `{"services": [`)
	check("malformed document", 400, resp, body)
	resp, body = do(t, g, admin, "PUT", "/api/v1/state", `{"services":[{"name":"x","address":"198.18.0.300","port":0,"scheduler":"fastest","servers":[]}]}`)
	check("invalid document", 422, resp, body)
	paths := map[string]bool{}
	for _, f := range e.Fields {
		paths[f.Path] = true
	}
	for _, p := range []string{"services[0].address", "services[0].port", "services[0].scheduler"} {
		if !paths[p] {
			t.Errorf("invalid document: field %s not named in %+v", p, e.Fields)
		}
	}
	resp, body = do(t, g, admin, "PATCH", "/api/v1/services/web/servers/r1", `{"weight":70000}`)
	check("invalid weight", 422, resp, body)
	if len(e.Fields) != 1 || e.Fields[0].Path != "services[0].servers[0].weight" || !strings.Contains(e.Fields[0].Message, "70000") {
		t.Errorf("invalid weight: fields %+v", e.Fields)
	}
	resp, body = do(t, g, admin, "PATCH", "/api/v1/services/web", `{"sheduler":"rr"}`)
	check("unknown field", 400, resp, body)
	resp, body = do(t, g, admin, "GET", "/api/v1/services/nope", "")
	check("unknown service", 404, resp, body)
	resp, body = do(t, g, admin, "POST", "/api/v1/services", `{"name":"web","address":"198.18.0.1","port":1,"servers":[]}`)
	check("name taken", 409, resp, body)
	resp, body = do(t, g, admin, "PUT", "/api/v1/state", strings.Repeat(" ", httpd.MaxBody+1))
	check("oversized body", 413, resp, body)
	resp, body = do(t, g, admin, "GET", "/api/v1/export?format=nope", "")
	check("unknown format", 422, resp, body)

	// A write based on a revision that has moved: 409 with what changed since.
	resp, _ = do(t, g, admin, "GET", "/api/v1/state", "")
	etag := resp.Header.Get("ETag")
	if resp, body := do(t, g, admin, "POST", "/api/v1/services/web/servers/r2/drain", ""); resp.StatusCode != 200 {
		t.Fatalf("drain: %s %s", resp.Status, body)
	}
	resp, body = do(t, g, admin, "PATCH", "/api/v1/services/web", `{"scheduler":"rr"}`, "If-Match", etag)
	check("stale If-Match", 409, resp, body)
	if e.CurrentRevision == 0 || len(e.ChangesSince) == 0 || !strings.Contains(strings.Join(e.ChangesSince, "\n"), "drained") {
		t.Errorf("stale write: current revision %d, changes since %q", e.CurrentRevision, e.ChangesSince)
	}
	if resp, body := do(t, g, admin, "PATCH", "/api/v1/services/web", `{"scheduler":"rr"}`, "If-Match", fmt.Sprintf("%q", fmt.Sprint(e.CurrentRevision))); resp.StatusCode != 200 {
		t.Errorf("write at the current revision: %s %s", resp.Status, body)
	}
}

// A write answers with what the kernel was told; each write, refused or
// not, leaves an audit record naming who, how and the revision.
func TestWritesReachTheKernelAndTheAudit(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	if got := strings.Join(g.Host.Ops(), "\n"); got != "ip addr add 198.18.0.100 dev eth0" {
		t.Errorf("host changes: %q", got)
	}
	resp, body := do(t, g, g.Tokens[auth.Operator], "PATCH", "/api/v1/services/web/servers/r1", `{"weight":5}`)
	if resp.StatusCode != 200 || !strings.Contains(body, "ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 5") {
		t.Fatalf("PATCH weight: %s %s", resp.Status, body)
	}
	if ops := g.Kernel.Ops(); len(ops) == 0 || ops[len(ops)-1] != "ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 5" {
		t.Errorf("kernel ops: %q", ops)
	}
	do(t, g, g.Tokens[auth.Viewer], "POST", "/api/v1/services/web/servers/r1/drain", "")
	entries, err := g.Store.Audit(context.Background(), store.AuditFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range entries {
		rev := "-"
		if e.Revision != nil {
			rev = fmt.Sprint(*e.Revision)
		}
		lines = append(lines, fmt.Sprintf("%s %s %s %s %s %s", e.Actor, e.Via, e.Action, e.Target, rev, e.Outcome))
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{"operator api rs set web r1 2 success", "admin api apply PUT /api/v1/state 1 success"} {
		if !strings.Contains(got, want) {
			t.Errorf("audit lacks %q:\n%s", want, got)
		}
	}
	if entries[0].ClientAddr == "" {
		t.Errorf("audit record without the client address: %+v", entries[0])
	}
}

// A revoked token is refused from then on.
func TestRevokedTokenRefused(t *testing.T) {
	g := servertest.Start(t)
	tok := g.Tokens[auth.Viewer]
	if resp, _ := do(t, g, tok, "GET", "/api/v1/state", ""); resp.StatusCode != 200 {
		t.Fatalf("before revoking: %s", resp.Status)
	}
	if _, err := g.Auth.RevokeToken(context.Background(), &auth.Principal{User: "root", Role: auth.Admin, Via: "cli"}, tok[len("ipvsctl_"):len("ipvsctl_")+8]); err != nil {
		t.Fatal(err)
	}
	if resp, _ := do(t, g, tok, "GET", "/api/v1/state", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after revoking: %s", resp.Status)
	}
}

// A browser's cross-site POST is refused even with a valid session;
// a script with a token (no Origin) passes.
func TestCrossOriginWriteRefused(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	resp, body := do(t, g, g.Tokens[auth.Admin], "POST", "/api/v1/services/web/servers/r1/drain", "",
		"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %s %s", resp.Status, body)
	}
	if resp, body := do(t, g, g.Tokens[auth.Admin], "POST", "/api/v1/services/web/servers/r1/drain", ""); resp.StatusCode != 200 {
		t.Errorf("scripted POST: %s %s", resp.Status, body)
	}
}

// Concurrent writers through the API lose no update.
func TestConcurrentAPIWritersLoseNothing(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"name":"c%d","address":"198.18.1.%d"}`, i, i+1)
			if resp, b := do(t, g, g.Tokens[auth.Admin], "POST", "/api/v1/services/web/servers", body); resp.StatusCode != 200 {
				t.Errorf("add c%d: %s %s", i, resp.Status, b)
			}
		}()
	}
	wg.Wait()
	st, _, err := g.Core.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(st.Services[0].Servers); n != 14 {
		t.Fatalf("%d real servers stored, want 14", n)
	}
	tbl, _ := g.Kernel.Table(context.Background())
	if n := len(tbl.Services[0].Dests); n != 14 {
		t.Fatalf("%d real servers in the kernel, want 14", n)
	}
}

// The panel is behind the same login: a page without a session goes to the
// login page, a login with the password opens it, and a viewer's write is
// refused there as in the API.
func TestPanelBehindLogin(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	if resp, _ := panelDo(t, g, "GET", "/live", "", nil); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Fatalf("/live without a session: %s %s", resp.Status, resp.Header.Get("Location"))
	}
	if resp, _ := panelDo(t, g, "GET", "/login", "", nil); resp.StatusCode != 200 {
		t.Fatalf("/login: %s", resp.Status)
	}
	viewer := panelLogin(t, g, "viewer")
	for _, path := range []string{"/", "/live", "/services", "/history"} {
		if resp, _ := panelDo(t, g, "GET", path, "", viewer); resp.StatusCode != 200 {
			t.Errorf("%s as viewer: %s", path, resp.Status)
		}
	}
	if resp, _ := panelDo(t, g, "POST", "/services/web/servers/r1/drain", "", viewer); resp.StatusCode != http.StatusForbidden {
		t.Errorf("viewer's drain through the panel: %s", resp.Status)
	}
	st, _, _ := g.Core.State(context.Background())
	if w := st.Services[0].Servers[0].EffectiveWeight(); w != 3 {
		t.Errorf("the viewer's drain changed the weight to %d", w)
	}
}

// The users screen shows each user's last login and each token's name, and
// the audit screen's filter finds text in an entry's detail: through the
// daemon's own store, not the panel tests' fake.
func TestPanelUsersAndAudit(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	admin := panelLogin(t, g, "admin")
	if resp, body := panelDo(t, g, "POST", "/tokens", "user=viewer&name=deploy&days=0", admin); resp.StatusCode != 200 || !strings.Contains(body, "Copy this token now") {
		t.Fatalf("make a token: %s %s", resp.Status, body)
	}
	_, page := panelDo(t, g, "GET", "/users", "", admin)
	page = betweenTags.ReplaceAllString(page, "><") // the template's one element per line
	row := func(user string) string {
		i := strings.Index(page, "<tr><td>"+user+"</td>")
		if i < 0 {
			t.Fatalf("/users has no row for %s:\n%s", user, page)
		}
		j := strings.Index(page[i:], "</tr>")
		return page[i : i+j]
	}
	if r := row("admin"); strings.Contains(r, "never") {
		t.Errorf("admin logged in, and /users says: %s", r)
	}
	if r := row("operator"); !strings.Contains(r, "never") {
		t.Errorf("operator never logged in, and /users says: %s", r)
	}
	if !strings.Contains(page, "<td>deploy</td><td>viewer</td>") || !strings.Contains(page, "<td>admin-") {
		t.Errorf("/users lacks the tokens' names:\n%s", page)
	}
	if resp, _ := panelDo(t, g, "POST", "/services/web/servers/r1/drain", "", admin); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("drain r1: %s", resp.Status)
	}
	_, page = panelDo(t, g, "GET", "/audit?action=DRAIN", "", admin)
	if !strings.Contains(page, "rs drain web r1") || strings.Contains(page, "<td>login</td>") {
		t.Errorf("/audit?action=DRAIN: the drain missing, or other entries shown:\n%s", page)
	}
}

// betweenTags is the white space between two tags.
var betweenTags = regexp.MustCompile(`>\s+<`)

// panelDo sends a panel request (a form when form is not empty), with the
// session cookie if any, and does not follow a redirect.
func panelDo(t *testing.T, g *servertest.Rig, method, path, form string, cookie *http.Cookie) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, g.URL+path, strings.NewReader(form))
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// panelLogin logs user in through the panel's login form and returns its session cookie.
func panelLogin(t *testing.T, g *servertest.Rig, user string) *http.Cookie {
	t.Helper()
	resp, _ := panelDo(t, g, "POST", "/login", "user="+user+"&password="+strings.ReplaceAll(g.Password, " ", "+"), nil)
	for _, c := range resp.Cookies() {
		if c.Name == auth.CookieName && c.Value != "" {
			return c
		}
	}
	t.Fatalf("login as %s: %s, no session cookie", user, resp.Status)
	return nil
}

// ?draft=true on an edit route stages the edit in the caller's draft: the
// stored revision and the kernel stay, the answer names the draft. The
// role check is the one policy's (an operator may drain but not stage: a
// draft needs "draft stage"), a whole-document write is refused with
// ?draft, and a bad value names the parameter.
func TestDraftQueryStagesAnEdit(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	ctx := context.Background()
	_, base, _ := g.Core.State(ctx)
	g.Kernel.Ops() // forget the setup's
	resp, body := do(t, g, g.Tokens[auth.Admin], "POST", "/api/v1/services/web/servers/r1/drain?draft=true", "")
	var res server.WriteResult
	if err := json.Unmarshal([]byte(body), &res); resp.StatusCode != 200 || err != nil || res.Draft == nil ||
		res.Draft.Author != "admin" || res.Draft.Base != base || res.Changed || res.Applied {
		t.Fatalf("staged drain: %s %s", resp.Status, body)
	}
	if _, rev, _ := g.Core.State(ctx); rev != base {
		t.Fatalf("staged only, yet revision %d (was %d)", rev, base)
	}
	if ops := g.Kernel.Ops(); len(ops) != 0 {
		t.Fatalf("staged only, yet the kernel got %q", ops)
	}
	if resp, body := do(t, g, g.Tokens[auth.Admin], "GET", "/api/v1/draft/diff", ""); resp.StatusCode != 200 || !strings.Contains(body, "web/r1 drained") {
		t.Fatalf("draft diff: %s %s", resp.Status, body)
	}
	if resp, body := do(t, g, g.Tokens[auth.Operator], "POST", "/api/v1/services/web/servers/r1/drain?draft=true", ""); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(body, "draft stage needs the admin role") {
		t.Fatalf("operator staging: %s %s", resp.Status, body)
	}
	if resp, body := do(t, g, g.Tokens[auth.Admin], "PUT", "/api/v1/state?draft=true", webDoc); resp.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(body, "apply cannot be staged in a draft") {
		t.Fatalf("PUT /state?draft=true: %s %s", resp.Status, body)
	}
	if resp, body := do(t, g, g.Tokens[auth.Admin], "POST", "/api/v1/services/web/servers/r1/drain?draft=maybe", ""); resp.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(body, `draft: \"maybe\" is not true or false`) {
		t.Fatalf("?draft=maybe: %s %s", resp.Status, body)
	}
	if _, rev, _ := g.Core.State(ctx); rev != base {
		t.Fatalf("a refused request stored revision %d (was %d)", rev, base)
	}
}
