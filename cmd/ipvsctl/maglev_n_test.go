package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

// bgpOf is the BGP status a director's node show --json gives (nil
// while its speaker has not looked yet).
func (p *serveProc) bgpOf() *server.BGPStatus {
	p.t.Helper()
	var v server.NodeView
	if err := json.Unmarshal([]byte(p.mustCLI("node", "show", "--json")), &v); err != nil {
		p.t.Fatal(err)
	}
	return v.BGP
}

// directorOf is the other director named name in st, or nil.
func directorOf(st *server.BGPStatus, name string) *bgp.DirectorFingerprints {
	if st == nil {
		return nil
	}
	for i := range st.Directors {
		if st.Directors[i].Director == name {
			return &st.Directors[i]
		}
	}
	return nil
}

// flagged says whether st flags service on director name, and only there.
func flagged(st *server.BGPStatus, service, name string) bool {
	if st == nil || !st.Mismatch {
		return false
	}
	for _, m := range st.Mismatches {
		if m.Service == service && m.Director == name {
			return true
		}
	}
	return false
}

// metricsOf scrapes a director's /metrics over its pinned TLS with a token.
func (p *serveProc) metricsOf(tok string) string {
	p.t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: trust.Directors{Pins: []string{p.fingerprint()}}.ClientConfig("127.0.0.1", nil, nil)}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest("GET", p.url()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := hc.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		p.t.Fatalf("GET /metrics: %s %s", resp.Status, b)
	}
	return string(b)
}

