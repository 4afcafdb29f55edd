package panel

import (
	"context"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"
	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"
)

// The live table's real server rows, a real server's page and its "why"
// say when each check last ran, from the daemon's real tcp checks of two
// loopback listeners.
func TestBrowserCheckAge(t *testing.T) {
	if testing.Short() {
		testenv.OptIn(t, "browser test skipped in -short mode")
	}
	e := newEnv(t)
	var servers []ipvsmgr.Server
	for i := range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		ipvsmgrtest.AcceptAndClose(ln)
		port := ln.Addr().(*net.TCPAddr).Port
		servers = append(servers, ipvsmgr.Server{Name: "r" + strconv.Itoa(i+1), Address: "127.0.0.1", Port: port})
	}
	st, err := ipvsmgr.DecodeState(strings.NewReader(`{"services":[{"name":"web","address":"198.18.0.100","port":80,"forwarding":"nat",
	 "check":{"type":"tcp","interval":0.5,"timeout":0.5,"warmup":0,"rise":1,"fall":1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	st.Services[0].Servers = servers
	e.seed(t, st)
	waitFor(t, "both checks' first results", func() bool {
		hs, err := e.core.HealthByServer(context.Background())
		if err != nil || len(hs) != 2 {
			return false
		}
		for _, h := range hs {
			if h.LastCheck == nil {
				return false
			}
		}
		return true
	})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	b := browsertest.Start(t, 60*time.Second)
	u := srv.URL
	b.Login(u+"/live", "alice", "pw-alice", "#live")
	b.WaitJS("the live rows' check ages", `document.querySelectorAll("#live .check-age").length === 2 && `+
		`Array.from(document.querySelectorAll("#live .check-age")).every(function(el){return /^[0-9.]+s ago$/.test(el.textContent)})`, 15*time.Second)
	b.Shot("check-age-live")
	b.Do("open r1's page", chromedp.Navigate(u+"/services/web/servers/r1"), chromedp.WaitVisible(chromedp.CSS("#check-age")))
	if got := b.Text("#check-age"); !strings.HasPrefix(got, "last checked ") || !strings.HasSuffix(got, " ago") {
		t.Errorf("r1's page: check age %q", got)
	}
	b.Do("open r1's why", chromedp.Navigate(u+"/services/web/servers/r1/why"), chromedp.WaitVisible(chromedp.CSS("main")))
	if got := b.Text("main"); !strings.Contains(got, "last checked ") {
		t.Errorf("r1's why does not say when it was last checked:\n%s", got)
	}
}
