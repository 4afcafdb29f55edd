package httpd_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// A service's group (keepalived's virtual_server_group) is set through
// PATCH, validated with the field named, and read back in the state.
func TestAPIServiceGroup(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	admin := g.Tokens[auth.Admin]
	resp, body := do(t, g, admin, "PATCH", "/api/v1/services/web", `{"group":"edge {1}"}`)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `"path": "services[0].group"`) ||
		!strings.Contains(body, `a group name cannot hold a quote, a brace, # or !`) {
		t.Fatalf("bad group: %s %s", resp.Status, body)
	}
	if resp, body = do(t, g, admin, "PATCH", "/api/v1/services/web", `{"group":"edge"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("group: %s %s", resp.Status, body)
	}
	if _, body = do(t, g, admin, "GET", "/api/v1/state", ""); !strings.Contains(body, `"group": "edge"`) && !strings.Contains(body, `"group":"edge"`) {
		t.Errorf("the group is not in the state: %s", body)
	}
	if resp, body = do(t, g, admin, "PATCH", "/api/v1/services/web", `{"group":""}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("no group: %s %s", resp.Status, body)
	}
	if _, body = do(t, g, admin, "GET", "/api/v1/state", ""); strings.Contains(body, `"group"`) {
		t.Errorf("the group is still there: %s", body)
	}
}
