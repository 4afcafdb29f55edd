package panel

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"
)

// The settings page's Alert delivery card, in headless Chromium: each
// destination of settings.alerts as the running daemon's sender last saw
// it, a webhook that takes its posts delivering, one that refuses them
// failing with the receiver's answer, the relay with nothing sent; it fits
// the window (settings-alerts.png).
func TestBrowserAlertDelivery(t *testing.T) {
	if testing.Short() {
		testenv.OptIn(t, "browser test skipped in -short mode")
	}
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(ok.Close)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such channel", http.StatusBadRequest)
	}))
	t.Cleanup(refusing.Close)
	var evs *events.Log
	e := newEnvTimed(t, false, withEvents(t, &evs))
	st := webState()
	st.Settings.Alerts = &ipvsmgr.Alerts{SMTP: &ipvsmgr.SMTPAlerts{Server: "127.0.0.1", Port: 1, To: []string{"ops@example.test"}},
		Webhooks: []ipvsmgr.Webhook{{URL: ok.URL, Types: []string{"realserver."}}, {URL: refusing.URL, Types: []string{"realserver."}}}}
	e.seed(t, st)
	waitFor(t, "both webhooks' results", func() bool {
		evs.Publish(events.Event{Type: events.ServerDown, Subject: "-t 198.18.0.100:80 -r 198.18.0.11:80", Message: "real server r1 down"})
		ds := e.core.AlertDeliveries()
		return len(ds) == 3 && ds[1].Sent > 0 && ds[2].Failed > 0
	})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	b := browsertest.Start(t, 60*time.Second)
	b.Login(srv.URL+"/settings", "vic", "pw-vic", "#alerts")
	rows := strings.Split(b.Eval(`Array.from(document.querySelectorAll("#alerts tbody tr")).map(r => r.innerText.replace(/\s+/g, " ")).join("\n")`), "\n")
	want := []string{"smtp 127.0.0.1:1 nothing sent yet never none 0 0 0 0",
		"webhook " + ok.URL + " delivering ", "webhook " + refusing.URL + " failing never "}
	if len(rows) != 3 {
		t.Fatalf("the card's rows: %q", rows)
	}
	for i, w := range want {
		if !strings.HasPrefix(rows[i], w) {
			t.Errorf("row %d: %q, want it to begin %q", i, rows[i], w)
		}
	}
	if !strings.Contains(rows[2], "answered 400 Bad Request") {
		t.Errorf("the failing webhook's row has no receiver's answer: %q", rows[2])
	}
	b.FitsWidth("the settings page with the Alert delivery card")
	b.Do("scroll to the card", chromedp.ScrollIntoView(chromedp.CSS("#alerts")))
	b.ShotWindow("settings-alerts")
}