// Three real daemons on loopback in BGP mode (real TLS, each with its
// own certificate; a fake kernel each), one source and two followers:
// every director hears every other's Maglev fingerprints, the followers
// through the source (a report with a believed client certificate and the
// token). With the same inputs everywhere none is flagged; a follower
// gone silent shows stale on the source and on the other follower, not as
// matching; back with a kernel that lists web's real servers the other way
// round, it is flagged by the source and by the other follower, by name
// and service, and it flags both of them.
func TestMaglevFingerprintsAcrossNDirectors(t *testing.T) {
	src, f1, f2 := newServeProc(t, "source"), newServeProc(t, "follower1"), newServeProc(t, "follower2")
	tok := peerToken(t, src.db)
	reader := viewerToken(t, src.db, "reader")
	for _, p := range []*serveProc{src, f1, f2} {
		p.start()
	}
	src.mustCLI("node", "set", "--replication", "source", "--follower-fingerprint", f1.fingerprint()+","+f2.fingerprint(), "--router-id", "198.18.0.1")
	for i, f := range []*serveProc{f1, f2} {
		f.mustCLI("node", "set", "--replication", "follower", "--peer-url", src.url(), "--peer-token", tok, "--peer-fingerprint", src.fingerprint(),
			"--router-id", fmt.Sprintf("198.18.0.%d", i+2))
	}
	// A router that is not there: the speakers try, the fingerprints do not care.
	doc := fmt.Sprintf(`{"settings": {"network": "dr", "bgp": {"asn": 65001, "peers": [{"address": "127.0.0.2", "port": %d, "asn": 65000}]}},
	  "services": [{"name": "web", "protocol": "tcp", "address": "198.18.0.100", "port": 80,
	    "servers": [{"name": "r1", "address": "198.18.1.11"}, {"name": "r2", "address": "198.18.1.12"}, {"name": "r3", "address": "198.18.1.13", "weight": 2}]}]}`, freePort(t))
	src.mustCLI("apply", "-f", writeDoc(t, doc))
	want := src.state()
	for _, f := range []*serveProc{f1, f2} {
		waitFor(t, 10*time.Second, f.name+" has the source's BGP state", func() bool { return f.state() == want })
	}

	// The same inputs everywhere: each director compares itself with both
	// others, the followers with each other through the source.
	others := map[*serveProc][]string{src: {"198.18.0.2", "198.18.0.3"}, f1: {src.url(), "198.18.0.3"}, f2: {src.url(), "198.18.0.2"}}
	matching := func(p *serveProc) bool {
		st := p.bgpOf()
		if st == nil || st.Mismatch || len(st.Fingerprints) != 1 || len(st.Directors) != 2 {
			return false
		}
		for _, name := range others[p] {
			if d := directorOf(st, name); d == nil || d.Error != "" || d.Stale || len(d.Services) != 1 || d.Services[0].Fingerprint != st.Fingerprints[0].Fingerprint || d.Services[0].Inputs != "" {
				return false
			}
		}
		return true
	}
	start := time.Now()
	for _, p := range []*serveProc{src, f1, f2} {
		waitFor(t, 30*time.Second, p.name+" matching both other directors", func() bool { return matching(p) })
	}
	t.Logf("every director compared with both others after %s", time.Since(start).Round(time.Millisecond))
	if d := directorOf(f1.bgpOf(), "198.18.0.3"); d.Via != src.url() || d.Name != "198.18.0.3" || d.Certificate != f2.fingerprint() {
		t.Errorf("follower 2 as follower 1 hears it: %+v, want it through the source with its certificate", d)
	}
	if out := src.mustCLI("status"); !strings.Contains(out, "Maglev inputs match 2 other directors") {
		t.Errorf("status on the source:\n%s", out)
	}
	if m := src.metricsOf(reader); !strings.Contains(m, `ipvsctl_bgp_maglev_mismatches{director="198.18.0.3"} 0`) ||
		!strings.Contains(m, `ipvsctl_bgp_maglev_compared{director="198.18.0.2"} 1`) {
		t.Errorf("the source's metrics lack the matching followers:\n%s", grepLines(m, "maglev"))
	}

	// Follower 2 goes silent: stale on the source and, through it, on
	// follower 1; not compared, not taken as matching.
	f2.stop()
	stale := func(p *serveProc) bool {
		st := p.bgpOf()
		d := directorOf(st, "198.18.0.3")
		return d != nil && d.Stale && d.AgeSeconds > bgp.StaleAfter.Seconds() && !st.Mismatch
	}
	for _, p := range []*serveProc{src, f1} {
		waitFor(t, 2*bgp.StaleAfter+10*time.Second, p.name+" showing follower 2 stale", func() bool { return stale(p) })
	}
	if out := src.mustCLI("status"); !strings.Contains(out, "Maglev inputs match 1 other directors, STALE (not compared): 198.18.0.3") {
		t.Errorf("status on the source with follower 2 silent:\n%s", out)
	}
	if out := f1.mustCLI("node", "show"); !strings.Contains(out, "director 198.18.0.3 (at 127.0.0.1, via "+src.url()+"): STALE, not compared: last heard") {
		t.Errorf("node show on follower 1 with follower 2 silent:\n%s", out)
	}
	if m := src.metricsOf(reader); !strings.Contains(m, `ipvsctl_bgp_maglev_compared{director="198.18.0.3"} 0`) {
		t.Errorf("the source's metrics with follower 2 silent:\n%s", grepLines(m, "maglev"))
	}

	// Follower 2 back with a kernel that lists web's real servers the
	// other way round: its Maglev table is not the others'.
	f2.env = []string{"IPVSCTL_SERVE_HELPER_KERNEL=reversed"}
	f2.start()
	waitFor(t, 30*time.Second, "the source flagging web on follower 2", func() bool { return flagged(src.bgpOf(), "web", "198.18.0.3") })
	waitFor(t, 30*time.Second, "follower 1 flagging web on follower 2", func() bool { return flagged(f1.bgpOf(), "web", "198.18.0.3") })
	waitFor(t, 30*time.Second, "follower 2 flagging web on the source and on follower 1", func() bool {
		st := f2.bgpOf()
		return flagged(st, "web", src.url()) && flagged(st, "web", "198.18.0.2")
	})
	for _, p := range []*serveProc{src, f1} {
		st := p.bgpOf()
		if len(st.Mismatches) != 1 {
			t.Errorf("%s flags %+v, want web on follower 2 only", p.name, st.Mismatches)
		}
		if m := st.Mismatches[0]; !strings.Contains(m.Why, `there "mh mh-port 198.18.1.11:80/1 198.18.1.12:80/1 198.18.1.13:80/2"`) || m.Own == m.Theirs {
			t.Errorf("%s's mismatch: %+v", p.name, m)
		}
	}
	if out := src.mustCLI("status"); !strings.Contains(out, "MAGLEV MISMATCH: web on 198.18.0.3 (node show says why); match 1 other directors") {
		t.Errorf("status on the source:\n%s", out)
	}
	if out := f1.mustCLI("node", "show"); !strings.Contains(out, "MISMATCH web with 198.18.0.3: Maglev inputs differ") {
		t.Errorf("node show on follower 1:\n%s", out)
	}
	if m := src.metricsOf(reader); !strings.Contains(m, `ipvsctl_bgp_maglev_mismatches{director="198.18.0.3"} 1`) ||
		!strings.Contains(m, `ipvsctl_bgp_maglev_mismatches{director="198.18.0.2"} 0`) {
		t.Errorf("the source's metrics with follower 2 differing:\n%s", grepLines(m, "maglev"))
	}
	if os.Getenv("IPVSCTL_SHOW") != "" {
		t.Logf("source status:\n%s\nsource node show:\n%s\nfollower 1 node show:\n%s\nsource metrics:\n%s",
			src.mustCLI("status"), src.mustCLI("node", "show"), f1.mustCLI("node", "show"), grepLines(src.metricsOf(reader), "maglev"))
	}
}

func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
