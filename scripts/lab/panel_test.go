//go:build labtest

package lab

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// testPanel drives headless Chromium on the host through the lab's panel, on
// the real kernel in the VM with the client's traffic: every screen of the
// panel, each saved as lab-SCREEN.png; the one-click drain and enable of rs1
// watched in the live table without a reload, and the kernel's weight read
// back through the API after each.
func testPanel(t *testing.T, url, password, token string) {
	// Bounded by what the test's deadline leaves once the lab is stopped.
	within := 180 * time.Second
	if d, ok := t.Deadline(); ok {
		within = min(within, time.Until(d)-90*time.Second)
	}
	if within < 45*time.Second {
		testenv.Needf(t, "only %s left before the test's deadline: the browser test needs more", within.Round(time.Second))
	}
	b := browsertest.Start(t, within)
	t.Logf("screenshots: %s/lab-*.png", b.Dir)
	started := time.Now()
	defer func() { t.Logf("the browser test took %s", time.Since(started).Round(100*time.Millisecond)) }()

	b.Login(url+"/", "admin", password, ".tiles")
	if s := b.Text("#t-dir + .big"); !strings.Contains(s, "kernel OK") {
		t.Errorf("overview: the director says %q, want kernel OK", s)
	}
	if s := b.Text("#t-rs + .big"); strings.TrimSpace(s) != "5" {
		t.Errorf("overview: %q real servers, want 5", s)
	}
	b.Shot("lab-overview")

	// The live table: traffic shows in a real server's row once a refresh
	// has replaced the table, without a reload.
	b.Do("live", chromedp.Navigate(url+"/live"), chromedp.WaitVisible(chromedp.CSS("#live table")))
	b.MarkPage()
	b.Eval(`document.querySelector("#live table").__first = "yes"`)
	b.WaitInPage("traffic on a real server in the live table, after a refresh",
		`!document.querySelector("#live table").__first && [["web", "rs1"], ["web", "rs2"], ["web", "rs3"], ["web-nat", "nat1"], ["web-nat", "nat2"]].some(function (p) {
			var svc = p[0], n = p[1], c = `+cellsJS("", "")+`;
			return !!c && [`+strconv.Itoa(liveActive)+`, `+strconv.Itoa(liveInactive)+`, `+strconv.Itoa(liveCPS)+`].some(function (i) { return parseFloat(c[i]) > 0 })
		})`, rowJS("web", "rs1"), 30*time.Second)
	b.FitsWidth("the live table")
	b.Shot("lab-live")

	// Drain rs1 with its button; the row turns drained (configured weight kept) with the kernel's
	// weight 0 and its traffic stops, without a reload; the API's status (the
	// kernel's table) agrees, and rs1 gets no new connection while the others do.
	b.Do("drain rs1", chromedp.Click(chromedp.CSS("button[formaction='/services/web/servers/rs1/drain']")), chromedp.WaitVisible(chromedp.CSS(".banner.flash")))
	if s := b.Text(".banner.flash"); strings.Contains(s, "FAILED") {
		t.Fatalf("drain rs1: %q", s)
	}
	b.MarkPage()
	t.Logf("rs1 in the page the drain led to: %s", b.Eval(rowJS("web", "rs1")))
	b.WaitInPage("rs1 drained (its configured weight 1 kept), kernel weight 0, in the live table", rowIs("web", "rs1", "drained", "1 / 0"), rowJS("web", "rs1"), 20*time.Second)
	waitKernelWeight(t, url, token, "198.18.0.11", 0)
	drainedAt := time.Now()
	// Its rates fall to 0 as the kernel's estimator forgets it (a quarter of
	// the gap every 2 s).
	b.WaitInPage("rs1's traffic to stop, in the live table", `(function (c) { return !!c && c[`+strconv.Itoa(liveCPS)+`] === "0" && c[`+strconv.Itoa(livePPS)+`] === "0" })(`+cellsJS("web", "rs1")+`)`,
		rowJS("web", "rs1"), 60*time.Second)
	t.Logf("rs1's traffic stopped %s after the kernel had weight 0: %s", time.Since(drainedAt).Round(100*time.Millisecond), b.Eval(rowJS("web", "rs1")))
	b.Shot("lab-live-drained")
	b.Do("why rs1", chromedp.Navigate(url+"/services/web/servers/rs1/why"), chromedp.WaitVisible(chromedp.CSS("#why-reasons")))
	if s := b.Text("#why-reasons"); !strings.Contains(s, "admin state: drain: weight 0 in the kernel") || !strings.Contains(s, "configured weight 1 kept") {
		t.Errorf("why rs1, drained: %q", s)
	}
	b.Shot("lab-why")
	// IPVS sums its counters every 2 s and the daemon reads them every 2 s.
	time.Sleep(time.Until(drainedAt.Add(5 * time.Second)))
	before := conns(t, url, token)
	time.Sleep(6 * time.Second)
	after := conns(t, url, token)
	if k := "198.18.0.100:80 -> 198.18.0.11"; after[k] != before[k] {
		t.Errorf("rs1 drained: its connections went from %d to %d", before[k], after[k])
	}
	if k := "198.18.0.100:80"; after[k] <= before[k] {
		t.Errorf("with rs1 drained the service's connections went from %d to %d", before[k], after[k])
	}

	b.Do("live, to enable rs1", chromedp.Navigate(url+"/live"),
		chromedp.Click(chromedp.CSS("button[formaction='/services/web/servers/rs1/enable']")), chromedp.WaitVisible(chromedp.CSS(".banner.flash")))
	b.MarkPage()
	t.Logf("rs1 in the page the enable led to: %s", b.Eval(rowJS("web", "rs1")))
	b.WaitInPage("rs1 enabled, kernel weight 1, in the live table", rowIs("web", "rs1", "enabled", "1 / 1"), rowJS("web", "rs1"), 20*time.Second)
	waitKernelWeight(t, url, token, "198.18.0.11", 1)
	b.WaitInPage("rs1's traffic to come back, in the live table", `(function (c) { return !!c && (parseFloat(c[`+strconv.Itoa(liveCPS)+`]) > 0 || parseFloat(c[`+strconv.Itoa(livePPS)+`]) > 0) })(`+cellsJS("web", "rs1")+`)`,
		rowJS("web", "rs1"), 30*time.Second)

	b.Do("history", chromedp.Navigate(url+"/history"), chromedp.WaitVisible(chromedp.CSS("table")))
	if s := b.Text("main"); !strings.Contains(s, "drain") || !strings.Contains(s, "enable") {
		t.Errorf("history lacks the drain and the enable: %q", s)
	}
	b.Shot("lab-history")

	b.Do("settings", chromedp.Navigate(url+"/settings"), chromedp.WaitVisible(chromedp.CSS("#s-network")))
	if s := b.Text("#redundancy-role"); s != "not configured" {
		t.Errorf("settings: the lab's director is alone, and the Redundancy card says %q", s)
	}
	b.Shot("lab-settings")

	b.Do("real-server preparation", chromedp.Navigate(url+"/realservers"), chromedp.WaitVisible(chromedp.CSS("[id='rs-198.18.0.11']")))
	if s := b.Text("main table"); !strings.Contains(s, "dr-sysctl") || !strings.Contains(s, "nat") {
		t.Errorf("the real-server preparation table lacks the modes: %q", s)
	}
	b.Shot("lab-realservers")
	b.Do("rs1's preparation script", chromedp.Navigate(url+"/realservers?rip=198.18.0.11#prep-script"), chromedp.WaitVisible(chromedp.CSS("#prep-script")))
	if s := b.Text("#prep-script"); !strings.Contains(s, "198.18.0.100") || !strings.Contains(s, "arp_ignore") {
		t.Errorf("rs1's preparation script does not hide the VIP from ARP: %q", s)
	}
	b.ShotWindow("lab-realservers-script")

	// The service page's charts: the sampler stores a point every 10 s.
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.Do("service web", chromedp.Navigate(url+"/services/web"), chromedp.WaitVisible(chromedp.CSS("svg.chart")))
		if b.Eval(`document.querySelectorAll("svg.chart polyline").length > 0 ? "yes" : ""`) == "yes" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service's charts have no points after 30 s: %q", b.Text("svg.chart"))
		}
		time.Sleep(5 * time.Second)
	}
	b.Shot("lab-service")

	b.Do("users", chromedp.Navigate(url+"/users"), chromedp.WaitVisible(chromedp.CSS("#nu-name")))
	if s := b.Text("main"); !strings.Contains(s, "\tlab\tadmin\t") {
		t.Errorf("the tokens lack the lab's, by its name: %q", s)
	}
	if s := b.Eval(rowOf("main table", "admin")); strings.Contains(s, "never") {
		t.Errorf("the admin logged in, and the users table says %q", s)
	}
	b.Shot("lab-users")

	b.Do("audit, the drains", chromedp.Navigate(url+"/audit"),
		chromedp.SendKeys(chromedp.CSS("#a-action"), "drain"),
		chromedp.Click(chromedp.CSS("form[action='/audit'] button")))
	b.WaitJS("the filtered audit log", `location.search.indexOf("action=drain") >= 0 && document.readyState === "complete"`, 10*time.Second)
	if s := b.Text("main table"); !strings.Contains(s, "rs drain web rs1") || strings.Contains(s, "login") {
		t.Errorf("the audit log filtered on drain: %q", s)
	}
	b.Do("audit", chromedp.Navigate(url+"/audit"), chromedp.WaitVisible(chromedp.CSS("#a-user")))
	if s := b.Text("main table"); !strings.Contains(s, "rs drain web rs1") || !strings.Contains(s, "login") {
		t.Errorf("the audit log lacks the login and the drain: %q", s)
	}
	b.Shot("lab-audit")

	// Import the lab's own state with rs2 at weight 3: the preview shows the
	// kernel change, then the draft is discarded.
	var doc map[string]any
	getJSON(t, url+"/api/v1/export?format=json", token, &doc)
	rs2, ok := dig(doc, "services", 0, "servers", 1).(map[string]any)
	if !ok || rs2["name"] != "rs2" {
		t.Fatalf("the exported state has no rs2 second in web: %v", doc)
	}
	rs2["weight"] = 3
	body, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "lab.json")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	b.Do("import preview", chromedp.Navigate(url+"/import"),
		chromedp.SetValue(chromedp.CSS("#imp-format"), "json"),
		chromedp.SetUploadFiles(chromedp.CSS("#imp-file"), []string{file}),
		chromedp.Click(chromedp.CSS("form[action='/import'] button")),
		chromedp.WaitVisible(chromedp.CSS("#import-preview")))
	if s := b.Text("#import-preview"); !strings.Contains(s, "-r 198.18.0.12:80 -g -w 3") {
		t.Errorf("the import preview lacks rs2's new weight: %q", s)
	}
	b.Shot("lab-import")
	b.Do("discard the import", chromedp.Click(chromedp.CSS("form[action='/draft/discard'] button")), chromedp.WaitVisible(chromedp.CSS(".banner.flash")))
}

