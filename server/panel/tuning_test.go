package panel

import (
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
