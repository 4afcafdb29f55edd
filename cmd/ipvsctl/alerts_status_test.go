package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// ipvsctl status shows each alert destination of a running daemon and how
// its deliveries fare, through the API (GET /api/v1/status) as on the
// director: a webhook that took its post, one that refused it with the
// receiver's answer, the mail relay with nothing to send yet.
func TestStatusShowsAlertDeliveries(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ok.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such channel", http.StatusBadRequest)
	}))
	defer refusing.Close()
	g := servertest.Start(t)
	remote := map[string]string{"USER": "alice", "IPVSCTL_SERVER": g.URL, "IPVSCTL_TOKEN": g.Tokens[auth.Admin]}
	doc := fmt.Sprintf(`{"settings": {"alerts": {"smtp": {"server": "127.0.0.1", "port": 1, "to": ["ops@example.test"]},
  "webhooks": [{"url": %q, "types": ["realserver."]}, {"url": %q, "types": ["realserver."]}]}},
  "services": [{"name": "web", "address": "198.18.0.100", "port": 80, "servers": [{"address": "198.18.0.11"}]}]}`, ok.URL, refusing.URL)
	if r := runWith(t, remote, "apply", "-f", writeDoc(t, doc)); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.stderr)
	}
	remote["IPVSCTL_TOKEN"] = g.Tokens[auth.Viewer]
	var v server.StatusView
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Published until the alerter (started with the daemon) follows the
		// state with the webhooks: one event delivered is enough.
		g.Events.Publish(events.Event{Type: events.ServerDown, Subject: "-t 198.18.0.100:80 -r 198.18.0.11:80", Message: "real server down"})
		r := runWith(t, remote, "status", "--json")
		if r.code != 0 {
			t.Fatalf("status --json: %d %s", r.code, r.stderr)
		}
		v = server.StatusView{}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Alerts) == 3 && v.Alerts[1].Sent > 0 && v.Alerts[2].Failed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed both webhooks' results: %+v", v.Alerts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mail, hook, bad := v.Alerts[0], v.Alerts[1], v.Alerts[2]
	if mail.Kind != "smtp" || mail.Destination != "127.0.0.1:1" || mail.Sent+mail.Failed+mail.Dropped != 0 || mail.LastOK != nil {
		t.Errorf("the relay: %+v, want listed with nothing sent", mail)
	}
	if hook.Kind != "webhook" || hook.Destination != ok.URL || hook.LastOK == nil || hook.Failing() || hook.Failed != 0 {
		t.Errorf("the webhook that takes posts: %+v", hook)
	}
	if bad.Destination != refusing.URL || !bad.Failing() || !strings.Contains(bad.LastError, "400") || bad.Sent != 0 {
		t.Errorf("the webhook that refuses: %+v, want failing with its 400", bad)
	}
	r := runWith(t, remote, "status")
	for _, want := range []string{
		"Alerts: smtp 127.0.0.1:1: 0 sent, 0 failed, 0 dropped, 0 queued\n",
		"Alerts: webhook " + ok.URL + ": ",
		"Alerts: webhook " + refusing.URL + ": 0 sent, ",
		" (failing)\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status has no %q:\n%s", want, r.stdout)
		}
	}
	if local := runWith(t, map[string]string{"USER": "alice", "IPVSCTL_DB": g.DB}, "status"); !strings.Contains(local.stdout, "Alerts: webhook "+refusing.URL) {
		t.Errorf("status on the director (through the daemon's socket) has no alerts:\n%s%s", local.stdout, local.stderr)
	}
}
