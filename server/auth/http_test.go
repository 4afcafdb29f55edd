package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// testRoutes is a route table as the lead's router declares it: one route
// per role, plus login and logout.
func (f *fixture) handler(t *testing.T) http.Handler {
	ok := func(w http.ResponseWriter, r *http.Request) {
		p, _ := FromContext(r.Context())
		who := "nobody"
		if p != nil {
			who = p.User + " " + p.Role.String() + " " + p.Via + " " + p.ClientAddr
		}
		io.WriteString(w, who)
	}
	login := func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Name, Password string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			if WriteBodyTooLarge(w, err) {
				return
			}
			WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		if _, err := f.a.LoginHTTP(w, r, body.Name, body.Password); err != nil {
			WriteLoginError(w, err)
			return
		}
		io.WriteString(w, "welcome")
	}
	logout := func(w http.ResponseWriter, r *http.Request) {
		if err := f.a.Logout(w, r); err != nil {
			WriteError(w, 500, err.Error())
		}
	}
	write := func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			if WriteBodyTooLarge(w, err) {
				return
			}
		}
		ok(w, r)
	}
	r := chi.NewRouter()
	csrf, err := f.a.CrossOrigin()
	if err != nil {
		t.Fatal(err)
	}
	r.Use(csrf, MaxBody(1024))
	f.a.Register(r.Method, []Route{
		{"GET", "/healthz", Public, http.HandlerFunc(ok)},
		{"POST", "/api/v1/login", Public, http.HandlerFunc(login)},
		{"POST", "/api/v1/logout", Viewer, http.HandlerFunc(logout)},
		{"GET", "/api/v1/state", Viewer, http.HandlerFunc(ok)},
		{"GET", "/", Viewer, http.HandlerFunc(ok)},
		{"POST", "/api/v1/services/{id}/servers/{sid}/drain", Operator, http.HandlerFunc(write)},
		{"PUT", "/api/v1/state", Admin, http.HandlerFunc(write)},
		{"POST", "/services", Admin, http.HandlerFunc(write)},
	})
	return r
}

type req struct {
	method, path, body string
	header             map[string]string
	cookie             string
	remote             string
}

