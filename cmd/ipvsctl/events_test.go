package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// ipvsctl events prints the same events through the API as through the
// daemon's socket, filters by type and subject, refuses an unknown type
// naming it, and reads a database without a daemon from the store.
func TestEventsVerb(t *testing.T) {
	g := servertest.Start(t)
	remote := map[string]string{"USER": "alice", "IPVSCTL_SERVER": g.URL, "IPVSCTL_TOKEN": g.Tokens[auth.Admin]}
	if r := runWith(t, remote, "apply", "-f", writeDoc(t, webDoc)); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.stderr)
	}
	g.Events.Publish(events.Event{Type: events.ServerDown, Subject: "-t 198.18.0.100:80 -r 198.18.0.12:80", Message: "real server r2 down: HTTP 503"})
	remote["IPVSCTL_TOKEN"] = g.Tokens[auth.Viewer]
	local := map[string]string{"USER": "alice", "IPVSCTL_DB": g.DB}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"events"}, 0, "revision.stored"},
		{[]string{"events", "--type", "realserver.", "--subject", "198.18.0.12"}, 0, "real server r2 down: HTTP 503"},
		{[]string{"events", "--type", "realserver.gone"}, 2, `"realserver.gone" is not an event type`},
	} {
		r := runWith(t, remote, c.args...)
		if l := runWith(t, local, c.args...); l != r {
			t.Errorf("ipvsctl %s: on the director %+v, through the API %+v", strings.Join(c.args, " "), l, r)
		}
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("ipvsctl %s: %d %s%s, want %d %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.code, c.want)
		}
	}
	r := runWith(t, remote, "events", "--json", "--type", "realserver.down")
	var e server.Event
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &e) != nil || e.ID == 0 || e.Message != "real server r2 down: HTTP 503" {
		t.Errorf("events --json: %q", r.stdout)
	}

	// Without a daemon: what the database keeps.
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveEvents(context.Background(), []events.Event{{ID: 7, Type: events.BGPWithdrawn, Subject: "198.18.0.10/32", Message: "route 198.18.0.10/32 withdrawn: drained"}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if r := runWith(t, map[string]string{"USER": "alice", "IPVSCTL_DB": db}, "events", "--after", "6"); r.code != 0 || !strings.HasPrefix(r.stdout, "7  ") || !strings.Contains(r.stdout, "withdrawn: drained") {
		t.Errorf("events on a database without a daemon: %+v", r)
	}
}
