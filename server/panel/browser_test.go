package panel

import (
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// demoState is a small director with something to look at: a degraded
// service, a disabled one, a drained server, thresholds.
func demoState() *ipvsmgr.State {
	w := func(n int) *int { return &n }
	off := false
	return &ipvsmgr.State{Settings: ipvsmgr.Settings{Network: "dr"}, Services: []ipvsmgr.Service{
		{Name: "www", Address: "198.18.0.100", Port: 80, Interface: "eth0", Scheduler: "wlc", Servers: []ipvsmgr.Server{
			{Name: "web1", Address: "198.18.0.11", Weight: w(3)}, {Name: "web2", Address: "198.18.0.12", Weight: w(3)},
			{Name: "web3", Address: "198.18.0.13", Weight: w(1), UpperThreshold: 40, LowerThreshold: 20}}},
		{Name: "www-tls", Address: "198.18.0.100", Port: 443, Interface: "eth0", Scheduler: "sh", SchedulerFlags: []string{"port"}, Persistence: 300, Servers: []ipvsmgr.Server{
			{Name: "web1", Address: "198.18.0.11", Weight: w(3)}, {Name: "web2", Address: "198.18.0.12", Weight: w(0)},
			{Name: "web4", Address: "198.18.0.14", Weight: w(2)}}},
		{Name: "dns", Protocol: "udp", Address: "198.18.0.53", Port: 53, Scheduler: "rr", OnePacket: true, Servers: []ipvsmgr.Server{
			{Name: "ns1", Address: "198.18.0.21"}, {Name: "ns2", Address: "198.18.0.22"}}},
		{Name: "mail", Address: "198.18.0.25", Port: 25, Forwarding: "nat", Servers: []ipvsmgr.Server{
			{Name: "mx1", Address: "10.0.0.31", Port: 2525}, {Name: "mx2", Address: "10.0.0.32", Port: 2525, Enabled: &off}}},
		{Name: "legacy", Address: "198.18.0.99", Port: 8080, Enabled: &off, Servers: []ipvsmgr.Server{{Address: "198.18.0.41"}}},
	}}
}

// The whole operator path in a real headless Chromium.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		testenv.OptIn(t, "browser test skipped in -short mode")
	}
	// Real servers answer no SSH here (every dial refused): Verify reports them unreachable.
	var evs *events.Log
	e := newEnvTimed(t, false, refusingSSH(t), withEvents(t, &evs))
	// The kernel refuses one real server, as a real one refuses an unreachable DR address.
	e.kernel.setFailOn(func(op ipvsmgr.Op) error {
		if op.Dest != nil && op.Dest.Key.Addr.String() == "198.18.0.14" && op.Kind == ipvsmgr.OpAddDest {
			return errString("invalid argument (address not unicast)")
		}
		return nil
	})
	e.seed(t, demoState())
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close) // after the browser's
	b := browsertest.Start(t, 90*time.Second)
	ctx := b.Ctx
	u := srv.URL
	do, text, shot := b.Do, b.Text, b.Shot
	waitJS := func(what, expr string) {
		t.Helper()
		b.WaitJS(what, expr, 15*time.Second)
	}

	// chartsFit: every label of the page's charts inside its SVG, and the
	// value labels left of the plot (a wide one, "31.8 MB", once started
	// left of the SVG and was cut to "1.8 MB").
	chartsFit := func(page string) {
		t.Helper()
		bad, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(function(){var out=[],n=0;`+
			`document.querySelectorAll("svg.chart").forEach(function(svg){var left=svg.querySelector("line").x1.baseVal.value;`+
			`svg.querySelectorAll("text").forEach(function(el){var b=el.getBBox();n++;`+
			`var value=el.getAttribute("text-anchor")==="end"&&el.x.baseVal[0].value<left;`+
			`if(b.x<0||b.x+b.width>610||value&&b.x+b.width>left)`+
			`out.push(JSON.stringify(el.textContent)+" from "+b.x.toFixed(1)+" to "+(b.x+b.width).toFixed(1)+", plot from "+left)})});`+
			`return n?out.join("; "):"no chart labels"})()`))
		if err != nil {
			t.Fatalf("chart labels of %s: %v", page, err)
		}
		if bad != "" {
			t.Errorf("%s: chart labels outside their chart: %s", page, bad)
		}
	}
	// Log in.
	b.Login(u+"/live", "alice", "pw-alice", "#live")
	// Add a virtual service with two real servers, through the forms.
	do("add a service", chromedp.Navigate(u+"/services/new"),
		chromedp.SendKeys(chromedp.CSS("#f-name"), "shop"),
		chromedp.SendKeys(chromedp.CSS("#f-address"), "198.18.0.110"),
		chromedp.SendKeys(chromedp.CSS("#f-port"), "80"),
		chromedp.SetValue(chromedp.CSS("#f-scheduler"), "wrr"),
		chromedp.Click(chromedp.CSS("button.primary")),
		chromedp.WaitVisible(chromedp.CSS("a[href='/services/shop/servers/new']")))
	for _, rs := range [][2]string{{"shop1", "198.18.0.61"}, {"shop2", "198.18.0.62"}} {
		do("add "+rs[0], chromedp.Navigate(u+"/services/shop/servers/new"),
			chromedp.SendKeys(chromedp.CSS("#r-name"), rs[0]),
			chromedp.SendKeys(chromedp.CSS("#r-address"), rs[1]),
			chromedp.Click(chromedp.CSS("button.primary")),
			chromedp.WaitVisible(chromedp.CSS("a[href='/services/shop/servers/"+rs[0]+"']")))
	}
	// A form error shows beside its field.
	do("bad weight", chromedp.Navigate(u+"/services/shop/servers/shop1/edit"),
		chromedp.SetValue(chromedp.CSS("#r-weight"), "70000"),
		chromedp.Click(chromedp.CSS("button.primary")),
		chromedp.WaitVisible(chromedp.CSS("#weight-err")))
	if s := text("#weight-err"); !strings.Contains(s, "out of range") {
		t.Fatalf("weight error: %q", s)
	}
	// The live table shows them.
	do("live", chromedp.Navigate(u+"/live?q=shop"), chromedp.WaitVisible(chromedp.CSS("a[href='/services/shop/servers/shop2']")))
	// Drain shop1, then watch its connections count down without a reload.
	do("drain", chromedp.Click(chromedp.CSS("button[formaction='/services/shop/servers/shop1/drain']")),
		chromedp.WaitVisible(chromedp.CSS(".banner.flash")))
	b.MarkPage()
	rowText := `(function(){var a=document.querySelector("a[href='/services/shop/servers/shop1']");return a?a.closest("tr").innerText:""})()`
	first := b.Eval(rowText)
	b.WaitInPage("the drain", `/drained/.test(`+rowText+`)`, rowText, 20*time.Second)
	if !strings.Contains(first, "draining") && !strings.Contains(first, "drained") {
		t.Errorf("right after the drain the row said %q", first)
	}
	// Stage an edit, see its diff, apply it.
	do("stage", chromedp.Navigate(u+"/services/shop/servers/shop2/edit"),
		chromedp.SetValue(chromedp.CSS("#r-weight"), "7"),
		chromedp.Click(chromedp.CSS("button[name=stage]")),
		chromedp.WaitVisible(chromedp.CSS(".banner.draft")),
		chromedp.Navigate(u+"/draft"),
		chromedp.WaitVisible(chromedp.CSS("#draft-diff")))
	if s := text("#draft-diff"); !strings.Contains(s, "-r 198.18.0.62:80 -g -w 7") {
		t.Fatalf("draft diff: %q", s)
	}
	shot("draft-diff")
	do("apply", chromedp.Click(chromedp.CSS("form[action='/draft/apply'] button")), chromedp.WaitVisible(chromedp.CSS(".banner.flash")))
	st, _, _ := e.core.State(ctx)
	if w := st.Services[5].Servers[1].EffectiveWeight(); w != 7 {
		t.Fatalf("after apply shop2 weight %d", w)
	}
	// History, and roll back the draft's revision in one click.
	revs, _ := e.core.History(ctx, 2)
	prev := revs[1].ID
	shot("history")
	do("roll back", chromedp.Click(chromedp.CSS("form[action='/history/"+itoa64(prev)+"/rollback'] button")))
	waitJS("the rollback banner", `(function(){var b=document.querySelector(".banner.flash");return !!b && b.innerText.indexOf("rolled back to revision `+itoa64(prev)+`")>=0})()`)
	st, _, _ = e.core.State(ctx)
	if w := st.Services[5].Servers[1].EffectiveWeight(); w != 1 {
		t.Fatalf("after rollback shop2 weight %d", w)
	}
	// Deactivate shop2; the why view names the reason.
	do("deactivate", chromedp.Navigate(u+"/services/shop/servers/shop2"),
		chromedp.Click(chromedp.CSS("form[action='/services/shop/servers/shop2/disable'] button")),
		chromedp.WaitVisible(chromedp.CSS("form[action='/services/shop/servers/shop2/enable']")),
		chromedp.Navigate(u+"/services/shop/servers/shop2/why"),
		chromedp.WaitVisible(chromedp.CSS("#why-reasons")))
	if s := text("#why-reasons"); !strings.Contains(s, "Real server admin state: maint") {
		t.Fatalf("why: %q", s)
	}
	// Give shop a health check through its form (the type shows only its
	// fields), then test it on a real server's page: the panel's own
	// listener on 127.0.0.1 passes.
	_, port, _ := strings.Cut(strings.TrimPrefix(u, "http://"), ":")
	hidden := func(sel string) bool {
		t.Helper()
		h, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("`+sel+`").closest(".row").hidden`))
		if err != nil {
			t.Fatalf("is %s hidden: %v", sel, err)
		}
		return h
	}
	do("edit the check", chromedp.Navigate(u+"/services/shop/edit"), chromedp.WaitVisible(chromedp.CSS("#c-check_type")))
	if !hidden("#c-check_interval") || !hidden("#c-check_path") {
		t.Fatal("with no check type, the check's fields are shown")
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(function(){var s=document.querySelector("#c-check_type");s.value="http";`+
		`s.dispatchEvent(new Event("change",{bubbles:true}));return true})()`)); err != nil {
		t.Fatal(err)
	}
	if hidden("#c-check_path") || !hidden("#c-check_send") || hidden("#c-check_timeout") {
		t.Fatal("an http check shows the wrong fields")
	}
	do("save the check", chromedp.SetValue(chromedp.CSS("#c-check_address"), "127.0.0.1"),
		chromedp.SetValue(chromedp.CSS("#c-check_port"), port),
		chromedp.SetValue(chromedp.CSS("#c-check_path"), "/login"),
		chromedp.SetValue(chromedp.CSS("#c-check_expect_status"), "200"),
		chromedp.SetValue(chromedp.CSS("#c-check_timeout"), "0.01"),
		chromedp.Click(chromedp.CSS("button.primary")),
		chromedp.WaitVisible(chromedp.CSS("#check_timeout-err")))
	if s := text("#check_timeout-err"); !strings.Contains(s, "out of range 0.1..3600") {
		t.Fatalf("timeout error: %q", s)
	}
	shot("service-check-error")
	do("save the check again", chromedp.SetValue(chromedp.CSS("#c-check_timeout"), "0.5"),
		chromedp.Click(chromedp.CSS("button.primary")),
		chromedp.WaitVisible(chromedp.CSS("#check-facts")))
	if s := text("#check-facts"); !strings.Contains(s, "/login") || !strings.Contains(s, "http") {
		t.Fatalf("the service page's check: %q", s)
	}
	do("test it now", chromedp.Navigate(u+"/services/shop/servers/shop1"),
		chromedp.Click(chromedp.CSS("#check-now")),
		chromedp.WaitVisible(chromedp.CSS("#check-result")))
	if s := text("#check-result"); !strings.Contains(s, "pass") || !strings.Contains(s, "127.0.0.1:"+port) || !strings.Contains(s, "HTTP 200") {
		t.Fatalf("check result: %q", s)
	}
	chartsFit("check-test")
	shot("check-test")
	// A real server's overrides show the fields of the type it inherits.
	do("server's check", chromedp.Navigate(u+"/services/shop/servers/shop1/edit"), chromedp.WaitVisible(chromedp.CSS("#c-check_type")))
	if hidden("#c-check_path") || !hidden("#c-check_command") {
		t.Fatal("a server of an http service is not shown the http fields to override")
	}
	shot("server-edit")
	// Real-server preparation: Verify all, clicked, runs through the core
	// and the page it comes back to shows each server's result.
	do("verify all", chromedp.Navigate(u+"/realservers"), chromedp.Click(chromedp.CSS("#verify-all button.primary")),
		chromedp.WaitVisible(chromedp.CSS(".banner.flash")))
	if s := text(".banner.flash"); !strings.Contains(s, "Verified:") || !strings.Contains(s, "unreachable") {
		t.Fatalf("verify all: flash %q", s)
	}
	if s := text("table"); !strings.Contains(s, "connection refused") {
		t.Fatalf("verify all: the table does not show the SSH error: %q", s)
	}
	shot("realservers-verified")
	// Screenshots of the main screens, for docs/panel.md and for a look.
	do("why (refused server)", chromedp.Navigate(u+"/services/www-tls/servers/web4/why"), chromedp.WaitVisible(chromedp.CSS("#why-reasons")))
	waitFor(t, "sparklines", func() bool { return strings.Contains(e.get(t, "alice", "/live").Body, "<polyline") })
	shot("why")
	do("overview", chromedp.Navigate(u+"/"), chromedp.WaitVisible(chromedp.CSS(".tiles")))
	shot("overview")
	// The event log: the revision seeded and the checks' verdicts, newest
	// first, the down ones marked.
	waitFor(t, "a real server's event", func() bool {
		got, _ := evs.Since(ctx, 0, events.Filter{Types: []string{"realserver."}})
		return len(got) > 0
	})
	do("events", chromedp.Navigate(u+"/events"), chromedp.WaitVisible(chromedp.CSS("#events table")))
	if s := text("#events table"); !strings.Contains(s, "revision.stored") || !strings.Contains(s, "realserver.") {
		t.Fatalf("the event log: %q", s)
	}
	b.FitsWidth("the event log")
	shot("events")
	do("live", chromedp.Navigate(u+"/live"), chromedp.WaitVisible(chromedp.CSS("#live table")))
	b.FitsWidth("the live table")
	shot("live")
	do("edit", chromedp.Navigate(u+"/services/www-tls/edit"), chromedp.WaitVisible(chromedp.CSS("#f-name")))
	shot("service-edit")
	do("service", chromedp.Navigate(u+"/services/www"), chromedp.WaitVisible(chromedp.CSS("table")))
	chartsFit("service")
	shot("service")
	// Redundancy on the settings page: enable it with a VRID and an
	// interface, save, then set this director's priority beside its state.
	before, _, _ := e.core.State(ctx)
	fieldsHidden := func() bool {
		t.Helper()
		h, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#redundancy-fields").hidden`))
		if err != nil {
			t.Fatalf("are the pair's fields hidden: %v", err)
		}
		return h
	}
	do("settings", chromedp.Navigate(u+"/settings"), chromedp.WaitVisible(chromedp.CSS("#r-redundancy")))
	if !fieldsHidden() {
		t.Fatal("with redundancy off, the pair's fields are shown")
	}
	do("redundancy on", chromedp.Click(chromedp.CSS("#r-redundancy")))
	if fieldsHidden() {
		t.Fatal("with redundancy on, the pair's fields are hidden")
	}
	do("redundancy",
		chromedp.SendKeys(chromedp.CSS("#r-vrid"), "51"),
		chromedp.SendKeys(chromedp.CSS("#r-interface"), "eth0"),
		chromedp.SendKeys(chromedp.CSS("#r-peers"), "198.18.0.1\n198.18.0.2"),
		chromedp.Click(chromedp.CSS("#redundancy-form button.primary")))
	// The page after each post, told apart by its flash (the first one's
	// stays on the page until the second post's answer replaces it).
	flashSays := func(re string) string {
		return `(function(){var f=document.querySelector(".banner.flash");return !!f&&/` + re + `/.test(f.innerText)})()`
	}
	waitJS("the pair saved", flashSays("^redundancy"))
	do("priority", chromedp.SetValue(chromedp.CSS("#n-priority"), "150"),
		chromedp.Click(chromedp.CSS("#node-form button")))
	waitJS("the priority set", flashSays("priority is now 150"))
	st, _, _ = e.core.State(ctx)
	if r := st.Settings.Redundancy; r == nil || r.VRID != 51 || r.Interface != "eth0" || len(r.UnicastPeers) != 2 || !reflect.DeepEqual(st.Services, before.Services) {
		t.Fatalf("after the redundancy form: %+v, %d services", r, len(st.Services))
	}
	if n, err := e.core.NodeSettings(ctx); err != nil || n.Priority != 150 {
		t.Fatalf("after the priority form: %+v %v", n, err)
	}
	b.FitsWidth("the settings page")
	shot("settings-redundancy")
	// Dark mode, as a browser set to prefer it asks (the theme toggle aside).
	b.Dark()
	do("live, dark", chromedp.Navigate(u+"/live"), chromedp.WaitVisible(chromedp.CSS("#live table")))
	shot("live-dark")
	do("overview, dark", chromedp.Navigate(u+"/"), chromedp.WaitVisible(chromedp.CSS(".tiles")))
	shot("overview-dark")
	do("check test, dark", chromedp.Navigate(u+"/services/shop/servers/shop1"),
		chromedp.Click(chromedp.CSS("#check-now")),
		chromedp.WaitVisible(chromedp.CSS("#check-result")))
	shot("check-test-dark")
}
