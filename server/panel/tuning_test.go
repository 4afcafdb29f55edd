package panel

import (
	"context"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"
)

// tuningHost is a director's /proc and /sys under a temporary root: the
// kernel's defaults, forwarding off.
func tuningHost(t testing.TB) tune.Host {
	t.Helper()
	root := t.TempDir()
	for p, c := range map[string]string{
		"proc/net/ip_vs":                            "IP Virtual Server version 1.2.1 (size=4096)\n",
		"proc/sys/net/ipv4/vs/conn_reuse_mode":      "1\n",
		"proc/sys/net/ipv4/vs/expire_nodest_conn":   "0\n",
		"proc/sys/net/ipv4/vs/amemthresh":           "1024\n",
		"proc/sys/net/ipv4/vs/drop_entry":           "0\n",
		"proc/sys/net/ipv4/vs/conntrack":            "1\n",
		"proc/sys/net/ipv4/vs/schedule_icmp":        "0\n",
		"proc/sys/net/ipv4/ip_forward":              "0\n",
		"proc/sys/net/ipv4/conf/all/rp_filter":      "1\n",
		"proc/sys/net/ipv4/conf/default/rp_filter":  "1\n",
		"sys/module/ip_vs/parameters/conn_tab_bits": "12\n",
		"sys/devices/system/cpu/online":             "0-3\n",
		"sys/class/net/eth0/device/vendor":          "0x8086\n",
		"sys/class/net/eth0/queues/rx-0/rps_cpus":   "0\n",
		"proc/sys/net/core/rps_sock_flow_entries":   "0\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tune.DirHost{Root: root}
}

func natWebState() *ipvsmgr.State {
	st := webState()
	st.Services[0].Forwarding = "nat"
	st.Services[0].Scheduler = "mh"
	st.Services[0].Servers[1].Weight = new(int)
	*st.Services[0].Servers[1].Weight = 6000
	return st
}

// TestTuningPage: every role reads the Tuning page, the table of `tune
// check` with the summary; a NAT director without forwarding is far off.
func TestTuningPage(t *testing.T) {
	h := tuningHost(t)
	e := newEnvTimed(t, false, func(c *server.Config) { c.TuneHost = h })
	e.seed(t, natWebState())
	for _, user := range []string{"vic", "oscar", "alice"} {
		r := e.get(t, user, "/tuning")
		if r.Code != 200 {
			t.Fatalf("%s GET /tuning: %d %s", user, r.Code, excerpt(r.Body))
		}
		for _, want := range []string{
			`id="tuning-summary"`, "far off</span>", "<code>net.ipv4.ip_forward</code>", "<code>ip_vs conn_tab_bits</code>",
			"<code>mh table of web</code>", "net/netfilter/ipvs/Kconfig", "the kernel snapshot of", `href="/tuning" aria-current="page"`,
		} {
			if !strings.Contains(r.Body, want) {
				t.Errorf("%s: /tuning lacks %q", user, want)
			}
		}
		if strings.Contains(r.Body, "<form") && strings.Contains(r.Body, `action="/tuning`) {
			t.Errorf("the Tuning page is read-only, yet has a form")
		}
	}
	// The overview warns, and links to the page.
	r := e.get(t, "vic", "/")
	i := strings.Index(r.Body, `id="tuning-badge" href="/tuning"><span class="state st-down">far off</span>`)
	if i < 0 || !strings.Contains(r.Body[i:], "net.ipv4.ip_forward</a>") && !strings.Contains(r.Body[i:], "ip_vs conn_tab_bits</a>") {
		t.Errorf("the overview has no tuning badge: %s", excerpt(r.Body))
	}
	// Without a setting far off, no badge.
	h2 := tuningHost(t)
	h2.(tune.DirHost).WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
	h2.(tune.DirHost).WriteFile("/sys/module/ip_vs/parameters/conn_tab_bits", []byte("20\n"), 0o644) // whatever the fake traffic
	e2 := newEnvTimed(t, false, func(c *server.Config) { c.TuneHost = h2 })
	e2.seed(t, webState())
	if r := e2.get(t, "vic", "/"); strings.Contains(r.Body, "tuning-badge") {
		t.Errorf("a badge on a DR director with nothing far off")
	}
	if r := e.get(t, "", "/tuning"); r.Code != 303 {
		t.Errorf("anonymous GET /tuning: %d", r.Code)
	}
}

// TestBrowserTuning shows the Tuning page in headless Chromium and saves
// its screenshot (tuning.png).
func TestBrowserTuning(t *testing.T) {
	if testing.Short() {
		testenv.OptIn(t, "browser test skipped in -short mode")
	}
	h := tuningHost(t)
	e := newEnvTimed(t, false, func(c *server.Config) { c.TuneHost = h })
	e.seed(t, natWebState())
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	b := browsertest.Start(t, 60*time.Second)
	b.Login(srv.URL+"/tuning", "alice", "pw-alice", "#tuning-table")
	b.Do("tuning", chromedp.Navigate(srv.URL+"/tuning"), chromedp.WaitVisible(chromedp.CSS("#tuning-table")))
	if s := b.Text("#tuning-summary"); !strings.Contains(s, "far off") || !strings.Contains(s, "settings:") {
		t.Errorf("summary: %q", s)
	}
	if s := b.Text("#tuning-table"); !strings.Contains(s, "net.ipv4.ip_forward") || !strings.Contains(s, "rps_cpus of eth0") {
		t.Errorf("table: %q", s)
	}
	b.FitsWidth("the Tuning page")
	b.Shot("tuning")
	b.Do("overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#tuning-badge")))
	if s := b.Text("#tuning-badge"); !strings.Contains(s, "far off") {
		t.Errorf("overview badge: %q", s)
	}
	b.ShotWindow("overview-tuning-badge")
}