// The live table's cells of a real server's row (server/panel's live_row.html).
const liveAdmin, liveWeight, liveActive, liveInactive, liveCPS, livePPS = 3, 5, 6, 7, 9, 10

// cellsJS is a JavaScript expression: the texts of the cells of real server
// rs of svc in the live table, or null. An empty svc or rs is a JavaScript
// variable of that name.
func cellsJS(svc, rs string) string {
	q := func(s string) string { return `"` + s + `"` }
	sv, r := q(svc), q(rs)
	if svc == "" {
		sv = "svc"
	}
	if rs == "" {
		r = "n"
	}
	return `(function (s, r) { var a = document.querySelector("#live a[href='/services/" + s + "/servers/" + r + "']");
		return a ? Array.prototype.map.call(a.closest("tr").cells, function (c) { return c.innerText.trim() }) : null })(` + sv + `, ` + r + `)`
}

// rowJS is a JavaScript expression: the text of rs's row, for a failure's message.
func rowJS(svc, rs string) string { return `JSON.stringify(` + cellsJS(svc, rs) + `)` }

// rowIs is a JavaScript expression: rs's row shows admin state admin and
// weight (configured / in the kernel).
func rowIs(svc, rs, admin, weight string) string {
	return `(function (c) { return !!c && c[` + strconv.Itoa(liveAdmin) + `] === "` + admin + `" && c[` + strconv.Itoa(liveWeight) + `] === "` + weight + `" })(` + cellsJS(svc, rs) + `)`
}

// waitKernelWeight waits until the daemon's read of the kernel (/api/v1/status)
// gives real server rip of the web service the weight want.
func waitKernelWeight(t *testing.T, url, token, rip string, want uint32) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := status(t, url, token)
		got, found := uint32(0), false
		for _, s := range st.Services {
			for _, rs := range s.Servers {
				if s.Address == "198.18.0.100" && rs.Address == rip {
					got, found = rs.Weight, true
				}
			}
		}
		if found && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel's weight of %s: %d (in the table: %v) after 20 s, want %d", rip, got, found, want)
		}
		time.Sleep(time.Second)
	}
}

// rowOf is a JavaScript expression: the text of the row of the first table
// sel matches whose first cell is first.
func rowOf(sel, first string) string {
	return `(function () { var rows = document.querySelector("` + sel + `").rows;
		for (var i = 0; i < rows.length; i++) if (rows[i].cells[0].innerText.trim() === "` + first + `") return rows[i].innerText;
		return "" })()`
}

// dig walks a decoded JSON document by keys and indexes; nil when a step is missing.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}
