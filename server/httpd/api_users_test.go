package httpd_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// Users and tokens over the API: the director's rules (the last admin
// stays, names and passwords checked), a password read from the body only,
// a token's secret answered once and not cached, and a new token that
// works, then stops working once revoked.
func TestUsersAndTokensOverTheAPI(t *testing.T) {
	g := servertest.Start(t)
	admin := g.Tokens[auth.Admin]
	errCode := func(name string, want int, code server.Code, resp *http.Response, body string) {
		t.Helper()
		var e httpd.ErrorBody
		if resp.StatusCode != want || json.Unmarshal([]byte(body), &e) != nil || e.Code != code {
			t.Errorf("%s: %s %s, want %d %s", name, resp.Status, body, want, code)
		}
	}
	resp, body := do(t, g, admin, "POST", "/api/v1/users?password=a+long+enough+password", `{"name":"eve","role":"viewer"}`)
	errCode("a password in the URL only", 422, server.CodeBadInput, resp, body)
	if !strings.Contains(body, "password: must be at least 12 characters (this one has 0)") {
		t.Errorf("password in the URL: %s", body)
	}
	resp, body = do(t, g, admin, "POST", "/api/v1/users", `{"name":"eve","role":"viewer","passwd":"a long enough password"}`)
	errCode("an unknown field", 400, server.CodeMalformed, resp, body)
	resp, body = do(t, g, admin, "DELETE", "/api/v1/users/admin", "")
	errCode("remove the last admin", 409, server.CodeLastAdmin, resp, body)
	resp, body = do(t, g, admin, "PATCH", "/api/v1/users/admin", `{"role":"viewer"}`)
	errCode("demote the last admin", 409, server.CodeLastAdmin, resp, body)
	resp, body = do(t, g, admin, "PATCH", "/api/v1/users/viewer", `{"role":"root"}`)
	errCode("no such role", 422, server.CodeBadInput, resp, body)
	resp, body = do(t, g, admin, "PUT", "/api/v1/users/nobody/password", `{"password":"a long enough password"}`)
	errCode("no such user", 404, server.CodeNotFound, resp, body)
	resp, body = do(t, g, admin, "POST", "/api/v1/users", `{"name":"viewer","role":"viewer","password":"a long enough password"}`)
	errCode("a name taken", 409, server.CodeExists, resp, body)

	resp, body = do(t, g, admin, "POST", "/api/v1/tokens", `{"user":"operator","name":"ci","expires":"1h"}`)
	var created server.CreatedToken
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &created) != nil || !strings.HasPrefix(created.Token, "ipvsctl_") ||
		created.Info == nil || created.Info.Name != "ci" || created.Info.ExpiresAt == nil {
		t.Fatalf("create a token: %s %s", resp.Status, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the token's answer may be cached: Cache-Control %q", cc)
	}
	if strings.Contains(body, created.Info.Hash) && created.Info.Hash != "" {
		t.Errorf("the answer carries the hash: %s", body)
	}
	// The new token acts as its user, with the user's role.
	if resp, body := do(t, g, created.Token, "GET", "/api/v1/state", ""); resp.StatusCode != 200 {
		t.Errorf("the new token reading: %s %s", resp.Status, body)
	}
	if resp, _ := do(t, g, created.Token, "GET", "/api/v1/users", ""); resp.StatusCode != 403 {
		t.Errorf("the operator's token listing users: %s", resp.Status)
	}
	_, body = do(t, g, admin, "GET", "/api/v1/tokens", "")
	if strings.Contains(body, created.Token[len(created.Token)-43:]) || !strings.Contains(body, `"name": "ci"`) {
		t.Errorf("token list: %s", body)
	}
	if resp, body := do(t, g, admin, "POST", "/api/v1/tokens/ci/revoke", ""); resp.StatusCode != 200 || !strings.Contains(body, `"revoked_at": "`) {
		t.Fatalf("revoke: %s %s", resp.Status, body)
	}
	if resp, _ := do(t, g, created.Token, "GET", "/api/v1/state", ""); resp.StatusCode != 401 {
		t.Errorf("a revoked token: %s", resp.Status)
	}
	// A user removed takes its tokens with it.
	if resp, body := do(t, g, admin, "DELETE", "/api/v1/users/viewer", ""); resp.StatusCode != 200 {
		t.Fatalf("remove viewer: %s %s", resp.Status, body)
	}
	if resp, _ := do(t, g, g.Tokens[auth.Viewer], "GET", "/api/v1/state", ""); resp.StatusCode != 401 {
		t.Errorf("the removed user's token: %s", resp.Status)
	}
}
