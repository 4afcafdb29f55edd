package panel

import (
	"strings"
	"testing"
)

// The rows are shared between browsers, but never between roles: an
// operator's page, with its buttons, is not what a viewer gets next.
func TestLiveRowsSharedPerRole(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	waitFor(t, "kernel", func() bool {
		m, err := e.panel.model(t.Context())
		return err == nil && len(m.Rows) > 0 && m.Rows[0].InKernel
	})
	for i := 0; i < 3; i++ {
		if body := e.get(t, "oscar", "/live/rows").Body; !strings.Contains(body, "formaction") || !strings.Contains(body, `name="sel"`) {
			t.Fatalf("operator: no write controls: %s", excerpt(body))
		}
		if body := e.get(t, "vic", "/live/rows").Body; strings.Contains(body, "formaction") || strings.Contains(body, `name="sel"`) {
			t.Fatalf("viewer: write controls: %s", excerpt(body))
		}
	}
}

// A filter that keeps some of a service's real servers says how many it
// hid, in the service's row; the tbody closes after the rows it kept, and
// an unfiltered page says nothing is hidden. Each variant (role) renders it.
func TestLiveRowsSayWhatTheFilterHid(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	waitFor(t, "kernel", func() bool {
		m, err := e.panel.model(t.Context())
		return err == nil && len(m.Rows) > 0 && m.Rows[0].InKernel
	})
	for _, user := range []string{"vic", "oscar"} {
		for i := 0; i < 2; i++ { // rendered, then from the view's cache
			body := e.get(t, user, "/live/rows?q=r2").Body
			tbody := body[strings.Index(body, "<tbody>"):]
			tbody = tbody[:strings.Index(tbody, "</tbody>")]
			if !strings.Contains(tbody, `<td><span class="muted small">1 hidden</span></td>`) || !strings.Contains(tbody, ">r2<") || strings.Contains(tbody, ">r1<") {
				t.Fatalf("%s: q=r2 does not keep r2 alone and say 1 hidden: %s", user, tbody)
			}
			if strings.Count(body, "<tbody>") != 1 || strings.Count(body, "</tbody>") != 1 {
				t.Fatalf("%s: q=r2: tbodies not one, whole: %s", user, body)
			}
			body = e.get(t, user, "/live/rows").Body
			if strings.Contains(body, " hidden</span>") || !strings.Contains(body, ">r1<") || !strings.Contains(body, ">r2<") {
				t.Fatalf("%s: unfiltered: %s", user, body)
			}
		}
	}
}
