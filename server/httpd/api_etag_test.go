package httpd_test

import (
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// On a new director (an empty SQLite store) the standard optimistic flow
// works: GET /state, then PUT with If-Match set to the ETag it answered. Once
// a revision exists, If-Match "0" is stale like any other old revision.
func TestEmptyStoreETagIsUsableInIfMatch(t *testing.T) {
	g := servertest.Start(t)
	admin := g.Tokens[auth.Admin]
	resp, body := do(t, g, admin, "GET", "/api/v1/state", "")
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || etag != `"0"` {
		t.Fatalf("GET /state on an empty store: %s ETag %q %s", resp.Status, etag, body)
	}
	resp, body = do(t, g, admin, "PUT", "/api/v1/state", webDoc, "If-Match", etag)
	if resp.StatusCode != 200 {
		t.Fatalf("PUT /state with If-Match %s (the ETag of the empty store): %s %s", etag, resp.Status, body)
	}
	if got := resp.Header.Get("ETag"); got != `"1"` {
		t.Errorf("PUT answered ETag %q, want \"1\"", got)
	}
	resp, body = do(t, g, admin, "GET", "/api/v1/services/web", "")
	if resp.StatusCode != 200 || !strings.Contains(body, "198.18.0.100") {
		t.Errorf("the service the PUT stored: %s %s", resp.Status, body)
	}
	// A second client that read the empty store too is now stale: 409, nothing lost.
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/api/v1/state", `{"services":[]}`},
		{"POST", "/api/v1/services", `{"name":"dns","protocol":"udp","address":"198.18.0.53","port":53,"servers":[]}`},
		{"PATCH", "/api/v1/services/web", `{"scheduler":"rr"}`},
	} {
		resp, body = do(t, g, admin, w.method, w.path, w.body, "If-Match", `"0"`)
		if resp.StatusCode != 409 || !strings.Contains(body, "revision 0 (now at revision 1)") {
			t.Errorf("%s %s with If-Match \"0\" after revision 1: %s %s", w.method, w.path, resp.Status, body)
		}
	}
	resp, body = do(t, g, admin, "GET", "/api/v1/state", "")
	if resp.Header.Get("ETag") != `"1"` || !strings.Contains(body, `"wrr"`) {
		t.Errorf("after the refused writes: ETag %q %s", resp.Header.Get("ETag"), body)
	}
	resp, body = do(t, g, admin, "PUT", "/api/v1/state", webDoc, "If-Match", `"-1"`)
	if resp.StatusCode != 422 || !strings.Contains(body, `is not a revision`) {
		t.Errorf("If-Match \"-1\": %s %s", resp.Status, body)
	}
}
