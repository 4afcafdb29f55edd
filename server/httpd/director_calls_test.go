package httpd_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

func report(t *testing.T, g *servertest.Rig, token string, rep server.FingerprintReport) (*http.Response, string) {
	t.Helper()
	b, _ := json.Marshal(rep)
	return do(t, g, token, "POST", "/api/v1/bgp/fingerprints", string(b))
}

// A report of Maglev fingerprints is kept by who the caller proved to be
// (its certificate; over plain HTTP on loopback, its token), not by the
// router ID it gives: one token that names a new router ID each time
// holds one report, not 64. A report is at most server.MaxReportBody
// bytes (413 past it, the limit named).
func TestFingerprintReportsAreKeptByTheCallersIdentity(t *testing.T) {
	g := servertest.Start(t)
	web := []bgp.ServiceFingerprint{{Service: "web", Key: "tcp 198.18.0.100:80", Fingerprint: "a8104d13221b990f"}}
	for i := range 20 {
		rid := netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)}).String()
		if resp, body := report(t, g, g.Tokens[auth.Viewer], server.FingerprintReport{RouterID: rid, Services: web}); resp.StatusCode != 200 {
			t.Fatalf("report %d: %s %s", i, resp.Status, body)
		}
	}
	if reps := server.DaemonSideOf(g.Core).FingerprintReports(); len(reps) != 1 || reps[0].Name != "198.18.0.29" {
		t.Fatalf("one token's 20 reports under 20 router IDs are kept as %d: %+v, want its latest only", len(reps), reps)
	}
	if resp, body := report(t, g, g.Tokens[auth.Operator], server.FingerprintReport{RouterID: "198.18.0.2", Services: web}); resp.StatusCode != 200 {
		t.Fatalf("another token's report: %s %s", resp.Status, body)
	}
	if n := len(server.DaemonSideOf(g.Core).FingerprintReports()); n != 2 {
		t.Errorf("%d reports after a second token's, want 2", n)
	}

	// Past the cap: 413, naming it, and nothing kept.
	big := server.FingerprintReport{RouterID: "198.18.0.3", Error: strings.Repeat("x", 4<<10)}
	for len(big.Services) < 2000 {
		big.Services = append(big.Services, bgp.ServiceFingerprint{Service: strings.Repeat("s", 60) + netip.AddrFrom4([4]byte{10, 0, byte(len(big.Services) >> 8), byte(len(big.Services))}).String(),
			Key: "tcp 198.18.0.100:80", Fingerprint: "a8104d13221b990f"})
	}
	resp, body := report(t, g, g.Tokens[auth.Admin], big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than the limit of 98304 bytes") {
		t.Fatalf("a report of %d services: %s %.200s, want 413 naming the limit", len(big.Services), resp.Status, body)
	}
	if n := len(server.DaemonSideOf(g.Core).FingerprintReports()); n != 2 {
		t.Errorf("%d reports after a refused one, want 2", n)
	}
	// 1,000 services' fingerprints fit (a director's report of its own).
	fit := server.FingerprintReport{RouterID: "198.18.0.4"}
	for i := range 1000 {
		fit.Services = append(fit.Services, bgp.ServiceFingerprint{Service: "web-" + netip.AddrFrom4([4]byte{0, 0, byte(i >> 8), byte(i)}).String(),
			Key: "tcp 198.18.0.100:80", Fingerprint: "a8104d13221b990f"})
	}
	b, _ := json.Marshal(fit)
	t.Logf("a report of 1,000 services' fingerprints: %d bytes (the cap %d)", len(b), server.MaxReportBody)
	if resp, body := report(t, g, g.Tokens[auth.Admin], fit); resp.StatusCode != 200 {
		t.Errorf("a report of 1,000 services: %s %.200s", resp.Status, body)
	}
}

