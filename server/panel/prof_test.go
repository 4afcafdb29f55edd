package panel

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

func BenchmarkLiveRows(b *testing.B) {
	if os.Getenv("IPVSCTL_PANEL_BENCH") == "" {
		testenv.OptIn(b, "set IPVSCTL_PANEL_BENCH=1")
	}
	e := newEnvTimed(b, true)
	e.seed(b, bigState())
	waitFor(b, "kernel", func() bool {
		m, err := e.panel.model(b.Context())
		return err == nil && len(m.Rows) == 1000 && m.Rows[999].InKernel
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := httptest.NewRequest(http.MethodGet, "/live/rows", nil)
		r.AddCookie(&http.Cookie{Name: testCookie, Value: "alice"})
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
	}
}