func do(h http.Handler, q req) *httptest.ResponseRecorder {
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	r := httptest.NewRequest(q.method, "http://director.test"+q.path, body)
	if q.remote != "" {
		r.RemoteAddr = q.remote
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	if q.cookie != "" {
		r.AddCookie(&http.Cookie{Name: CookieName, Value: q.cookie})
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func loginBody(name, password string) string {
	b, _ := json.Marshal(map[string]string{"name": name, "password": password})
	return string(b)
}

// login logs name in and returns the session cookie.
func (f *fixture) login(t *testing.T, h http.Handler, name string, old string) string {
	t.Helper()
	w := do(h, req{method: "POST", path: "/api/v1/login", body: loginBody(name, pw+" "+name), cookie: old})
	if w.Code != 200 {
		t.Fatalf("login %s: %d %s", name, w.Code, w.Body)
	}
	for _, c := range w.Result().Cookies() {
		if c.Name == CookieName {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
				t.Fatalf("cookie attributes: %+v", c)
			}
			return c.Value
		}
	}
	t.Fatalf("login %s: no cookie", name)
	return ""
}

func errorBody(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct {
		Error  string
		Fields []any
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Fields == nil || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("not a JSON error body (%v): %s", err, w.Body)
	}
	return e.Error
}

func TestSessionLifecycle(t *testing.T) {
	f := newFixture(t, Config{IdleTimeout: 30 * time.Minute, AbsoluteTimeout: 2 * time.Hour})
	f.addUser(t, "alice", Admin)
	h := f.handler(t)
	get := func(cookie string) *httptest.ResponseRecorder {
		return do(h, req{method: "GET", path: "/api/v1/state", cookie: cookie})
	}
	c1 := f.login(t, h, "alice", "")
	if w := get(c1); w.Code != 200 || w.Body.String() != "alice admin panel 192.0.2.1" {
		t.Fatalf("with the session: %d %s", w.Code, w.Body)
	}
	// The cookie is never stored: only its hash.
	for _, row := range rawRows(t, f.path, "sessions") {
		if strings.Contains(row, c1) || !strings.Contains(row, hashSecret(c1)) {
			t.Fatalf("sessions row: %s", row)
		}
	}
	// A login with a session already gets a new id; the old one ends.
	c2 := f.login(t, h, "alice", c1)
	if c2 == c1 || len(c2) != 43 {
		t.Fatalf("second login: %q after %q", c2, c1)
	}
	if w := get(c1); w.Code != 401 {
		t.Fatalf("the session before login still valid: %d", w.Code)
	}
	// Idle expiry: use within 30 minutes keeps the session, 30 idle minutes end it.
	for range 4 {
		f.clock.Add(25 * time.Minute)
		if w := get(c2); w.Code != 200 {
			t.Fatalf("session used every 25 min ended at %s: %d", f.clock.Now(), w.Code)
		}
	}
	// Absolute expiry: 2 hours after login, however busy.
	f.clock.Add(-4 * 25 * time.Minute)
	c3 := f.login(t, h, "alice", "")
	for i := range 8 {
		f.clock.Add(15 * time.Minute)
		want := 200
		if i == 7 {
			want = 401
		}
		if w := get(c3); w.Code != want {
			t.Fatalf("at %s after login: %d, want %d", time.Duration(i+1)*15*time.Minute, w.Code, want)
		}
	}
	c4 := f.login(t, h, "alice", "")
	f.clock.Add(30 * time.Minute)
	if w := get(c4); w.Code != 401 {
		t.Fatalf("idle for 30 min: %d", w.Code)
	}
	// Logout ends the session on the server, not just in the browser.
	c5 := f.login(t, h, "alice", "")
	w := do(h, req{method: "POST", path: "/api/v1/logout", cookie: c5})
	if w.Code != 200 || !strings.Contains(w.Header().Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %v", w.Code, w.Header())
	}
	if w := get(c5); w.Code != 401 {
		t.Fatalf("after logout: %d", w.Code)
	}
	if es := audits(t, f.st, "logout"); len(es) != 1 || es[0].Actor != "alice" || es[0].Outcome != "success" {
		t.Fatalf("logout audit: %+v", es)
	}
	// c3 and c4 went when they were refused; c2 ended unseen and is swept.
	if n, err := f.a.EndExpiredSessions(context.Background()); err != nil || n != 1 {
		t.Fatalf("expired sessions removed: %d %v", n, err)
	}
	if rows := rawRows(t, f.path, "sessions"); len(rows) != 0 {
		t.Fatalf("sessions left: %v", rows)
	}
	// A role change applies to a live session at once.
	f.addUser(t, "bob", Admin)
	cb := f.login(t, h, "bob", "")
	if err := f.a.SetRole(context.Background(), f.cli, "bob", Viewer); err != nil {
		t.Fatal(err)
	}
	if w := do(h, req{method: "PUT", path: "/api/v1/state", cookie: cb, body: "{}"}); w.Code != 403 {
		t.Fatalf("demoted bob: %d", w.Code)
	}
	// A new password ends the sessions.
	if err := f.a.SetPassword(context.Background(), f.cli, "bob", pw+" new one"); err != nil {
		t.Fatal(err)
	}
	if w := get(cb); w.Code != 401 {
		t.Fatalf("session after a password change: %d", w.Code)
	}
	// Under TLS the cookie is Secure.
	r := httptest.NewRequest("POST", "https://director.test/api/v1/login", strings.NewReader(loginBody("alice", pw+" alice")))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != 200 || !strings.Contains(rec.Header().Get("Set-Cookie"), "Secure") {
		t.Fatalf("login over TLS: %d %s", rec.Code, rec.Header().Get("Set-Cookie"))
	}
}

func TestTokens(t *testing.T) {
	f := newFixture(t, Config{})
	f.addUser(t, "ci", Operator)
	h := f.handler(t)
	ctx := context.Background()
	tok, rec, err := f.a.CreateToken(ctx, f.cli, "ci", "deploy", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "ipvsctl_"+rec.Prefix+"_") || len(tok) != 8+8+1+43 {
		t.Fatalf("token %q (prefix %s)", tok, rec.Prefix)
	}
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	drain := req{method: "POST", path: "/api/v1/services/web/servers/r1/drain", header: bearer(tok)}
	if w := do(h, drain); w.Code != 200 || w.Body.String() != "ci operator api 192.0.2.1" {
		t.Fatalf("with the token: %d %s", w.Code, w.Body)
	}
	// The secret is nowhere in the database: neither the token nor its secret part.
	secret := tok[len(tok)-43:]
	for _, table := range []string{"tokens", "audit"} {
		for _, row := range rawRows(t, f.path, table) {
			if strings.Contains(row, secret) {
				t.Fatalf("%s holds the secret: %s", table, row)
			}
		}
	}
	rows := rawRows(t, f.path, "tokens")
	if len(rows) != 1 || !strings.Contains(rows[0], "hash="+hashSecret(tok)) || !strings.Contains(rows[0], "last_used_at=2026-11-30T10:00:00") {
		t.Fatalf("tokens row: %v", rows)
	}
	// Last use is written at most once a minute.
	f.clock.Add(30 * time.Second)
	do(h, drain)
	if rows := rawRows(t, f.path, "tokens"); !strings.Contains(rows[0], "last_used_at=2026-11-30T10:00:00.") {
		t.Fatalf("last use written within the minute: %v", rows)
	}
	f.clock.Add(31 * time.Second)
	do(h, drain)
	if rows := rawRows(t, f.path, "tokens"); !strings.Contains(rows[0], "last_used_at=2026-11-30T10:01:01.") {
		t.Fatalf("last use not written after a minute: %v", rows)
	}
	// Wrong, malformed and other-scheme credentials: 401 JSON, never a redirect.
	for _, hd := range []map[string]string{
		bearer(tok[:len(tok)-1] + "x"), bearer("ipvsctl_deadbeef_" + secret), bearer("nope"),
		{"Authorization": "Basic YWxpY2U6cHc="},
	} {
		w := do(h, req{method: "GET", path: "/", header: hd})
		if w.Code != 401 || !strings.Contains(errorBody(t, w), "API token") {
			t.Fatalf("credentials %v: %d %s", hd, w.Code, w.Body)
		}
	}
	// The operator's token is no admin's.
	if w := do(h, req{method: "PUT", path: "/api/v1/state", header: bearer(tok), body: "{}"}); w.Code != 403 {
		t.Fatalf("operator token on an admin route: %d", w.Code)
	}
	// Revoked: refused at once.
	if _, err := f.a.RevokeToken(ctx, f.cli, "deploy"); err != nil {
		t.Fatal(err)
	}
	if w := do(h, drain); w.Code != 401 || !strings.Contains(errorBody(t, w), "revoked") {
		t.Fatalf("revoked token: %d %s", w.Code, w.Body)
	}
	// Expired.
	tok2, _, err := f.a.CreateToken(ctx, f.cli, "ci", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if w := do(h, req{method: "GET", path: "/", header: bearer(tok2)}); w.Code != 200 {
		t.Fatalf("new token: %d", w.Code)
	}
	f.clock.Add(time.Hour)
	if w := do(h, req{method: "GET", path: "/", header: bearer(tok2)}); w.Code != 401 || !strings.Contains(w.Body.String(), "expired") {
		t.Fatalf("expired token: %d %s", w.Code, w.Body)
	}
	// Bad input names the field.
	var inv *InvalidError
	if _, _, err := f.a.CreateToken(ctx, f.cli, "ci", "two words", 0); !errors.As(err, &inv) || inv.Field != "name" {
		t.Fatalf("bad token name: %v", err)
	}
	if _, _, err := f.a.CreateToken(ctx, f.cli, "ci", "", -time.Hour); !errors.As(err, &inv) || inv.Field != "expires" {
		t.Fatalf("negative expiry: %v", err)
	}
	if _, _, err := f.a.CreateToken(ctx, f.cli, "nobody", "", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("token for nobody: %v", err)
	}
	// Removing the user ends its tokens.
	tok3, _, _ := f.a.CreateToken(ctx, f.cli, "ci", "", 0)
	f.addUser(t, "admin", Admin)
	if err := f.a.RemoveUser(ctx, f.cli, "ci"); err != nil {
		t.Fatal(err)
	}
	if w := do(h, req{method: "GET", path: "/", header: bearer(tok3)}); w.Code != 401 {
		t.Fatalf("token of a removed user: %d", w.Code)
	}
}

// The login limits protect users instead of locking them out: failures
// count per (user, address), so five from one address leave the user free
// to log in from another; an address spraying names is locked; failures for
// one user from many addresses slow that user down only from addresses it
// never logged in from; refusals are 429 with Retry-After.
func TestLoginRateLimit(t *testing.T) {
	f := newFixture(t, Config{LoginFailures: 5, LoginWindow: 5 * time.Minute})
	f.addUser(t, "alice", Admin)
	f.addUser(t, "bob", Viewer)
	h := f.handler(t)
	try := func(name, password, remote string) *httptest.ResponseRecorder {
		return do(h, req{method: "POST", path: "/api/v1/login", body: loginBody(name, password), remote: remote})
	}
	// Five failures for alice from one address lock that address for alice.
	for i := range 5 {
		if w := try("alice", "wrong password", "203.0.113.7:4000"); w.Code != 401 {
			t.Fatalf("failure %d: %d %s", i, w.Code, w.Body)
		}
	}
	w := try("alice", pw+" alice", "203.0.113.7:4001")
	if w.Code != 429 || w.Header().Get("Retry-After") != "300" || !strings.Contains(errorBody(t, w), "too many failed logins: try again in 5m0s") {
		t.Fatalf("locked pair, right password: %d %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	// Alice logs in from another address; bob from the same one.
	if w := try("alice", pw+" alice", "198.18.0.9:1"); w.Code != 200 {
		t.Fatalf("alice from another address: %d %s", w.Code, w.Body)
	}
	if w := try("bob", pw+" bob", "203.0.113.7:4002"); w.Code != 200 {
		t.Fatalf("bob from the address locked for alice: %d %s", w.Code, w.Body)
	}
	f.clock.Add(5 * time.Minute)
	if w := try("alice", pw+" alice", "203.0.113.7:4003"); w.Code != 200 {
		t.Fatalf("after the lockout: %d %s", w.Code, w.Body)
	}

	// An address spraying 20 names is locked, for every name.
	for i := range 20 {
		try(fmt.Sprintf("guess%d", i), "wrong password", "203.0.113.8:1")
	}
	if w := try("bob", pw+" bob", "203.0.113.8:2"); w.Code != 429 {
		t.Fatalf("spraying address: %d %s", w.Code, w.Body)
	}

	// A third party fails for alice from 12 addresses: alice is slowed down
	// from new addresses (429, a few seconds), never from hers.
	f.clock.Add(time.Hour)
	for i := range 12 {
		if w := try("alice", "wrong password", fmt.Sprintf("198.18.1.%d:1", i)); w.Code != 401 && w.Code != 429 {
			t.Fatalf("attacker %d: %d", i, w.Code)
		}
	}
	f.clock.Add(30 * time.Second)
	if w := try("alice", "wrong password", "198.18.2.1:1"); w.Code != 401 {
		t.Fatalf("a new address, its slot: %d %s", w.Code, w.Body)
	}
	w = try("alice", pw+" alice", "198.18.2.2:1")
	if ra, _ := strconv.Atoi(w.Header().Get("Retry-After")); w.Code != 429 || ra < 1 || ra > 30 {
		t.Fatalf("a new address while slowed: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	for _, addr := range []string{"198.18.0.9:7", "203.0.113.7:9"} {
		if w := try("alice", pw+" alice", addr); w.Code != 200 {
			t.Fatalf("alice from her own address %s while slowed: %d %s", addr, w.Code, w.Body)
		}
	}
	// IPv6 clients are counted by /64.
	for i := range 5 {
		try("bob", "wrong password", fmt.Sprintf("[2001:db8:1:2::%x]:1", i+1))
	}
	if w := try("bob", pw+" bob", "[2001:db8:1:2::ffff]:1"); w.Code != 429 {
		t.Fatalf("same /64: %d", w.Code)
	}
	// A repeat lockout of a pair lasts twice as long.
	f.clock.Add(5 * time.Minute)
	for range 5 {
		try("bob", "wrong password", "[2001:db8:1:2::1]:1")
	}
	if w := try("bob", pw+" bob", "[2001:db8:1:2::1]:1"); w.Code != 429 || w.Header().Get("Retry-After") != "600" {
		t.Fatalf("second lockout: %d %s", w.Code, w.Header().Get("Retry-After"))
	}
	// Every attempt is audited, refusals counted into one row per user,
	// address and window.
	es := audits(t, f.st, "login")
	total := 0
	for _, e := range es {
		if e.ClientAddr == "" || e.Via != "panel" {
			t.Errorf("audit entry without address or via: %+v", e)
		}
		total += max(e.Repeats, 1)
	}
	if total != 58 || len(es) > 30 {
		t.Fatalf("audit: %d attempts in %d rows", total, len(es))
	}
}

// 300 refused logins (wrong password, then rate-limited) add a bounded
// number of audit rows.
func TestRefusedLoginsAggregateInTheAudit(t *testing.T) {
	f := newFixture(t, Config{})
	f.addUser(t, "admin", Admin)
	ctx := context.Background()
	for i := range 300 {
		f.a.Login(ctx, "admin", "wrong password", "203.0.113.9")
		f.a.Login(ctx, fmt.Sprintf("nobody%d", i), "wrong password", "203.0.113.10")
	}
	es := audits(t, f.st, "login")
	repeats := 0
	for _, e := range es {
		repeats += e.Repeats
	}
	if len(es) > 4 || repeats != 600 {
		t.Fatalf("600 refused logins: %d audit rows, %d attempts counted: %+v", len(es), repeats, es)
	}
}

func TestClientAddrTrustedProxy(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, c := range []struct {
		remote, xff, want string
	}{
		{"198.18.0.5:1234", "", "198.18.0.5"},
		{"198.18.0.5:1234", "10.9.9.9", "198.18.0.5"}, // a client cannot claim to be anyone
		{"10.0.0.2:1234", "", "10.0.0.2"},
		{"10.0.0.2:1234", "198.18.0.7", "198.18.0.7"},
		{"10.0.0.2:1234", "6.6.6.6, 198.18.0.7", "198.18.0.7"},           // the spoofed left entry is ignored
		{"10.0.0.2:1234", "6.6.6.6, 198.18.0.7, 10.1.1.1", "198.18.0.7"}, // through two proxies
		{"10.0.0.2:1234", "10.3.3.3, 10.1.1.1", "10.3.3.3"},
		{"10.0.0.2:1234", "198.18.0.7, garbage", "10.0.0.2"},
		{"[::1]:1234", "2001:db8::7", "2001:db8::7"},
		{"[::ffff:198.18.0.5]:1", "", "198.18.0.5"},
		{"@", "198.18.0.7", "@"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := ClientAddr(r, trusted); got != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
	// Through the middleware: the principal and the login audit carry it.
	f := newFixture(t, Config{TrustedProxies: trusted})
	f.addUser(t, "alice", Admin)
	h := f.handler(t)
	w := do(h, req{method: "POST", path: "/api/v1/login", body: loginBody("alice", "wrong password"), remote: "198.18.0.5:1",
		header: map[string]string{"X-Forwarded-For": "10.0.0.9"}})
	if w.Code != 401 {
		t.Fatal(w.Code)
	}
	if es := audits(t, f.st, "login"); es[0].ClientAddr != "198.18.0.5" {
		t.Fatalf("spoofed X-Forwarded-For believed: %s", es[0].ClientAddr)
	}
	c := f.login(t, h, "alice", "")
	w = do(h, req{method: "GET", path: "/", cookie: c, remote: "10.0.0.2:1", header: map[string]string{"X-Forwarded-For": "198.18.0.8"}})
	if w.Body.String() != "alice admin panel 198.18.0.8" {
		t.Fatalf("through a trusted proxy: %s", w.Body)
	}
	// A trusted proxy terminating TLS makes the cookie Secure.
	w = do(h, req{method: "POST", path: "/api/v1/login", body: loginBody("alice", pw+" alice"), remote: "10.0.0.2:1",
		header: map[string]string{"X-Forwarded-Proto": "https"}})
	if !strings.Contains(w.Header().Get("Set-Cookie"), "Secure") {
		t.Fatalf("cookie behind a TLS proxy: %s", w.Header().Get("Set-Cookie"))
	}
	w = do(h, req{method: "POST", path: "/api/v1/login", body: loginBody("alice", pw+" alice"), remote: "198.18.0.5:1",
		header: map[string]string{"X-Forwarded-Proto": "https"}})
	if strings.Contains(w.Header().Get("Set-Cookie"), "Secure") {
		t.Fatal("X-Forwarded-Proto believed from an untrusted peer")
	}
}

func TestCrossOriginAndBodyLimit(t *testing.T) {
	f := newFixture(t, Config{})
	f.addUser(t, "alice", Admin)
	h := f.handler(t)
	c := f.login(t, h, "alice", "")
	tok, _, _ := f.a.CreateToken(context.Background(), f.cli, "alice", "", 0)
	for _, tc := range []struct {
		name   string
		header map[string]string
		cookie string
		want   int
	}{
		{"cross-site form post with the cookie", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.test"}, c, 403},
		{"same-site other origin", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "https://other.director.test"}, c, 403},
		{"old browser, other Origin", map[string]string{"Origin": "https://evil.test"}, c, 403},
		{"same-origin fetch from the panel", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://director.test"}, c, 200},
		{"old browser, own Origin", map[string]string{"Origin": "http://director.test"}, c, 200},
		{"script with a bearer token (no browser headers)", map[string]string{"Authorization": "Bearer " + tok}, "", 200},
	} {
		w := do(h, req{method: "POST", path: "/services", body: "{}", header: tc.header, cookie: tc.cookie})
		if w.Code != tc.want {
			t.Errorf("%s: %d, want %d (%s)", tc.name, w.Code, tc.want, w.Body)
		}
		if tc.want == 403 && !strings.Contains(errorBody(t, w), "cross-origin request refused") {
			t.Errorf("%s: %s", tc.name, w.Body)
		}
	}
	// A cross-site login (login CSRF) is refused too; a GET is not a write and passes.
	if w := do(h, req{method: "POST", path: "/api/v1/login", body: loginBody("alice", pw+" alice"), header: map[string]string{"Sec-Fetch-Site": "cross-site"}}); w.Code != 403 {
		t.Errorf("cross-site login: %d", w.Code)
	}
	if w := do(h, req{method: "GET", path: "/", cookie: c, header: map[string]string{"Sec-Fetch-Site": "cross-site"}}); w.Code != 200 {
		t.Errorf("cross-site GET: %d", w.Code)
	}
	// Bodies over the limit: 413, declared (Content-Length) or found while reading (chunked).
	big := strings.Repeat("x", 2000)
	if w := do(h, req{method: "PUT", path: "/api/v1/state", body: big, cookie: c}); w.Code != 413 || !strings.Contains(errorBody(t, w), "larger than the limit of 1024 bytes") {
		t.Errorf("declared oversized body: %d %s", w.Code, w.Body)
	}
	r := httptest.NewRequest("PUT", "http://director.test/api/v1/state", io.MultiReader(strings.NewReader(big)))
	r.ContentLength = -1
	r.AddCookie(&http.Cookie{Name: CookieName, Value: c})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != 413 {
		t.Errorf("chunked oversized body: %d %s", rec.Code, rec.Body)
	}
	if w := do(h, req{method: "PUT", path: "/api/v1/state", body: "{}", cookie: c}); w.Code != 200 {
		t.Errorf("small body: %d", w.Code)
	}
}

// Every role against routes declared with every role; without credentials an
// API route answers 401 JSON and a page redirects to the login page.
func TestRoleMatrix(t *testing.T) {
	f := newFixture(t, Config{})
	h := f.handler(t)
	cookies := map[string]string{}
	for _, u := range []struct {
		name string
		role Role
	}{{"val", Viewer}, {"olga", Operator}, {"ada", Admin}} {
		f.addUser(t, u.name, u.role)
		cookies[u.role.String()] = f.login(t, h, u.name, "")
	}
	routes := []struct {
		method, path string
		need         Role
	}{
		{"GET", "/healthz", Public},
		{"GET", "/api/v1/state", Viewer},
		{"GET", "/", Viewer},
		{"POST", "/api/v1/services/web/servers/r1/drain", Operator},
		{"PUT", "/api/v1/state", Admin},
		{"POST", "/services", Admin},
	}
	for _, rt := range routes {
		for _, who := range []string{"", "viewer", "operator", "admin"} {
			w := do(h, req{method: rt.method, path: rt.path, cookie: cookies[who], body: "{}"})
			have, _ := ParseRole(who)
			want := 200
			switch {
			case rt.need == Public:
			case who == "" && strings.HasPrefix(rt.path, "/api/"):
				want = 401
			case who == "":
				want = 303 // httptest sends no Accept: text/html, so say it below
			case !Allows(have, rt.need):
				want = 403
			}
			if who == "" && want == 303 {
				w = do(h, req{method: rt.method, path: rt.path + "?tab=1", body: "{}", header: map[string]string{"Accept": "text/html"}})
				if loc := w.Header().Get("Location"); loc != "/login?next="+url.QueryEscape(rt.path+"?tab=1") {
					t.Errorf("%s %s: redirect to %q", rt.method, rt.path, loc)
				}
			}
			if w.Code != want {
				t.Errorf("%s %s as %q: %d, want %d (%s)", rt.method, rt.path, who, w.Code, want, w.Body)
			}
			if want == 403 && !strings.Contains(errorBody(t, w), "this needs the "+rt.need.String()+" role") {
				t.Errorf("403 body: %s", w.Body)
			}
		}
	}
	// A route without a role is refused at start-up.
	defer func() {
		if recover() == nil {
			t.Error("Register took a route without a role")
		}
	}()
	f.a.Register(func(string, string, http.Handler) {}, []Route{{Method: "GET", Pattern: "/x", Handler: http.NotFoundHandler()}})
}

func TestSafeNextAndFirstUser(t *testing.T) {
	for in, want := range map[string]string{"/services?x=1": "/services?x=1", "//evil.test/": "/", "https://evil.test": "/", `/\evil.test`: "/", "": "/", "services": "/"} {
		if got := SafeNext(in); got != want {
			t.Errorf("SafeNext(%q) = %q, want %q", in, got, want)
		}
	}
	f := newFixture(t, Config{})
	if need, err := f.a.NeedsFirstUser(context.Background()); !need || err != nil {
		t.Fatalf("new database: %v %v", need, err)
	}
	f.addUser(t, "ada", Admin)
	if need, _ := f.a.NeedsFirstUser(context.Background()); need {
		t.Fatal("still needs a first user")
	}
}

// Logins with names no user can have share one rate-limit key (no memory
// per name) and are audited with the name quoted and cut short.
func TestLoginWithInvalidNames(t *testing.T) {
	f := newFixture(t, Config{})
	f.addUser(t, "alice", Admin)
	ctx := context.Background()
	long := strings.Repeat("x", 5000)
	for i := range 10 {
		f.a.Login(ctx, fmt.Sprintf("%s%d", long, i), "wrong password", fmt.Sprintf("198.18.0.%d", i))
	}
	// Past 10 failures, the shared key is slowed down from a new address.
	f.a.Login(ctx, "evil\nname", "wrong password", "198.18.0.10")
	if _, err := f.a.Login(ctx, "evil\nname", "wrong password", "198.18.0.11"); !errors.As(err, new(*RateLimitError)) {
		t.Fatalf("twelfth invalid name: %v", err)
	}
	if _, err := f.a.Login(ctx, "alice", pw+" alice", "198.18.0.9"); err != nil {
		t.Fatalf("alice after invalid names: %v", err)
	}
	if n := len(f.a.guard.pair.keys) + len(f.a.guard.addr.keys) + len(f.a.guard.users); n > 26 {
		t.Fatalf("%d rate-limit keys", n)
	}
	es := audits(t, f.st, "login")
	// Names no user has are audited as one unknown user per address.
	if es[1].Actor != "(unknown user)" || es[1].ClientAddr != "198.18.0.11" || es[1].Detail != "refused: too many failed attempts" {
		t.Fatalf("audit: %+v", es[1])
	}
}
