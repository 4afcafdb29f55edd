package httpd_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// closedPort is a loopback port nothing listens on: the directors' BGP
// sessions stay down, which the fingerprints do not depend on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// Two directors of a BGP group, each the other's peer (as a pair is):
// each reads the other's Maglev-input fingerprints over GET /api/v1/node
// with the other's token, and flags the service whose real servers one
// kernel holds in another order. Both are drained in withdraw mode so
// that they announce nothing: GoBGP keeps its route selection options in
// package variables that every StartBgp writes (pkg/server/server.go:2679)
// and another speaker in the same process reads while it sends a route,
// so two announcing directors in one test process race.
func TestDirectorsCompareMaglevFingerprints(t *testing.T) {
	a, b := servertest.Start(t), servertest.Start(t)
	t.Cleanup(func() { server.DaemonSideOf(a.Core).EndLongPolls(); server.DaemonSideOf(b.Core).EndLongPolls() }) // replication's polls, before the servers close
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	doc := `{"settings": {"network": "dr", "bgp": {"asn": 65001, "peers": [{"address": "127.0.0.2", "port": ` + closedPort(t) + `, "asn": 65000}], "drain": {"mode": "withdraw"}}},
	  "services": [{"name": "web", "protocol": "tcp", "address": "198.18.0.100", "port": 80,
	    "servers": [{"name": "r1", "address": "198.18.1.11"}, {"name": "r2", "address": "198.18.1.12"}, {"name": "r3", "address": "198.18.1.13", "weight": 2}]}]}`
	root := server.Actor{Name: "root", Via: "cli"}
	status := func(g *servertest.Rig) *server.BGPStatus {
		t.Helper()
		resp, body := g.API(t, auth.Viewer, "GET", "/api/v1/bgp", "")
		if resp.StatusCode == 404 { // the runner has not looked yet
			return &server.BGPStatus{}
		}
		if resp.StatusCode != 200 {
			t.Fatalf("GET /api/v1/bgp: %s %s", resp.Status, body)
		}
		var st server.BGPStatus
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("GET /api/v1/bgp: %v in %s", err, body)
		}
		return &st
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s; a: %+v; b: %+v", what, status(a), status(b))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// One speaker starts after the other (see above): a first, then b,
	// which replicates a's state; then a follows b too, as a pair does.
	for i, g := range []*servertest.Rig{a, b} {
		rid := []string{"198.18.0.1", "198.18.0.2"}[i]
		drained := true
		p := server.NodePatch{RouterID: &rid, Drained: &drained}
		if g == b {
			url, tok := a.URL, a.Tokens[auth.Viewer]
			p.PeerURL, p.PeerToken = &url, &tok
		}
		if _, err := g.Core.SetNode(ctx, root, p); err != nil {
			t.Fatal(err)
		}
		if resp, body := g.API(t, auth.Admin, "PUT", "/api/v1/state", doc); resp.StatusCode != 200 {
			t.Fatalf("PUT /state: %s %s", resp.Status, body)
		}
		wait("the speaker started", func() bool { return len(status(g).Peers) == 1 })
	}
	url, tok := b.URL, b.Tokens[auth.Viewer]
	if _, err := a.Core.SetNode(ctx, root, server.NodePatch{PeerURL: &url, PeerToken: &tok}); err != nil {
		t.Fatal(err)
	}
	// Each hears the other twice, in the answer to its report and in the
	// other's report to it: one director, named by the URL it follows
	// once its own report was answered (the other's report may come first).
	agreed := func(g *servertest.Rig) bool {
		st := status(g)
		other := map[*servertest.Rig]string{a: b.URL, b: a.URL}[g]
		return len(st.Fingerprints) == 1 && len(st.Directors) == 1 && st.Directors[0].Error == "" &&
			st.Directors[0].Director == other && len(st.Directors[0].Services) == 1 && !st.Mismatch
	}
	wait("both directors to agree", func() bool { return agreed(a) && agreed(b) })
	sa, sb := status(a), status(b)
	if sa.Fingerprints[0] != sb.Fingerprints[0] || sa.Fingerprints[0].Service != "web" ||
		sa.Fingerprints[0].Inputs != "mh mh-port 198.18.1.13:80/2 198.18.1.12:80/1 198.18.1.11:80/1" {
		t.Errorf("fingerprints a %+v, b %+v", sa.Fingerprints, sb.Fingerprints)
	}
	if sb.Directors[0].Director != a.URL || sb.Directors[0].Name != "198.18.0.1" {
		t.Errorf("b asked %+v, want a at %s", sb.Directors[0], a.URL)
	}

	// b's kernel loses r1 (the tail of the kernel's list, head first) and
	// gets it back at the head (what a delete and re-add does): its Maglev
	// table is not a's any more.
	snap := b.Core.Snapshot()
	var vs *ipvsmgr.VirtualService
	for _, s := range snap.Table.Services {
		vs = s
	}
	r1 := *vs.Dests[len(vs.Dests)-1]
	if errs := b.Kernel.Apply(ctx, []ipvsmgr.Op{{Kind: ipvsmgr.OpDelDest, Service: vs, Dest: &r1}, {Kind: ipvsmgr.OpAddDest, Service: vs, Dest: &r1}}); errs != nil && (errs[0] != nil || errs[1] != nil) {
		t.Fatal(errs)
	}
	mismatched := func(g *servertest.Rig) bool { st := status(g); return st.Mismatch && len(st.Mismatches) == 1 }
	wait("both directors to flag web", func() bool { return mismatched(a) && mismatched(b) })
	m := status(a).Mismatches[0]
	if m.Service != "web" || m.Director != b.URL || m.Own == m.Theirs || m.Own == "" ||
		!strings.Contains(m.Why, `there "mh mh-port 198.18.1.11:80/1 198.18.1.13:80/2 198.18.1.12:80/1"`) {
		t.Errorf("a's mismatch = %+v", m)
	}
	// The same over GET /api/v1/node (node show).
	resp, body := a.API(t, auth.Viewer, "GET", "/api/v1/node", "")
	var nv server.NodeView
	if err := json.Unmarshal([]byte(body), &nv); resp.StatusCode != 200 || err != nil || nv.BGP == nil || !nv.BGP.Mismatch {
		t.Errorf("GET /api/v1/node: %s %v %s", resp.Status, err, body)
	}
}

// Without settings.bgp the route says why there is nothing.
func TestBGPRouteWithoutBGPMode(t *testing.T) {
	g := servertest.Start(t)
	resp, body := g.API(t, auth.Viewer, "GET", "/api/v1/bgp", "")
	if resp.StatusCode != 404 || !strings.Contains(body, "no settings.bgp") {
		t.Errorf("GET /api/v1/bgp = %s %s, want 404 naming settings.bgp", resp.Status, body)
	}
}
