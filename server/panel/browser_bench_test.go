package panel

import (
	"github.com/ipvsctl/ipvsctl/server/edge"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// TestBrowserLiveAtScale prints, in headless Chromium, the time from
// navigation to the live table loaded and painted at 1,000 services x 10
// real servers, beside the same HTML saved as a static file served by the
// same server. No timed assertion: the numbers are for reading
// (IPVSCTL_PANEL_BENCH=1 to run).
func TestBrowserLiveAtScale(t *testing.T) {
	if os.Getenv("IPVSCTL_PANEL_BENCH") == "" {
		testenv.OptIn(t, "set IPVSCTL_PANEL_BENCH=1 to measure the live table in Chromium at 1,000 services x 10 real servers")
	}
	if _, err := os.Stat(browsertest.Chromium); err != nil {
		testenv.Need(t, "no Chromium at "+browsertest.Chromium)
	}
	e := newEnvTimed(t, true)
	e.seed(t, bigState())
	waitFor(t, "the big table in the kernel", func() bool {
		m, err := e.panel.model(t.Context())
		return err == nil && len(m.Rows) == 1000 && m.Rows[999].InKernel
	})
	saved := []byte(e.get(t, "alice", "/live").Body)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /saved/live.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		http.ServeContent(w, r, "live.html", time.Time{}, bytesReader(saved))
	})
	mux.Handle("/", e.h)
	srv := httptest.NewServer(edge.Headers(mux))
	t.Cleanup(srv.Close) // after the browser's
	ctx := browsertest.Start(t, 5*time.Minute).Ctx
	// The test's Who takes a cookie that names the user.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/login"),
		chromedp.Evaluate[chromedp.Void](`document.cookie = "`+testCookie+`=alice; path=/"`)); err != nil {
		t.Fatal(err)
	}
	// drawn is navigation start to the load event (the table parsed, styled
	// and scripts run) and to the first contentful paint, read from the
	// page's own performance timeline.
	type drawn struct{ load, paint time.Duration }
	visit := func(path string) drawn {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+path), chromedp.WaitReady(chromedp.CSS("#live table tr.svc"))); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(function(){
			var n = performance.getEntriesByType("navigation")[0];
			var p = performance.getEntriesByName("first-contentful-paint")[0];
			return [n.loadEventEnd - n.startTime, p ? p.startTime : -1, document.querySelectorAll("#live tr.svc").length];
		})()`))
		if err != nil || len(ms) != 3 {
			t.Fatalf("%s: timings: %v %v", path, ms, err)
		}
		if ms[2] != 25 || ms[0] <= 0 {
			t.Fatalf("%s: %v services shown, load at %v ms", path, ms[2], ms[0])
		}
		return drawn{time.Duration(ms[0] * 1e6), time.Duration(ms[1] * 1e6)}
	}
	visit("/live") // assets into the cache, as for an operator who has the panel open
	visit("/saved/live.html")
	const n = 15
	var live, static []drawn
	for i := 0; i < n; i++ { // interleaved, so that the machine's load falls on both alike
		live = append(live, visit("/live"))
		static = append(static, visit("/saved/live.html"))
	}
	med := func(ds []drawn, f func(drawn) time.Duration) time.Duration {
		v := make([]time.Duration, len(ds))
		for i, d := range ds {
			v[i] = f(d)
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return v[len(v)/2]
	}
	load := func(d drawn) time.Duration { return d.load }
	paint := func(d drawn) time.Duration { return d.paint }
	t.Logf("/live in Chromium, %d bytes, median of %d: load %s | same HTML as a static file: load %s | ratio load %.2fx",
		len(saved), n, med(live, load).Round(100*time.Microsecond), med(static, load).Round(100*time.Microsecond),
		float64(med(live, load))/float64(med(static, load)))
	// Some headless Chromium builds record no paint entries at all: then
	// there is no first-paint figure, rather than a ratio of two -1s.
	if med(live, paint) < 0 || med(static, paint) < 0 {
		t.Log("first contentful paint: not recorded by this Chromium")
	} else {
		t.Logf("first contentful paint: %s | static %s | ratio %.2fx", med(live, paint).Round(100*time.Microsecond),
			med(static, paint).Round(100*time.Microsecond), float64(med(live, paint))/float64(med(static, paint)))
	}
	if strings.Contains(string(saved), "STALE") {
		t.Log("note: the saved page says its data is stale")
	}
}
