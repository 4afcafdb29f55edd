package panel

import (
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// The settings page's Redundancy card: not configured, configured without
// a running VRRP (no daemon here), and a backup following its master.
func TestRedundancyCard(t *testing.T) {
	e := newEnv(t)
	st := webState()
	e.seed(t, st)
	if page := e.get(t, "vic", "/settings").Body; !strings.Contains(page, `id="redundancy-role">not configured</span> This director runs alone`) {
		t.Fatalf("settings without a pair: %s", excerpt(page[strings.Index(page, `id="redundancy"`):]))
	}
	no := false
	st.Settings.Redundancy = &ipvsmgr.Redundancy{VRID: 51, Interface: "eth0", Peers: []string{"198.18.0.1", "198.18.0.2"}, Preempt: &no}
	e.seed(t, st)
	page := e.get(t, "vic", "/settings").Body
	for _, want := range []string{`id="redundancy-role">not running</span>`, "<dt>Priority</dt><dd>100, role auto (ipvsctl node set)</dd>",
		"<dd>VRID 51 on eth0, an advert every 1 s; does not preempt</dd>", "<dd>198.18.0.1, 198.18.0.2 (unicast adverts)</dd>"} {
		if !strings.Contains(page, want) {
			t.Errorf("settings of a pair lack %q: %s", want, excerpt(page[strings.Index(page, `id="redundancy"`):]))
		}
	}

	age := 0.4
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	node := &server.NodeView{NodeSettings: server.NodeSettings{Priority: 90, Role: "auto"}, Redundancy: &server.RedundancyStatus{
		Role: "backup", Master: "198.18.0.1", MasterPriority: 110, LastAdvertAge: &age, VIPs: []string{"198.18.0.100"},
		SyncDaemon:  server.SyncDaemonStatus{Enabled: true, Want: "backup", Running: []string{"backup"}},
		Replication: &server.ReplicationStatus{Peer: "https://198.18.0.1:3636", Connected: true, InSync: true, PeerRevision: 7},
		Transitions: []server.RedundancyTransition{{At: at, Family: "ipv4", From: "initialize", To: "backup", Reason: "started"},
			{At: at.Add(time.Second), Family: "ipv4", From: "backup", To: "master", Reason: "no advert for 3.6 s"},
			{At: at.Add(2 * time.Second), Family: "ipv4", From: "master", To: "backup", Reason: "priority 110 heard"}}}}
	c := redundancyCardOf(&ipvsmgr.Redundancy{VRID: 51, Interface: "eth0", AdvertInterval: 0.5, PreemptDelay: 30}, node)
	var got []string
	for _, f := range c.Facts {
		got = append(got, f.Label+": "+f.Value)
	}
	want := []string{"Priority: 90, role auto (ipvsctl node set)", "Virtual router: VRID 51 on eth0, an advert every 0.5 s; preempts after 30 s",
		"Peers: any, by multicast", "Master: 198.18.0.1 (priority 110), last advert 0.4 s ago", "VIPs carried by the pair: 198.18.0.100",
		"Connection sync: wants backup, running backup", "Desired state: from https://198.18.0.1:3636: in sync at its revision 7"}
	if !c.Configured || c.Role != "backup" || c.RoleClass != "st-enabled" || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("card: %s %s %v\n%s\nwant\n%s", c.Role, c.RoleClass, c.Configured, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(c.Transitions) != 3 || c.Transitions[0].To != "backup" || c.Transitions[2].To != "backup" || c.Transitions[1].To != "master" {
		t.Errorf("transitions, newest first: %+v", c.Transitions)
	}
}