// A director call (the long poll, a fingerprint report) that came through
// a proxy is refused, though its TCP peer is loopback: with X-Forwarded-For
// (or Forwarded) it is a remote client's, and from a --trusted-proxy peer
// it is whoever that proxy serves. Without either, on loopback, it passes.
func TestDirectorCallsThroughAProxyAreRefused(t *testing.T) {
	plain := servertest.Start(t)
	behind := servertest.Start(t, servertest.WithAuth(auth.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}))
	for _, g := range []*servertest.Rig{plain, behind} {
		setUp(t, g)
	}
	t.Cleanup(func() {
		server.DaemonSideOf(plain.Core).EndLongPolls()
		server.DaemonSideOf(behind.Core).EndLongPolls()
	})
	rep := `{"router_id": "198.18.0.2", "services": []}`
	calls := []struct{ method, path, body string }{{"GET", "/api/v1/state?after=0", ""}, {"POST", "/api/v1/bgp/fingerprints", rep}}
	for _, c := range calls {
		for _, tc := range []struct {
			name string
			g    *servertest.Rig
			hdr  []string
			want int
		}{
			{"direct, loopback", plain, nil, 200},
			{"X-Forwarded-For", plain, []string{"X-Forwarded-For", "203.0.113.9"}, 403},
			{"Forwarded", plain, []string{"Forwarded", "for=203.0.113.9"}, 403},
			{"X-Forwarded-For from a trusted proxy", behind, []string{"X-Forwarded-For", "203.0.113.9"}, 403},
			{"X-Forwarded-For of loopback from a trusted proxy", behind, []string{"X-Forwarded-For", "127.0.0.1"}, 403},
			{"a trusted proxy without the header", behind, nil, 403},
		} {
			resp, body := do(t, tc.g, tc.g.Tokens[auth.Viewer], c.method, c.path, c.body, tc.hdr...)
			if resp.StatusCode != tc.want || tc.want == 403 && !strings.Contains(body, "came through a proxy") {
				t.Errorf("%s %s, %s: %s %.200s, want %d", c.method, c.path, tc.name, resp.Status, body, tc.want)
			}
		}
	}
	// Operators' calls through the proxy are served as before.
	if resp, body := do(t, behind, behind.Tokens[auth.Viewer], "GET", "/api/v1/state", "", "X-Forwarded-For", "203.0.113.9"); resp.StatusCode != 200 {
		t.Errorf("an operator's GET /api/v1/state through the proxy: %s %s", resp.Status, body)
	}
}

// GET /api/v1/bgp, /node and /status show the other directors'
// fingerprints, never the inputs their reports carried: what a caller
// sends costs a status little.
func TestStatusShowsNoReportedInputs(t *testing.T) {
	g := servertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rid, drained := "198.18.0.1", true
	if _, err := g.Core.SetNode(ctx, server.Actor{Name: "root", Via: "cli"}, server.NodePatch{RouterID: &rid, Drained: &drained}); err != nil {
		t.Fatal(err)
	}
	doc := `{"settings": {"network": "dr", "bgp": {"asn": 65001, "peers": [{"address": "127.0.0.2", "port": ` + closedPort(t) + `, "asn": 65000}], "drain": {"mode": "withdraw"}}},
	  "services": [{"name": "web", "protocol": "tcp", "address": "198.18.0.100", "port": 80, "servers": [{"name": "r1", "address": "198.18.1.11"}]}]}`
	if resp, body := g.API(t, auth.Admin, "PUT", "/api/v1/state", doc); resp.StatusCode != 200 {
		t.Fatalf("PUT /state: %s %s", resp.Status, body)
	}
	var own []bgp.ServiceFingerprint
	for own == nil {
		if st := g.Core.BGPStatus(); st != nil && len(st.Fingerprints) == 1 {
			own = st.Fingerprints
		} else if ctx.Err() != nil {
			t.Fatalf("no fingerprints: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The same fingerprint (no mismatch), with inputs of its own.
	const marker = "INPUTS-AS-REPORTED-0123456789"
	rep := server.FingerprintReport{RouterID: "198.18.0.2", Services: []bgp.ServiceFingerprint{{Service: "web", Key: own[0].Key, Fingerprint: own[0].Fingerprint, Inputs: marker}}}
	if resp, body := report(t, g, g.Tokens[auth.Viewer], rep); resp.StatusCode != 200 {
		t.Fatalf("report: %s %s", resp.Status, body)
	}
	for st := g.Core.BGPStatus(); len(st.Directors) != 1; st = g.Core.BGPStatus() {
		if ctx.Err() != nil {
			t.Fatalf("the report never reached the status: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, path := range []string{"/api/v1/bgp", "/api/v1/node", "/api/v1/status"} {
		resp, body := g.API(t, auth.Viewer, "GET", path, "")
		if resp.StatusCode != 200 || !strings.Contains(body, "198.18.0.2") || strings.Contains(body, marker) {
			t.Errorf("GET %s: %s; has the reporter: %v, has its inputs: %v", path, resp.Status, strings.Contains(body, "198.18.0.2"), strings.Contains(body, marker))
		}
	}
}
