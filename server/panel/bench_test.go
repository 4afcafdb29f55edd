package panel

import (
	"fmt"
	"github.com/ipvsctl/ipvsctl/server/edge"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// bigState is 1,000 virtual services x 10 real servers.
func bigState() *ipvsmgr.State {
	st := &ipvsmgr.State{}
	for i := 0; i < 1000; i++ {
		s := ipvsmgr.Service{Name: fmt.Sprintf("svc%04d", i), Address: fmt.Sprintf("198.18.%d.%d", 10+i/250, 1+i%250), Port: 80 + i/250}
		for j := 0; j < 10; j++ {
			s.Servers = append(s.Servers, ipvsmgr.Server{Address: fmt.Sprintf("198.19.%d.%d", j, 1+i%250)})
		}
		st.Services = append(st.Services, s)
	}
	return st
}

// TestLatencyAtScale prints server-side p50/p99 of the overview and the
// live table (page and fragment) at 1,000 x 10, beside a static file of the
// same size served by the same handler chain. No timed assertion: the
// numbers are for reading (IPVSCTL_PANEL_BENCH=1 to run).
func TestLatencyAtScale(t *testing.T) {
	if os.Getenv("IPVSCTL_PANEL_BENCH") == "" {
		testenv.OptIn(t, "set IPVSCTL_PANEL_BENCH=1 to measure the panel at 1,000 services x 10 real servers")
	}
	e := newEnvTimed(t, true)
	e.seed(t, bigState())
	waitFor(t, "the big table in the kernel", func() bool {
		m, err := e.panel.model(t.Context())
		return err == nil && len(m.Rows) == 1000 && m.Rows[999].InKernel
	})
	const n = 300
	one := func(h http.Handler, target string) (time.Duration, int) {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r.AddCookie(&http.Cookie{Name: testCookie, Value: "alice"})
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, r)
		d := time.Since(start)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d", target, w.Code)
		}
		return d, w.Body.Len()
	}
	pct := func(ds []time.Duration) (p50, p99 time.Duration) {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2], ds[len(ds)*99/100]
	}
	for _, target := range []string{"/", "/live", "/live/rows", "/live/rows?sort=active", "/live/rows?problems=1"} {
		_, size := one(e.h, target)
		// The floor: a static file of the same size, through the same mux and headers.
		mux := http.NewServeMux()
		static := make([]byte, size)
		for i := range static {
			static[i] = 'x'
		}
		mux.HandleFunc("GET /static-same-size", func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, "f.html", time.Time{}, bytesReader(static))
		})
		sh := edge.Headers(http.NewCrossOriginProtection().Handler(mux))
		// Interleaved, so that the machine's load falls on both alike.
		var ds, ss []time.Duration
		for i := 0; i < n; i++ {
			d, _ := one(e.h, target)
			s, _ := one(sh, "/static-same-size")
			ds, ss = append(ds, d), append(ss, s)
		}
		p50, p99 := pct(ds)
		sp50, sp99 := pct(ss)
		t.Logf("%-24s %7d bytes  p50 %8s p99 %8s | static same size p50 %8s p99 %8s | ratio p50 %.1fx p99 %.1fx",
			target, size, p50.Round(time.Microsecond), p99.Round(time.Microsecond), sp50.Round(time.Microsecond), sp99.Round(time.Microsecond),
			float64(p50)/float64(sp50), float64(p99)/float64(sp99))
	}
}