// markLoadTest records a load test of two runs through web, default then
// tuned (the second with its web tier tuned as well, the first not saying),
// each long enough for the sampler (every 50 ms here) to store points
// inside it.
func markLoadTest(t testing.TB, e *env, each time.Duration) {
	t.Helper()
	ctx := context.Background()
	a := server.Actor{Name: "loadtest", Via: "test"}
	for i, phase := range []string{server.PhaseDefault, server.PhaseTuned} {
		web := map[string]string{server.PhaseTuned: server.PhaseTuned}[phase]
		run, err := e.core.StartLoadRun(ctx, a, server.LoadRunStart{Test: "lab 01:00", Phase: phase, WebPhase: web, Service: "web", Tool: "wrk -t2 -c64 -H 'Connection: close'"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(each)
		if _, err := e.core.EndLoadRun(ctx, a, run.ID, server.LoadResult{RPS: float64(800 + 100*i), P50ms: 61.5, P99ms: 1250, CPU: 0.93, Softirq: 0.21,
			Entries: 1019, Buckets: 4096 << i}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTuningPageLoadTest: the Tuning page shows the latest load test's runs
// with their figures, and the sampler's charts of the test's span with a
// band per run, shaded by phase.
func TestTuningPageLoadTest(t *testing.T) {
	e := newEnvTimed(t, false)
	e.seed(t, webState())
	if r := e.get(t, "vic", "/tuning"); strings.Contains(r.Body, `id="loadtest"`) {
		t.Errorf("a load test shown before any was recorded")
	}
	markLoadTest(t, e, 2500*time.Millisecond)
	r := e.get(t, "vic", "/tuning")
	if r.Code != 200 {
		t.Fatalf("GET /tuning: %d %s", r.Code, excerpt(r.Body))
	}
	for _, want := range []string{`id="loadtest"`, "Load test lab 01:00", `<td>800</td>`, `<td>900</td>`, "61.5 ms", "1.25 s", "93%", "21%",
		"1,019 / 4,096", "1,019 / 8,192", "wrk -t2 -c64", `class="band band-default"`, `class="band band-tuned"`, "New connections of web",
		"Active connections of web", "run 1 default<", "run 2 tuned, web tuned", `<th scope="col">Web tier</th>`,
		`<td><span class="muted">-</span></td>`, `<td><span class="state st-up">tuned</span></td>`} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("/tuning lacks %q", want)
		}
	}
	if n := strings.Count(r.Body, `<rect class="band`); n != 4 {
		t.Errorf("%d bands, want 2 runs x 2 charts", n)
	}
	i := strings.Index(r.Body, `id="loadtest"`)
	if i < 0 || !strings.Contains(r.Body[i:], "<polyline points=") {
		t.Errorf("the load test's charts have no points: %s", excerpt(r.Body[max(i, 0):]))
	}
}

// TestBrowserTuningLoadTest shows a recorded load test on the Tuning page in
// headless Chromium: the runs' table and the charts with their bands fit
// the page; saved as tuning-loadtest.png.
func TestBrowserTuningLoadTest(t *testing.T) {
	if testing.Short() {
		testenv.OptIn(t, "browser test skipped in -short mode")
	}
	e := newEnvTimed(t, false)
	e.seed(t, webState())
	markLoadTest(t, e, 2500*time.Millisecond)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	b := browsertest.Start(t, 60*time.Second)
	b.Login(srv.URL+"/tuning", "alice", "pw-alice", "#tuning-table")
	b.Do("tuning", chromedp.Navigate(srv.URL+"/tuning#loadtest"), chromedp.WaitVisible(chromedp.CSS("#loadtest-runs")))
	if s := b.Text("#loadtest-runs"); !strings.Contains(s, "default") || !strings.Contains(s, "tuned") || !strings.Contains(s, "1.25 s") {
		t.Errorf("the runs' table: %q", s)
	}
	if n := b.Eval(`String(document.querySelectorAll("#loadtest svg.loadtest-chart polyline").length) + " " + String(document.querySelectorAll("#loadtest rect.band").length)`); n != "2 4" {
		t.Errorf("charts with points, bands: %s, want 2 4", n)
	}
	// A band lies inside its chart's plot area.
	if s := b.Eval(`(function () { var r = document.querySelector("#loadtest rect.band-tuned"); var x = +r.getAttribute("x"), w = +r.getAttribute("width");
		return x > 0 && x + w <= 600.5 ? "in" : "out " + x + " " + w })()`); s != "in" {
		t.Errorf("the tuned run's band: %s", s)
	}
	b.FitsWidth("the Tuning page with a load test")
	b.Do("scroll to the load test", chromedp.ScrollIntoView(chromedp.CSS("#loadtest")))
	b.ShotWindow("tuning-loadtest")
}
