package panel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp/bgptest"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// bgpDirector is a daemon in BGP mode on the fake kernel, announcing two
// VIPs to a real GoBGP router on loopback.
func bgpDirector(t *testing.T) (*servertest.Rig, *bgptest.Router) {
	t.Helper()
	r := bgptest.StartRouter(t)
	g := servertest.Start(t)
	ctx := context.Background()
	rid, src := "198.18.0.1", "127.0.0.1"
	if _, err := g.Core.SetNode(ctx, server.Actor{Name: "root", Via: "cli"}, server.NodePatch{RouterID: &rid, BGPSource: &src}); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`{"settings": {"network": "dr", "bgp": {"asn": 65001, "peers": [{"address": "127.0.0.2", "port": %d, "asn": 65000, "hold_time": 9}],
	  "drain": {"quiet": 2, "timeout": 60}}},
	  "services": [{"name": "web", "protocol": "tcp", "address": "198.18.0.100", "port": 80,
	    "servers": [{"name": "r1", "address": "198.18.1.11"}, {"name": "r2", "address": "198.18.1.12", "weight": 2}]},
	   {"name": "dns", "protocol": "udp", "address": "198.18.0.101", "port": 53, "quorum": 2,
	    "servers": [{"name": "d1", "address": "198.18.1.21", "port": 53}, {"name": "d2", "address": "198.18.1.22", "port": 53, "health": "down"}]}]}`, r.Port)
	if resp, body := g.API(t, auth.Admin, "PUT", "/api/v1/state", doc); resp.StatusCode != 200 {
		t.Fatalf("PUT /state: %s %s", resp.Status, body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s := g.Core.BGPStatus(); s != nil && s.Announced == 1 && len(s.Peers) == 1 && s.Peers[0].Up && len(s.Fingerprints) == 2 {
			return g, r
		}
		if time.Now().After(deadline) {
			t.Fatalf("never announced: %+v", g.Core.BGPStatus())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reportFollowers has two followers report their Maglev fingerprints to g
// over its API (plain HTTP on loopback is a director call there): one
// with g's inputs, one whose kernel lists web's real servers the other
// way round.
func reportFollowers(t *testing.T, g *servertest.Rig) {
	t.Helper()
	own := g.Core.BGPStatus().Fingerprints
	for i, rid := range []string{"198.18.0.2", "198.18.0.3"} {
		fps := append([]bgp.ServiceFingerprint{}, own...)
		if i == 1 {
			for j := range fps {
				if fps[j].Service == "web" {
					fps[j].Fingerprint, fps[j].Inputs = "5eed5eed5eed5eed", "mh mh-port 198.18.1.12:80/2 198.18.1.11:80/1"
				}
			}
		}
		body, _ := json.Marshal(server.FingerprintReport{RouterID: rid, Services: fps})
		// Each with its own token: a report is kept by its caller's identity.
		if resp, b := g.API(t, []auth.Role{auth.Viewer, auth.Operator}[i], "POST", "/api/v1/bgp/fingerprints", string(body)); resp.StatusCode != 200 {
			t.Fatalf("POST /api/v1/bgp/fingerprints: %s %s", resp.Status, b)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s := g.Core.BGPStatus(); len(s.Directors) != 2 || !s.Mismatch; s = g.Core.BGPStatus() {
		if time.Now().After(deadline) {
			t.Fatalf("the reports never compared: %+v", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The BGP page and the overview's card, as HTML: what each role sees.
func TestBGPPageAndCard(t *testing.T) {
	g, _ := bgpDirector(t)
	viewer, admin := g.PanelLogin(t, "viewer"), g.PanelLogin(t, "admin")
	resp, body := g.Panel(t, viewer, "GET", "/bgp", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /bgp: %s", resp.Status)
	}
	for _, want := range []string{
		`<td>127.0.0.2</td><td>65000</td><td><span class="state st-up">established</span>`,
		`<code>198.18.0.100/32</code></td><td><span class="state st-up">announced</span>`,
		`<code>198.18.0.101/32</code></td><td><span class="state st-down">withdrawn</span></td><td class="wrap">below quorum: dns has 1 of 2 real servers up`,
		`<code>mh mh-port 198.18.1.12:80/2 198.18.1.11:80/1</code>`,
		"this director knows no other", `data-poll="/bgp/body"`, `href="/bgp" aria-current="page"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/bgp lacks %q", want)
		}
	}
	if strings.Contains(body, `action="/bgp/drain"`) {
		t.Error("a viewer is offered the drain button")
	}
	// Two followers report: one matches, one's web differs; each is named.
	reportFollowers(t, g)
	_, body = g.Panel(t, viewer, "GET", "/bgp/body", nil)
	for _, want := range []string{
		`<td>198.18.0.2</td><td>198.18.0.2</td><td class="small">from 127.0.0.1</td><td><span class="state st-up">match</span>`,
		`<tr class="problem"><td>198.18.0.3</td><td>198.18.0.3</td><td class="small">from 127.0.0.1</td><td><span class="state st-down">mismatch</span>`,
		`<td class="wrap small why">web</td>`,
		`<tr class="problem"><td>web</td><td>198.18.0.3</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/bgp/body with two followers lacks %q", want)
		}
	}
	if _, body := g.Panel(t, admin, "GET", "/bgp", nil); !strings.Contains(body, `action="/bgp/drain"`) {
		t.Error("an admin is not offered the drain button")
	}
	if resp, _ := g.Panel(t, viewer, "POST", "/bgp/drain", nil); resp.StatusCode != 403 {
		t.Errorf("a viewer's POST /bgp/drain: %s, want 403", resp.Status)
	}
	_, body = g.Panel(t, viewer, "GET", "/", nil)
	i := strings.Index(body, `id="bgp-card"`)
	if i < 0 || !strings.Contains(body[i:], "1/2 <span") || !strings.Contains(body[i:], "1 of 1") {
		t.Errorf("the overview's BGP card: %s", body[max(i, 0):min(max(i, 0)+800, len(body))])
	}
	// Outside BGP mode the page says so and the overview has no card.
	plain := servertest.Start(t)
	c := plain.PanelLogin(t, "viewer")
	if _, body := plain.Panel(t, c, "GET", "/bgp", nil); !strings.Contains(body, `id="bgp-off"`) {
		t.Error("/bgp without settings.bgp does not say so")
	}
	if _, body := plain.Panel(t, c, "GET", "/", nil); strings.Contains(body, "bgp-card") {
		t.Error("a BGP card outside BGP mode")
	}
}

// TestBrowserBGPDrain drains the director from the BGP page in headless
// Chromium: the page follows the drain without a reload while connections
// still arrive, until drained; the router sees the prepended path; the
// overview's card says drained. Screenshots bgp.png, bgp-drained.png and
// overview-bgp.png.
func TestBrowserBGPDrain(t *testing.T) {
	if testing.Short() {
		testenv.OptIn(t, "browser test skipped in -short mode")
	}
	g, r := bgpDirector(t)
	reportFollowers(t, g)
	b := browsertest.Start(t, 90*time.Second)
	b.Login(g.URL+"/bgp", "admin", g.Password, "#bgp-peers")
	if s := b.Text("#bgp-peers"); !strings.Contains(s, "established") || !strings.Contains(s, "127.0.0.2") {
		t.Errorf("sessions: %q", s)
	}
	if s := b.Text("#bgp-directors"); !strings.Contains(s, "198.18.0.3") || !strings.Contains(s, "mismatch") {
		t.Errorf("other directors: %q", s)
	}
	b.FitsWidth("the BGP page")
	b.Shot("bgp")
	key := ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: netip.MustParseAddr("198.18.0.100"), Port: 80}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { // the routers still send for 3 s (bounded)
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			g.Kernel.AddConns(key, 7)
			time.Sleep(100 * time.Millisecond)
		}
	})
	b.Do("drain", chromedp.Click(chromedp.CSS("#bgp-drain-button")), chromedp.WaitVisible(chromedp.CSS("#bgp-undrain")))
	if s := b.Text(".banner.flash"); !strings.Contains(s, "node drain started") {
		t.Errorf("the flash after the drain: %q", s)
	}
	b.MarkPage()
	b.WaitInPage("the page to show the drain in progress", `document.querySelector("#bgp-drain").textContent.includes("draining")`, `document.querySelector("#bgp-drain").textContent`, 20*time.Second)
	b.WaitInPage("the page to show drained", `document.querySelector("#bgp-drain").textContent.includes("drained")`, `document.querySelector("#bgp-drain").textContent`, 30*time.Second)
	if s := b.Text("#bgp-vips"); !strings.Contains(s, "de-preferred") {
		t.Errorf("VIPs while drained: %q", s)
	}
	if p, _ := r.ASPath(t, "198.18.0.100/32"); fmt.Sprint(p) != "[65001 65001 65001 65001]" {
		t.Errorf("AS path at the router: %v", p)
	}
	b.Shot("bgp-drained")
	b.Do("overview", chromedp.Navigate(g.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#bgp-card")))
	if s := b.Text("#bgp-card"); !strings.Contains(s, "drained") {
		t.Errorf("overview card: %q", s)
	}
	b.ShotWindow("overview-bgp")
	b.Do("undrain", chromedp.Navigate(g.URL+"/bgp"), chromedp.WaitVisible(chromedp.CSS("#bgp-undrain")), chromedp.Click(chromedp.CSS("#bgp-undrain")),
		chromedp.WaitVisible(chromedp.CSS("#bgp-drain-button")))
	// The runner takes the undrain within half a second; the page's poll shows it.
	b.MarkPage()
	b.WaitInPage("the page to show not drained", `document.querySelector("#bgp-drain").textContent.includes("not drained")`, `document.querySelector("#bgp-drain").textContent`, 20*time.Second)
}
