package panel

import (
	"net/http"
	"strings"
	"testing"
)

// Every page renders for every role, and needs a login.
func TestEveryPageRenders(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	waitFor(t, "the service in the kernel", func() bool {
		m, err := e.panel.model(t.Context())
		return err == nil && len(m.Rows) == 1 && m.Rows[0].InKernel
	})
	pages := []string{"/", "/live", "/live/rows", "/live?q=r2&problems=1&sort=active", "/services", "/services/web",
		"/services/web/servers/r1", "/services/web/servers/r1/why", "/settings", "/draft", "/history", "/history/1",
		"/realservers", "/realservers?rip=198.18.0.11", "/import", "/account", "/addresses/198.18.0.11", "/export?format=json",
		"/export?format=ipvsadm"}
	admin := []string{"/services/new", "/services/web/edit", "/services/web/servers/new", "/users", "/audit"}
	for _, user := range []string{"alice", "oscar", "vic"} {
		for _, pg := range pages {
			r := e.get(t, user, pg)
			if r.Code != http.StatusOK {
				t.Errorf("%s GET %s: %d %s", user, pg, r.Code, excerpt(r.Body))
			}
		}
		for _, pg := range admin {
			r := e.get(t, user, pg)
			want := http.StatusOK
			if user != "alice" {
				want = http.StatusForbidden
			}
			if r.Code != want {
				t.Errorf("%s GET %s: %d, want %d: %s", user, pg, r.Code, want, excerpt(r.Body))
			}
		}
	}
	for _, pg := range append(pages, admin...) {
		r := e.get(t, "", pg)
		if r.Code != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/login?next=") {
			t.Errorf("anonymous GET %s: %d %q, want a redirect to the login page", pg, r.Code, r.Header.Get("Location"))
		}
	}
	if r := e.get(t, "", "/login"); r.Code != http.StatusOK {
		t.Errorf("login page: %d", r.Code)
	}
}

func excerpt(s string) string {
	if i := strings.Index(s, "<main"); i >= 0 {
		s = s[i:]
	}
	if len(s) > 600 {
		s = s[:600]
	}
	return s
}
