package httpd_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// A service's quorum programs are set through PATCH (a list or one command
// line), validated with the field and value named, and removed with [].
func TestAPIServiceQuorumPrograms(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	admin := g.Tokens[auth.Admin]
	resp, body := do(t, g, admin, "PATCH", "/api/v1/services/web", `{"quorum_down":["notify.sh"]}`)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `"path": "services[0].quorum_down[0]"`) ||
		!strings.Contains(body, `is not an absolute path`) || !strings.Contains(body, `notify.sh`) {
		t.Fatalf("relative program: %s %s", resp.Status, body)
	}
	if resp, body = do(t, g, admin, "PATCH", "/api/v1/services/web", `{"quorum_up":"/usr/local/sbin/notify up","quorum_down":["/usr/local/sbin/notify","down"]}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("quorum programs: %s %s", resp.Status, body)
	}
	_, body = do(t, g, admin, "GET", "/api/v1/state", "")
	flat := strings.Join(strings.Fields(body), "")
	if !strings.Contains(flat, `"quorum_up":["/usr/local/sbin/notify","up"]`) || !strings.Contains(flat, `"quorum_down":["/usr/local/sbin/notify","down"]`) {
		t.Errorf("the quorum programs are not in the state: %s", body)
	}
	if resp, body = do(t, g, admin, "PATCH", "/api/v1/services/web", `{"quorum_up":[]}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("remove: %s %s", resp.Status, body)
	}
	if _, body = do(t, g, admin, "GET", "/api/v1/state", ""); strings.Contains(body, `"quorum_up"`) || !strings.Contains(body, `"quorum_down"`) {
		t.Errorf("quorum_up not removed alone: %s", body)
	}
}
