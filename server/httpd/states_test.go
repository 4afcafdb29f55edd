package httpd_test

import (
	"encoding/json"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// statesDoc has a service and real server in each word a tile can say:
// up, degraded (a server forced down, so out of the kernel), disabled,
// drained, all down (no servers) and a disabled service.
const statesDoc = `{"settings": {"network": "dr"}, "services": [
  {"name": "web", "protocol": "tcp", "address": "198.18.0.100", "port": 80, "servers": [
    {"name": "r1", "address": "198.18.0.11"},
    {"name": "r2", "address": "198.18.0.12", "health": "down"},
    {"name": "r3", "address": "198.18.0.13", "enabled": false},
    {"name": "r4", "address": "198.18.0.14", "weight": 0}]},
  {"name": "dns", "protocol": "udp", "address": "198.18.0.53", "port": 53, "servers": [{"name": "ns1", "address": "198.18.0.21"}]},
  {"name": "off", "protocol": "tcp", "address": "198.18.0.101", "port": 80, "enabled": false, "servers": [{"name": "o1", "address": "198.18.0.31"}]},
  {"name": "empty", "protocol": "tcp", "address": "198.18.0.102", "port": 80, "servers": []}]}`

// The words of every service and real server are the core's: GET
// /api/v1/status's "states" and the panel's live table say the same word
// and the same reason for each.
func TestStateWordsAgreeInTheAPIAndThePanel(t *testing.T) {
	g := servertest.Start(t)
	if resp, body := do(t, g, g.Tokens[auth.Admin], "PUT", "/api/v1/state", statesDoc); resp.StatusCode != 200 {
		t.Fatalf("PUT /state: %s %s", resp.Status, body)
	}
	viewer := g.Tokens[auth.Viewer]
	var states []server.ServiceState
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := do(t, g, viewer, "GET", "/api/v1/status", "")
		var v server.StatusView
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		states = v.States
		if len(states) == 4 && states[0].State == server.StateDegraded && states[1].State == server.StateUp {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the states never settled: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := map[string]string{"web": "degraded", "web/r1": "up", "web/r2": "down", "web/r3": "disabled", "web/r4": "drained",
		"dns": "up", "dns/ns1": "up", "off": "disabled", "off/o1": "disabled", "empty": "all down"}
	_, page := do(t, g, viewer, "GET", "/live", "", "Accept", "text/html")
	seen := 0
	check := func(key, href, state, reason string) {
		t.Helper()
		if want[key] != state {
			t.Errorf("%s: the API says %q, want %q", key, state, want[key])
		}
		m := regexp.MustCompile(regexp.QuoteMeta(`<a href="`+href+`">`) + `[^\n]*?<span class="state [^"]*">([^<]*)</span>(?: <span class="why">([^<]*)</span>)?`).FindStringSubmatch(page)
		if m == nil {
			t.Errorf("%s: no row in the panel's live table", key)
			return
		}
		if m[1] != state || html.UnescapeString(m[2]) != reason {
			t.Errorf("%s: the panel says %q (%q), the API %q (%q)", key, m[1], m[2], state, reason)
		}
		seen++
	}
	for _, s := range states {
		check(s.ID, "/services/"+s.ID, s.State, s.Reason)
		for _, r := range s.Servers {
			check(s.ID+"/"+r.ID, "/services/"+s.ID+"/servers/"+r.ID, r.State, r.Reason)
		}
	}
	if seen != len(want) {
		t.Errorf("compared %d rows, want %d", seen, len(want))
	}
	if !strings.Contains(states[0].Reason, "1 of 2 real servers not taking traffic") {
		t.Errorf("web's reason: %q", states[0].Reason)
	}
}
