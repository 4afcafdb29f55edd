package panel

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"
)

// The settings page's Redundancy card: not configured, configured (the
// daemon's VRRP cannot start here), not running yet, and a backup
// following its master.
func TestRedundancyCard(t *testing.T) {
	e := newEnv(t)
	st := webState()
	e.seed(t, st)
	if page := e.get(t, "vic", "/settings").Body; !strings.Contains(page, `id="redundancy-role">not configured</span> This director runs alone`) {
		t.Fatalf("settings without a pair: %s", excerpt(page[strings.Index(page, `id="redundancy"`):]))
	}
	no := false
	st.Settings.Redundancy = &ipvsmgr.Redundancy{VRID: 51, Interface: "eth0", UnicastPeers: []string{"198.18.0.1", "198.18.0.2"}, Preempt: &no}
	e.seed(t, st)
	var page string
	waitFor(t, "the daemon to take the pair's settings", func() bool {
		page = e.get(t, "vic", "/settings").Body
		return strings.Contains(page, `id="redundancy-role">initialize</span>`)
	})
	for _, want := range []string{"<dt>Priority</dt><dd>100, role auto (ipvsctl node set)</dd>",
		"<dd>VRID 51 on eth0, an advert every 1 s; does not preempt</dd>", "<dd>198.18.0.1, 198.18.0.2</dd>"} {
		if !strings.Contains(page, want) {
			t.Errorf("settings of a pair lack %q: %s", want, excerpt(page[strings.Index(page, `id="redundancy"`):]))
		}
	}

	// Configured, before the daemon's VRRP reports (or with none).
	if c := redundancyCardOf(st.Settings.Redundancy, &server.NodeView{NodeSettings: server.NodeSettings{Priority: 100, Role: "auto"}}); c.Role != "not running" || c.RoleClass != "st-unknown" {
		t.Errorf("a pair with no VRRP status: role %q (%s), want not running", c.Role, c.RoleClass)
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
		"Adverts: by multicast (no unicast peers)", "Master: 198.18.0.1 (priority 110), last advert 0.4 s ago", "VIPs carried by the pair: 198.18.0.100",
		"Connection sync: wants backup, running backup", "Desired state: from https://198.18.0.1:3636: in sync at its revision 7"}
	if !c.Configured || c.Role != "backup" || c.RoleClass != "st-enabled" || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("card: %s %s %v\n%s\nwant\n%s", c.Role, c.RoleClass, c.Configured, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(c.Transitions) != 3 || c.Transitions[0].To != "backup" || c.Transitions[2].To != "backup" || c.Transitions[1].To != "master" {
		t.Errorf("transitions, newest first: %+v", c.Transitions)
	}
}

// redForm is a posted redundancy form: the toggle on, then name, value pairs.
func redForm(kv ...string) url.Values {
	v := url.Values{"redundancy": {"1"}, "preempt": {"1"}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// The redundancy form adds the block with every field, keeps the other
// settings and the services, refuses what is invalid beside its field
// with nothing stored changed, and removes the block when switched off.
func TestRedundancyFormSaves(t *testing.T) {
	e := newEnv(t)
	st := webState()
	st.Settings.TCPTimeout, st.Settings.RetireTimeout, st.Settings.KeepForeignServices = 900, 30, true
	e.seed(t, st)
	state := func() *ipvsmgr.State {
		t.Helper()
		cur, _, err := e.core.State(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return cur
	}
	keeps := func(what string, cur *ipvsmgr.State) {
		t.Helper()
		s := cur.Settings
		if s.TCPTimeout != 900 || s.RetireTimeout != 30 || !s.KeepForeignServices || len(cur.Services) != 1 || len(cur.Services[0].Servers) != 2 {
			t.Fatalf("%s: the rest changed: %+v, %d services", what, s, len(cur.Services))
		}
	}
	page := e.get(t, "alice", "/settings").Body
	for _, want := range []string{`action="/settings/redundancy"`, `name="vrid"`, `name="garp_repeat_delay"`, `action="/settings/node"`, `id="n-priority" name="priority" value="100"`} {
		if !strings.Contains(page, want) {
			t.Errorf("admin's settings page lacks %q", want)
		}
	}
	_, rev0, _ := e.core.State(t.Context())

	r := e.post(t, "alice", "/settings/redundancy", redForm("vrid", "51", "interface", "eth0", "advert_interval", "0.5",
		"unicast_peers", "198.18.0.1\n198.18.0.2", "preempt", "", "preempt_delay", "2.5", "sync_daemon", "1", "sync_interface", "eth1",
		"sync_id", "7", "track_interfaces", "eth0, eth1", "garp_count", "3", "garp_repeat_delay", "0"))
	if r.Code != http.StatusSeeOther {
		t.Fatalf("enable: %d %s", r.Code, excerpt(r.Body))
	}
	cur := state()
	keeps("enabled", cur)
	no, three, zero := false, 3, 0.0
	want := &ipvsmgr.Redundancy{VRID: 51, Interface: "eth0", AdvertInterval: 0.5, UnicastPeers: []string{"198.18.0.1", "198.18.0.2"},
		Preempt: &no, PreemptDelay: 2.5, SyncDaemon: true, SyncInterface: "eth1", SyncID: 7, TrackInterfaces: []string{"eth0", "eth1"},
		GARPCount: &three, GARPRepeatDelay: &zero}
	if !reflect.DeepEqual(cur.Settings.Redundancy, want) {
		t.Fatalf("stored %+v\nwant %+v", cur.Settings.Redundancy, want)
	}
	if _, rev, _ := e.core.State(t.Context()); rev != rev0+1 {
		t.Errorf("one revision: %d after %d", rev, rev0)
	}
	// The form shows back what is stored.
	page = e.get(t, "alice", "/settings").Body
	for _, want := range []string{`name="vrid" value="51"`, `name="advert_interval" value="0.5"`, ">198.18.0.1\n198.18.0.2</textarea>",
		`name="garp_repeat_delay" value="0"`, `name="sync_daemon" value="1" checked`} {
		if !strings.Contains(page, want) {
			t.Errorf("the saved form lacks %q", want)
		}
	}

	for _, c := range []struct{ field, value, errID, msg string }{
		{"vrid", "300", "vrid-err", "300"},
		{"advert_interval", "0.001", "advert_interval-err", "0.001"},
		{"unicast_peers", "198.18.0.1\n198.18.0.300", "unicast_peers-err", "entry 2: "},
		{"garp_count", "x", "garp_count-err", "is not a whole number"},
	} {
		_, before, _ := e.core.State(t.Context())
		r := e.post(t, "alice", "/settings/redundancy", redForm("vrid", "51", "interface", "eth0", c.field, c.value))
		if r.Code != http.StatusUnprocessableEntity {
			t.Fatalf("%s %s: %d %s", c.field, c.value, r.Code, excerpt(r.Body))
		}
		i := strings.Index(r.Body, `id="`+c.errID+`"`)
		if i < 0 || !strings.Contains(r.Body[i:i+200], c.msg) || !strings.Contains(r.Body, `aria-describedby="`+c.errID+`"`) {
			t.Errorf("%s %s: no message beside the field: %s", c.field, c.value, excerpt(r.Body[strings.Index(r.Body, `id="redundancy-form"`):]))
		}
		if after, rev, _ := e.core.State(t.Context()); rev != before || !reflect.DeepEqual(after.Settings.Redundancy, want) {
			t.Errorf("%s %s: the store changed: rev %d -> %d, %+v", c.field, c.value, before, rev, after.Settings.Redundancy)
		}
	}

	if r := e.post(t, "alice", "/settings/redundancy", url.Values{"vrid": {"51"}, "interface": {"eth0"}}); r.Code != http.StatusSeeOther {
		t.Fatalf("disable: %d %s", r.Code, excerpt(r.Body))
	}
	cur = state()
	keeps("disabled", cur)
	if cur.Settings.Redundancy != nil {
		t.Fatalf("disabled, still %+v", cur.Settings.Redundancy)
	}
}

// Stage in a draft instead: the block goes to the draft, not the state,
// until the draft is applied.
func TestRedundancyFormStages(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	if r := e.post(t, "alice", "/settings/redundancy", redForm("vrid", "9", "interface", "eth0", "stage", "1")); r.Code != http.StatusSeeOther {
		t.Fatalf("stage: %d %s", r.Code, excerpt(r.Body))
	}
	if cur, _, _ := e.core.State(t.Context()); cur.Settings.Redundancy != nil {
		t.Fatalf("staged, yet stored: %+v", cur.Settings.Redundancy)
	}
	if page := e.get(t, "alice", "/settings").Body; !strings.Contains(page, `name="vrid" value="9"`) || !strings.Contains(page, "Save in the draft") {
		t.Errorf("the draft's pair not shown: %s", excerpt(page[strings.Index(page, `id="redundancy-form"`):]))
	}
	if r := e.post(t, "alice", "/draft/apply", nil); r.Code != http.StatusSeeOther {
		t.Fatalf("apply: %d %s", r.Code, excerpt(r.Body))
	}
	if cur, _, _ := e.core.State(t.Context()); cur.Settings.Redundancy == nil || cur.Settings.Redundancy.VRID != 9 || len(cur.Services) != 1 {
		t.Fatalf("applied: %+v", cur.Settings)
	}
}

// The priority form sets this director's node priority (not a revision)
// and refuses an out-of-range one beside its field.
func TestNodePriorityForm(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	_, rev0, _ := e.core.State(t.Context())
	if r := e.post(t, "alice", "/settings/node", url.Values{"priority": {"150"}}); r.Code != http.StatusSeeOther {
		t.Fatalf("set: %d %s", r.Code, excerpt(r.Body))
	}
	n, err := e.core.NodeSettings(t.Context())
	if err != nil || n.Priority != 150 {
		t.Fatalf("priority: %+v %v", n, err)
	}
	if _, rev, _ := e.core.State(t.Context()); rev != rev0 {
		t.Errorf("the priority made a revision: %d -> %d", rev0, rev)
	}
	for _, bad := range []string{"256", "0", "high", ""} {
		r := e.post(t, "alice", "/settings/node", url.Values{"priority": {bad}})
		i := strings.Index(r.Body, `id="priority-err"`)
		if r.Code != http.StatusUnprocessableEntity || i < 0 || !strings.Contains(r.Body, `aria-describedby="priority-err"`) {
			t.Fatalf("priority %q: %d %s", bad, r.Code, excerpt(r.Body))
		}
		if bad == "256" && !strings.Contains(r.Body[i:i+200], "256 is out of range 1..255") {
			t.Errorf("priority 256: %s", r.Body[i:i+200])
		}
		if n, _ := e.core.NodeSettings(t.Context()); n.Priority != 150 {
			t.Fatalf("priority %q changed it to %d", bad, n.Priority)
		}
	}
}

// A viewer and an operator see the card without a write control, and
// their posts are refused.
func TestRedundancyFormAdminOnly(t *testing.T) {
	e := newEnv(t)
	st := webState()
	st.Settings.Redundancy = &ipvsmgr.Redundancy{VRID: 51, Interface: "eth0"}
	e.seed(t, st)
	for _, user := range []string{"vic", "oscar"} {
		page := e.get(t, user, "/settings").Body
		card := page[strings.Index(page, `id="redundancy"`):]
		for _, bad := range []string{"<form", "<input", "<button", "<textarea"} {
			if strings.Contains(card, bad) {
				t.Errorf("%s sees %s in the redundancy card", user, bad)
			}
		}
		if !strings.Contains(card, "VRID 51 on eth0") {
			t.Errorf("%s does not see the pair: %s", user, excerpt(card))
		}
		if r := e.post(t, user, "/settings/redundancy", redForm("vrid", "52", "interface", "eth0")); r.Code != http.StatusForbidden {
			t.Errorf("%s saves the pair: %d", user, r.Code)
		}
		if r := e.post(t, user, "/settings/node", url.Values{"priority": {"200"}}); r.Code != http.StatusForbidden {
			t.Errorf("%s sets the priority: %d", user, r.Code)
		}
	}
	if cur, _, _ := e.core.State(t.Context()); cur.Settings.Redundancy.VRID != 51 {
		t.Errorf("the pair changed: %+v", cur.Settings.Redundancy)
	}
	if n, _ := e.core.NodeSettings(t.Context()); n.Priority != 100 {
		t.Errorf("the priority changed: %d", n.Priority)
	}
}

// Interface names come back escaped, refused (in the form) or stored (in
// the card's facts).
func TestRedundancyFormEscapes(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	const xss = `"><script>alert(1)</script>`
	r := e.post(t, "alice", "/settings/redundancy", redForm("vrid", "5", "interface", xss, "track_interfaces", xss, "unicast_peers", xss))
	if r.Code != http.StatusUnprocessableEntity {
		t.Fatalf("xss interface: %d %s", r.Code, excerpt(r.Body))
	}
	if strings.Contains(r.Body, "<script>alert") || !strings.Contains(r.Body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("not escaped: %s", excerpt(r.Body[strings.Index(r.Body, `id="redundancy-form"`):]))
	}
	for _, id := range []string{"interface-err", "track_interfaces-err", "unicast_peers-err"} {
		if !strings.Contains(r.Body, `id="`+id+`"`) {
			t.Errorf("no %s", id)
		}
	}
}

// The pair's form does not edit settings.redundancy.auth, the instance's
// name, programs and mail, nor its sync group: saving it keeps them.
func TestRedundancyFormKeepsAuth(t *testing.T) {
	e := newEnv(t)
	st := webState()
	authBlock := &ipvsmgr.RedundancyAuth{Keys: []ipvsmgr.RedundancyKey{{ID: 1, File: "/etc/ipvsctl/vrrp-1.key"}, {ID: 2, File: "/etc/ipvsctl/vrrp-2.key"}}, ActiveKey: 2}
	on := true
	st.Settings.Redundancy = &ipvsmgr.Redundancy{VRID: 51, Interface: "eth0", Auth: authBlock, Instance: "VI_WEB",
		VRRPNotify: ipvsmgr.VRRPNotify{NotifyMaster: ipvsmgr.Argv{"/etc/keepalived/master.sh"}, Notify: ipvsmgr.Argv{"/usr/local/bin/notify"}}, SMTPAlert: &on,
		SyncGroup: &ipvsmgr.SyncGroup{Name: "VG", VRRPNotify: ipvsmgr.VRRPNotify{NotifyBackup: ipvsmgr.Argv{"/etc/keepalived/group-backup.sh"}}}}
	kept := *st.Settings.Redundancy
	e.seed(t, st)
	if r := e.post(t, "alice", "/settings/redundancy", redForm("vrid", "52", "interface", "eth0")); r.Code != http.StatusSeeOther {
		t.Fatalf("save: %d %s", r.Code, excerpt(r.Body))
	}
	cur, _, err := e.core.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	kept.VRID = 52
	if d := cmp.Diff(&kept, cur.Settings.Redundancy, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("stored (-want +got):\n%s", d)
	}
}

// The Directors card: hidden on a director that is only a pair's peer;
// on a source, each follower's state and the directors it refused.
func TestDirectorsCard(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	if page := e.get(t, "vic", "/settings").Body; strings.Contains(page, `id="directors"`) {
		t.Fatal("the Directors card on a director with no replication between directors")
	}
	fp := "sha256:" + strings.Repeat("ab", 32)
	src := server.ReplicationSource
	if _, err := e.core.SetNode(t.Context(), server.Actor{Name: "root", Via: "cli"}, server.NodePatch{Replication: &src, FollowerFingerprints: &[]string{fp}}); err != nil {
		t.Fatal(err)
	}
	head, err := e.st.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	done := e.core.FollowerPolled(server.FollowerPoll{Fingerprint: fp, Addr: "198.18.0.2", Node: "198.18.0.2", After: head.Revision, Hash: head.Hash})
	defer done()
	e.core.CallerRefused(t.Context(), "198.18.0.66", "", errorString("peer not trusted: the caller showed no certificate"))
	page := e.get(t, "vic", "/settings").Body
	i := strings.Index(page, `id="directors"`)
	if i < 0 {
		t.Fatal("no Directors card on a source")
	}
	card := page[i:]
	for _, want := range []string{"<dd class=\"wrap\">source: edits are made here, followers take them</dd>", "<dd class=\"wrap\">" + fp + "</dd>",
		"<td>198.18.0.2</td><td class=\"wrap\"><code>" + fp + "</code></td><td><span class=\"state st-up\">in sync</span></td><td>connected</td>",
		"<td>198.18.0.66</td>", "<span class=\"state st-down\">refused</span>", "the caller showed no certificate"} {
		if !strings.Contains(card, want) {
			t.Errorf("the Directors card lacks %q: %s", want, excerpt(card))
		}
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// TestBrowserDirectors shows the Directors card of a source in headless
// Chromium: it fits the window with full fingerprints (directors.png).
func TestBrowserDirectors(t *testing.T) {
	if testing.Short() {
		testenv.OptIn(t, "browser test skipped in -short mode")
	}
	e := newEnv(t)
	e.seed(t, webState())
	fp := "sha256:" + strings.Repeat("ab", 32)
	src := server.ReplicationSource
	if _, err := e.core.SetNode(t.Context(), server.Actor{Name: "root", Via: "cli"}, server.NodePatch{Replication: &src, FollowerFingerprints: &[]string{fp}}); err != nil {
		t.Fatal(err)
	}
	done := e.core.FollowerPolled(server.FollowerPoll{Fingerprint: fp, Addr: "198.18.0.2", Node: "198.18.0.2", After: 0})
	done()
	e.core.CallerRefused(t.Context(), "198.18.0.66", "sha256:"+strings.Repeat("cd", 32), errorString("peer not trusted: the caller's certificate's fingerprint is sha256:"+strings.Repeat("cd", 32)+", not the pinned "+fp))
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	b := browsertest.Start(t, 60*time.Second)
	b.Login(srv.URL+"/settings", "alice", "pw-alice", "#directors")
	if s := b.Text("#directors"); !strings.Contains(s, "behind") || !strings.Contains(s, "refused") || !strings.Contains(s, "198.18.0.66") {
		t.Errorf("Directors card: %q", s)
	}
	b.FitsWidth("the settings page with the Directors card")
	b.Do("scroll to the card", chromedp.ScrollIntoView(chromedp.CSS("#directors")))
	b.ShotWindow("directors")
}
