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
