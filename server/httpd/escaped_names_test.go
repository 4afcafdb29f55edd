package httpd_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/edge"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// Names with characters a path escapes (a slash, a space) are addressed by
// their escaped form in the API and in the panel alike: the one router gives
// every handler its path values decoded.
func TestEscapedNamesInTheAPIAndThePanel(t *testing.T) {
	g := servertest.Start(t)
	doc := `{"settings": {"network": "dr"}, "services": [{"name": "a/b%c", "protocol": "tcp", "address": "198.18.0.100", "port": 80,
	  "servers": [{"name": "r/1?x", "address": "198.18.0.11"}]}]}`
	if resp, body := do(t, g, g.Tokens[auth.Admin], "PUT", "/api/v1/state", doc); resp.StatusCode != 200 {
		t.Fatalf("PUT /state: %s %s", resp.Status, body)
	}
	svc, srv := url.PathEscape("a/b%c"), url.PathEscape("r/1?x")
	viewer := g.Tokens[auth.Viewer]
	for path, name := range map[string]string{"/api/v1/services/" + svc: "a/b%c", "/api/v1/services/" + svc + "/servers/" + srv: "r/1?x"} {
		if resp, body := do(t, g, viewer, "GET", path, ""); resp.StatusCode != 200 || !strings.Contains(body, `"name": "`+name+`"`) {
			t.Errorf("GET %s: %s %s", path, resp.Status, body)
		}
	}
	if resp, body := do(t, g, viewer, "GET", "/services/"+svc+"/servers/"+srv, "", "Accept", "text/html"); resp.StatusCode != 200 || !strings.Contains(body, "r/1?x") {
		t.Errorf("the panel's page of the server: %s", resp.Status)
	}
	if resp, body := do(t, g, g.Tokens[auth.Admin], "PATCH", "/api/v1/services/"+svc+"/servers/"+srv, `{"weight": 3}`); resp.StatusCode != 200 {
		t.Errorf("PATCH the server: %s %s", resp.Status, body)
	}
}

// One set of security headers for every answer of the one router: an API
// answer, a panel page, the panel's 404 and the API's.
func TestOneSetOfSecurityHeaders(t *testing.T) {
	g := servertest.Start(t)
	viewer := g.Tokens[auth.Viewer]
	for _, c := range []struct{ path, accept string }{{"/api/v1/status", ""}, {"/live", "text/html"}, {"/no-such-page", "text/html"}, {"/api/v1/no-such-route", ""}} {
		resp, _ := do(t, g, viewer, "GET", c.path, "", "Accept", c.accept)
		h := resp.Header
		if h.Get("Content-Security-Policy") != edge.CSP || h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("GET %s (%s): headers %v", c.path, resp.Status, h)
		}
	}
}
